import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { AwaitedBinding, JsonValue } from '../lua/host-interface';
import { databaseFault } from '../platform/database';
import { isStorableText } from '../platform/text';
import { itemView } from './inventory';
import { purchase } from './store';
import { debit, grant, listWallets, MAX_BALANCE, type Wallet } from './wallets';
import { CommitAbandoned, guardOf, type CommitGuard } from '../platform/commit-guard';

/**
 * `game.economy.*` for match and RPC scripts (grant, debit, balance, purchase; amounts truncated toward zero): the same
 * services as REST, one transaction each, the same wallet locks. Answers are
 * envelopes: `{ok = value}`, or `{error = reason}` with the reasons
 * `insufficient_funds`, `listing_inactive`, `listing_not_found`,
 * `unknown_currency`, `player_not_found`, `balance_overflow`,
 * `database_unavailable`; wrong arguments answer `{error = "<usage>"}`.
 */

const GRANT = 'game.economy.grant(player_id, currency, amount[, reason])';
const DEBIT = 'game.economy.debit(player_id, currency, amount[, reason])';
const BALANCE = 'game.economy.balance(player_id)';
const PURCHASE = 'game.economy.purchase(player_id, listing_id)';
const REASON_MAX = 64;

/** What a refusal tells the script: the reason the service named, else the code's last part (`economy.insufficient_funds` → `insufficient_funds`). */
export function refusal(err: unknown): JsonValue {
  if (err instanceof ApiError) {
    const reason = err.details.reason;
    return { error: typeof reason === 'string' ? reason : err.code.slice(err.code.indexOf('.') + 1) };
  }
  // Nobody reads the answer to an abandoned call; say what happened anyway.
  if (err instanceof CommitAbandoned) return { error: 'binding_timeout' };
  if (databaseFault(err)) return { error: 'database_unavailable' };
  throw err;
}

/** Rows reach Lua without `id`, `inserted_at`, `updated_at`, as every binding's result rows do. */
function forLua(row: Record<string, unknown>): JsonValue {
  const { id: _id, inserted_at: _i, updated_at: _u, ...rest } = row;
  return rest as JsonValue;
}

function walletForLua(w: Wallet): JsonValue {
  return { player_id: w.player_id, currency: w.currency, balance: w.balance };
}

type Change = (ctx: Pick<Ctx, 'db' | 'ids'>, c: { playerId: string; currency: string; amount: number; reason: string }, guard: CommitGuard) => Promise<Wallet>;

/** `grant` and `debit`: the amount is truncated toward zero and must then be 1 to the balance ceiling. */
function change(ctx: Pick<Ctx, 'db' | 'ids'>, usage: string, apply: Change, defaultReason: string): AwaitedBinding {
  return async ([playerId, currency, amount, reason], _caller, claim) => {
    if (typeof playerId !== 'string' || typeof currency !== 'string' || typeof amount !== 'number') {
      return { error: `${usage}: player_id and currency must be strings, amount a number` };
    }
    const whole = Math.trunc(amount);
    if (!(whole >= 1 && whole <= MAX_BALANCE)) return { error: `${usage}: amount must be from 1 to ${MAX_BALANCE} after truncation` };
    if (reason !== undefined && reason !== null && (typeof reason !== 'string' || reason.length === 0 || reason.length > REASON_MAX || !isStorableText(reason))) {
      return { error: `${usage}: reason must be a string of 1-${REASON_MAX} characters` };
    }
    try {
      const wallet = await apply(ctx, { playerId: playerId.toLowerCase(), currency, amount: whole, reason: reason ?? defaultReason }, guardOf(claim));
      return { ok: walletForLua(wallet) };
    } catch (err) {
      return refusal(err);
    }
  };
}

export function economyBindings(ctx: Pick<Ctx, 'db' | 'ids' | 'clock' | 'log'>): Record<string, AwaitedBinding> {
  return {
    grant: change(ctx, GRANT, grant, 'admin_grant'),
    debit: change(ctx, DEBIT, debit, 'purchase'),

    balance: async ([playerId]) => {
      if (typeof playerId !== 'string') return { error: `${BALANCE}: player_id must be a string` };
      try {
        const wallets = await listWallets(ctx.db, playerId.toLowerCase());
        return { ok: wallets.map((w) => ({ currency: w.currency, balance: w.balance })) };
      } catch (err) {
        return refusal(err);
      }
    },

    purchase: async ([playerId, listingId], _caller, claim) => {
      if (typeof playerId !== 'string' || typeof listingId !== 'string') return { error: `${PURCHASE}: player_id and listing_id must be strings` };
      try {
        const item = await purchase(ctx, playerId.toLowerCase(), listingId.toLowerCase(), guardOf(claim));
        return { ok: forLua(itemView(item)) };
      } catch (err) {
        return refusal(err);
      }
    },
  };
}
