import type { Ctx } from '../contracts/context';
import { refusal } from '../economy/bindings';
import { guardOf } from '../platform/commit-guard';
import { MAX_BALANCE } from '../economy/wallets';
import type { AwaitedBinding, JsonValue } from '../lua/host-interface';
import { isoSeconds } from '../platform/database';
import { isStorableText } from '../platform/text';
import type { StoreProvider } from './receipts';
import { findReceipt, redeemReceipt, type ReceiptRow } from './redemption';

/**
 * `game.receipts.*` for match and RPC scripts (decision 0035): reading and
 * redeeming the store receipts `POST /iap/*` verified and recorded. Scripts
 * never verify a receipt (only the IAP routes verify and record); they only learn whether one is
 * recorded for a player and turn it into currency once.
 *
 * Answers are envelopes: `get` → `{ok = receipt}`, `redeem` → `{ok = {{currency,
 * balance}, ...}}`, or `{error = reason}` with `not_found` (no such receipt
 * for that player: unknown, another player's, or an erased player's),
 * `already_redeemed`, and the economy's `unknown_currency`,
 * `balance_overflow`, `database_unavailable`; wrong arguments answer
 * `{error = "<usage>"}` and change nothing.
 */

const GET = 'game.receipts.get(player_id, provider, transaction_id)';
const REDEEM = 'game.receipts.redeem(player_id, provider, transaction_id, grants[, reason])';
const PROVIDERS: readonly StoreProvider[] = ['apple', 'google'];
const ADDRESS = `player_id and transaction_id must be strings, provider "${PROVIDERS.join('" or "')}"`;
const REASON_MAX = 64;
/** Bounds the wallets one redemption locks while the script waits. */
const GRANTS_MAX = 16;
/** The catalogue's bound on a currency code; a longer key names nothing declared. */
const CURRENCY_MAX = 32;
const DEFAULT_REASON = 'iap_redeem';

type Address = { playerId: string; provider: StoreProvider; transactionId: string };

function addressOf(playerId: JsonValue | undefined, provider: JsonValue | undefined, transactionId: JsonValue | undefined): Address | null {
  if (typeof playerId !== 'string' || typeof transactionId !== 'string' || !PROVIDERS.includes(provider as StoreProvider)) return null;
  return { playerId: playerId.toLowerCase(), provider: provider as StoreProvider, transactionId };
}

/** A recorded transaction id is storable text; anything else cannot name a receipt (and must not reach the database). */
function recordable(transactionId: string): boolean {
  return transactionId !== '' && isStorableText(transactionId);
}

/**
 * `grants` as currency → amount, or a usage error. Amounts are whole numbers
 * from 1 to the balance ceiling and are not truncated (unlike
 * `game.economy.grant`): a grants table is the game's price list, and a
 * fraction in it is a mistake to report, not to round away.
 */
function grantsOf(grants: JsonValue | undefined): Map<string, number> | string {
  const usage = `${REDEEM}: grants must be a table of 1-${GRANTS_MAX} currency = whole amount from 1 to ${MAX_BALANCE}`;
  if (grants === null || typeof grants !== 'object' || Array.isArray(grants)) return usage;
  const entries = Object.entries(grants);
  if (entries.length === 0 || entries.length > GRANTS_MAX) return usage;
  const map = new Map<string, number>();
  for (const [currency, amount] of entries) {
    if (typeof amount !== 'number' || !Number.isInteger(amount) || amount < 1 || amount > MAX_BALANCE) return usage;
    map.set(currency, amount);
  }
  return map;
}

/** The receipt as scripts see it: without `id` and `inserted_at`, as every binding's result rows. */
function receiptForLua(row: ReceiptRow): JsonValue {
  return {
    player_id: row.player_id,
    provider: row.provider,
    transaction_id: row.transaction_id,
    original_transaction_id: row.original_transaction_id,
    product_id: row.product_id,
    redeemed: row.redeemed_at !== null,
    redeemed_at: isoSeconds(row.redeemed_at),
    redeemed_reason: row.redeemed_reason,
  };
}

export function receiptBindings(ctx: Pick<Ctx, 'db' | 'ids' | 'clock'>): Record<string, AwaitedBinding> {
  return {
    get: async ([playerId, provider, transactionId]) => {
      const address = addressOf(playerId, provider, transactionId);
      if (!address) return { error: `${GET}: ${ADDRESS}` };
      if (!recordable(address.transactionId)) return { error: 'not_found' };
      try {
        const row = await findReceipt(ctx, address);
        return row ? { ok: receiptForLua(row) } : { error: 'not_found' };
      } catch (err) {
        return refusal(err);
      }
    },

    redeem: async ([playerId, provider, transactionId, grants, reason], _caller, claim) => {
      const address = addressOf(playerId, provider, transactionId);
      if (!address) return { error: `${REDEEM}: ${ADDRESS}` };
      const amounts = grantsOf(grants);
      if (typeof amounts === 'string') return { error: amounts };
      if (reason !== undefined && reason !== null && (typeof reason !== 'string' || reason.length === 0 || reason.length > REASON_MAX || !isStorableText(reason))) {
        return { error: `${REDEEM}: reason must be a string of 1-${REASON_MAX} characters` };
      }
      if (!recordable(address.transactionId)) return { error: 'not_found' };
      // A code the catalogue could not have declared: refused as the wallet service refuses an undeclared one.
      if ([...amounts.keys()].some((code) => code.length > CURRENCY_MAX || !isStorableText(code))) return { error: 'unknown_currency' };
      try {
        const answer = await redeemReceipt(ctx, { ...address, grants: amounts, reason: reason ?? DEFAULT_REASON }, guardOf(claim));
        if (typeof answer === 'string') return { error: answer };
        return { ok: answer.map((w) => ({ currency: w.currency, balance: w.balance })) };
      } catch (err) {
        return refusal(err);
      }
    },
  };
}
