import { z } from 'zod';
import { idOf, IsoTime, JsonObject, pageQuery, Text, Uuid } from './common';
import { ruled } from './rules';

/**
 * Wallets, the ledger, the store and inventories (the public wallet is `{currency, balance}`; a purchase adds one item).
 * Amounts, balances, prices and quantities are integers.
 */

export const Wallet = z.object({ currency: z.string(), balance: z.number().int() });
export type WalletView = z.output<typeof Wallet>;
export const WalletList = z.object({ wallets: z.array(Wallet) });

/** One ledger row. */
export const LedgerEntry = z.object({
  id: Uuid,
  wallet_id: Uuid,
  /** Negative for debits. */
  amount: z.number().int(),
  balance_after: z.number().int(),
  reason: z.string().meta({ description: '`purchase` for store debits, `admin_grant` by default for script grants, or the reason the game script gave' }),
  reference_type: z.string().nullable().meta({ description: '`store_listing` for purchases' }),
  reference_id: z.string().nullable().meta({ description: 'the listing id for purchases' }),
  metadata: JsonObject,
  inserted_at: IsoTime,
});
export type LedgerEntryView = z.output<typeof LedgerEntry>;
export const LedgerPage = z.object({ transactions: z.array(LedgerEntry) });

/** Any currency name reads; one the game never declared has no history (and gets no wallet). */
export const WalletPath = z.object({ currency: Text });
export const LedgerQuery = pageQuery();
export type LedgerQuery = z.output<typeof LedgerQuery>;

export const StoreListing = z.object({
  id: Uuid,
  item_def_id: Uuid,
  currency: z.string(),
  price: z.number().int(),
  active: z.boolean(),
  valid_from: IsoTime.nullable(),
  valid_until: IsoTime.nullable(),
  metadata: JsonObject,
});
export type StoreListingView = z.output<typeof StoreListing>;
export const ListingList = z.object({ listings: z.array(StoreListing) });

export const StoreQuery = z.object({ currency: Text.optional().meta({ description: 'only listings priced in this currency' }) });
export type StoreQuery = z.output<typeof StoreQuery>;

export const PlayerItem = z.object({
  id: Uuid,
  item_def_id: Uuid,
  player_id: Uuid,
  quantity: z.number().int(),
  metadata: JsonObject,
  acquired_at: IsoTime,
  updated_at: IsoTime,
});
export type PlayerItemView = z.output<typeof PlayerItem>;
export const ItemList = z.object({ items: z.array(PlayerItem) });
export const InventoryQuery = pageQuery();
export type InventoryQuery = z.output<typeof InventoryQuery>;

/** Always one item: a `quantity` key is ignored. */
export const PurchaseRequest = z.object({ listing_id: idOf('economy.listing_not_found', 'listing') });
export type PurchaseRequest = z.output<typeof PurchaseRequest>;
export const Purchase = z.object({ success: z.literal(true), item: PlayerItem });

export const CONSUME_MAX = 1_000_000;
export const QUANTITY_RULE = `quantity must be an integer from 1 to ${CONSUME_MAX}`;

/**
 * The established clients expect `inventory.invalid_quantity` for every bad
 * quantity and for an absent `item_id` too; an `item_id` that is not a UUID
 * names no item. `1.0` is checked against the JSON text by the route, since
 * parsing reads it as 1.
 */
export const ConsumeRequest = z.object({
  item_id: ruled(idOf('inventory.item_not_found', 'item'), { code: 'inventory.invalid_quantity' }),
  quantity: ruled(z.number({ error: QUANTITY_RULE }).int(QUANTITY_RULE).min(1, QUANTITY_RULE).max(CONSUME_MAX, QUANTITY_RULE), { code: 'inventory.invalid_quantity' }),
});
export type ConsumeRequest = z.output<typeof ConsumeRequest>;
export const Consumed = z.object({ success: z.literal(true), remaining_quantity: z.number().int() });
