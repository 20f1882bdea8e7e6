import type { Selectable } from 'kysely';
import type { Ctx } from '../contracts/context';
import type { IapTransactionsTable } from '../contracts/tables';
import { applyChange, openWallet, type Wallet } from '../economy/wallets';
import type { CommitGuard } from '../platform/commit-guard';
import { isUuid } from '../platform/ids';
import type { StoreProvider } from './receipts';

/**
 * Redeeming a recorded receipt (decision 0035): the receipt the service
 * verified and recorded for a player turns into currency once. Nothing here
 * talks to a store; it reads what `POST /iap/*` recorded. The receipt row is
 * locked first and its `redeemed_at` set in the transaction that credits the
 * wallets, so of two redemptions racing for one receipt the second waits for
 * the first and then sees it redeemed. Wallets are locked in currency order
 * after the receipt, so two redemptions for one player never wait on each
 * other in a cycle.
 */

export type ReceiptRow = Selectable<IapTransactionsTable>;

export interface ReceiptAddress {
  playerId: string;
  provider: StoreProvider;
  transactionId: string;
}

export interface Redemption extends ReceiptAddress {
  /** Currency → positive amount; at least one entry. */
  grants: Map<string, number>;
  /** The ledger reason, also kept on the receipt. */
  reason: string;
}

/** Why a redemption changed nothing before it touched a wallet. */
export type RedemptionRefusal = 'not_found' | 'already_redeemed';

/** What ties a ledger row to the receipt that paid for it. */
export const LEDGER_REFERENCE_TYPE = 'iap';

export function ledgerReference(r: Pick<ReceiptAddress, 'provider' | 'transactionId'>): string {
  return `${r.provider}:${r.transactionId}`;
}

/**
 * The receipt when it is recorded for this player, else null: another
 * player's receipt and an erased player's (player reference nulled) read as
 * absent, so a script learns nothing about receipts it may not redeem.
 */
export async function findReceipt(ctx: Pick<Ctx, 'db'>, a: ReceiptAddress): Promise<ReceiptRow | null> {
  if (!isUuid(a.playerId)) return null;
  const row = await ctx.db
    .selectFrom('iap_transactions')
    .selectAll()
    .where('provider', '=', a.provider)
    .where('transaction_id', '=', a.transactionId)
    .where('player_id', '=', a.playerId)
    .executeTakeFirst();
  return row ?? null;
}

/**
 * Credits every grant and marks the receipt redeemed, in one transaction.
 * Answers the credited wallets (currency order) or the refusal that left
 * everything as it was; a wallet refusal (an undeclared currency, a balance
 * past the ceiling) throws the economy's error and rolls back the grants
 * made before it.
 */
export async function redeemReceipt(ctx: Pick<Ctx, 'db' | 'ids' | 'clock'>, r: Redemption, guard: CommitGuard = {}): Promise<Wallet[] | RedemptionRefusal> {
  if (!isUuid(r.playerId)) return 'not_found';
  return ctx.db.transaction().execute(async (trx) => {
    // The player filter sits in the locking query, so a receipt severed by an erasure that commits while this waits drops out here.
    const receipt = await trx
      .selectFrom('iap_transactions')
      .select(['id', 'redeemed_at'])
      .where('provider', '=', r.provider)
      .where('transaction_id', '=', r.transactionId)
      .where('player_id', '=', r.playerId)
      .forUpdate()
      .executeTakeFirst();
    if (!receipt) return 'not_found';
    if (receipt.redeemed_at !== null) return 'already_redeemed';
    const reference = { reason: r.reason, referenceType: LEDGER_REFERENCE_TYPE, referenceId: ledgerReference(r) };
    const credited: Wallet[] = [];
    for (const currency of [...r.grants.keys()].sort()) {
      const wallet = await openWallet(trx, ctx.ids, r.playerId, currency);
      credited.push(await applyChange(trx, ctx.ids, wallet, { ...reference, amount: r.grants.get(currency)! }));
    }
    await trx
      .updateTable('iap_transactions')
      .set({ redeemed_at: new Date(ctx.clock.now()), redeemed_reason: r.reason })
      .where('id', '=', receipt.id)
      .execute();
    guard.beforeCommit?.();
    return credited;
  });
}
