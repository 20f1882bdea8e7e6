import { ApiError } from '../../runtime/contracts/errors';
import { consumeItem, itemView, listInventory } from '../../runtime/economy/inventory';
import { listStore, purchase } from '../../runtime/economy/store';
import { listWallets, walletHistory, walletView } from '../../runtime/economy/wallets';
import {
  Consumed,
  ConsumeRequest,
  InventoryQuery,
  ItemList,
  LedgerPage,
  LedgerQuery,
  ListingList,
  Purchase,
  PurchaseRequest,
  QUANTITY_RULE,
  StoreQuery,
  WalletList,
  WalletPath,
} from '../../runtime/schemas/economy';
import { bodyLiteral } from '../body';
import { route, type Route } from '../contract';

/** Wallets and their ledger, the store, inventories: integer balances, one item per purchase, stacks consumed in 1-1000000. */
export const economyRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/wallets',
    summary: "The caller's wallets, one per currency it holds",
    tag: 'economy',
    auth: 'player',
    rate: 'api',
    response: WalletList,
    errors: [],
    handle: async ({ ctx, player }) => ({ wallets: (await listWallets(ctx.db, player.playerId)).map(walletView) }),
  }),
  route({
    method: 'GET',
    path: '/api/v1/wallets/:currency/history',
    summary: "A wallet's ledger, newest first; reading a declared currency opens its wallet at 0",
    tag: 'economy',
    auth: 'player',
    rate: 'api',
    params: WalletPath,
    query: LedgerQuery,
    response: LedgerPage,
    errors: [],
    handle: async ({ ctx, player, params, query }) => ({ transactions: await walletHistory(ctx, player.playerId, params.currency, query) }),
  }),
  route({
    method: 'GET',
    path: '/api/v1/store',
    summary: 'The listings on sale, optionally in one currency',
    tag: 'economy',
    auth: 'player',
    rate: 'api',
    query: StoreQuery,
    response: ListingList,
    errors: [],
    handle: async ({ ctx, query }) => ({ listings: await listStore(ctx.db, query) }),
  }),
  route({
    method: 'POST',
    path: '/api/v1/store/purchase',
    summary: 'Buy one item of a listing: the price is debited and the item added, in one transaction',
    tag: 'economy',
    auth: 'player',
    rate: 'api',
    body: PurchaseRequest,
    response: Purchase,
    errors: ['economy.listing_not_found', 'economy.listing_inactive', 'economy.insufficient_funds', 'economy.purchase_failed', 'player.not_found'],
    handle: async ({ ctx, player, body }) => ({ success: true as const, item: itemView(await purchase(ctx, player.playerId, body.listing_id)) }),
  }),
  route({
    method: 'GET',
    path: '/api/v1/inventory',
    summary: "The caller's items, newest acquisition first",
    tag: 'economy',
    auth: 'player',
    rate: 'api',
    query: InventoryQuery,
    response: ItemList,
    errors: [],
    handle: async ({ ctx, player, query }) => ({ items: await listInventory(ctx.db, player.playerId, query) }),
  }),
  route({
    method: 'POST',
    path: '/api/v1/inventory/consume',
    summary: 'Use up part or all of a stack; a stack used up is deleted',
    tag: 'economy',
    auth: 'player',
    rate: 'api',
    body: ConsumeRequest,
    response: Consumed,
    errors: ['inventory.invalid_quantity', 'inventory.item_not_found', 'inventory.insufficient_quantity', 'forbidden'],
    handle: async ({ ctx, player, body, request }) => {
      // `1.0` parses as 1; the quantity must be written as a JSON integer.
      if (!/^\d+$/.test(bodyLiteral(request, 'quantity') ?? '')) throw new ApiError('inventory.invalid_quantity', QUANTITY_RULE);
      const remaining = await consumeItem(ctx, player.playerId, body.item_id, body.quantity);
      return { success: true as const, remaining_quantity: remaining };
    },
  }),
];
