import { sql, type QueryCreator, type Selectable, type Transaction } from 'kysely';
import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { Database, WalletsTable } from '../contracts/tables';
import { isoSeconds, jsonb, type Db } from '../platform/database';
import { registerErasable } from '../changes/erasure';
import { isUuid } from '../platform/ids';
import { newestFirst } from '../platform/pages';
import type { CommitGuard } from '../platform/commit-guard';
import type { LedgerEntryView, LedgerQuery, WalletView } from '../schemas/economy';

/**
 * Wallets and their ledger. One wallet per (player, currency) with an integer
 * balance that never goes negative; every change of a balance writes its
 * ledger row in the same transaction, so the sum of a wallet's ledger is its
 * balance. Changes to one wallet are serialised by a row lock on it
 * (`SELECT ... FOR UPDATE`), taken before the balance is read: two changes
 * racing for the same wallet run one after the other, each on the other's
 * result, whichever path (REST purchase, game script) they come from.
 */

registerErasable(
  // Ledger rows hang off the wallet, so they go first.
  { table: 'transactions', column: 'wallet_id', mode: 'delete', via: { table: 'wallets', column: 'player_id' } },
  { table: 'wallets', column: 'player_id', mode: 'delete' },
);

/** The `integer` columns' ceiling: a balance past it cannot be stored. */
export const MAX_BALANCE = 2_147_483_647;

export type Wallet = Selectable<WalletsTable>;
type Trx = Transaction<Database>;

/** One balance change as the services describe it: `amount` is signed (negative for debits). */
export interface LedgerWrite {
  amount: number;
  reason: string;
  referenceType?: string | null;
  referenceId?: string | null;
  metadata?: Record<string, unknown>;
}

export function walletView(w: Pick<Wallet, 'currency' | 'balance'>): WalletView {
  return { currency: w.currency, balance: w.balance };
}

function unknownCurrency(currency: string): ApiError {
  return new ApiError('validation_failed', `The game declares no currency '${currency}'.`, { reason: 'unknown_currency', currency });
}

export function noPlayer(): ApiError {
  return new ApiError('player.not_found', 'No such player.', { reason: 'player_not_found' });
}

export function insufficientFunds(balance: number, price: number): ApiError {
  return new ApiError('economy.insufficient_funds', 'The balance does not cover the amount.', { balance, amount: price });
}

/** The player's wallet in `currency`, locked for the rest of the transaction; null when it does not exist. */
export async function lockedWallet(trx: Trx, playerId: string, currency: string): Promise<Wallet | null> {
  const row = await trx.selectFrom('wallets').selectAll().where('player_id', '=', playerId).where('currency', '=', currency).forUpdate().executeTakeFirst();
  return row ?? null;
}

/**
 * The player's wallet in `currency`, created at 0 when absent, locked for the
 * rest of the transaction. Two transactions creating the same wallet at once
 * both insert-or-skip, then queue on the one row. A currency the catalogue no
 * longer declares opens no new wallet.
 */
export async function openWallet(trx: Trx, ids: Ctx['ids'], playerId: string, currency: string): Promise<Wallet> {
  const found = await lockedWallet(trx, playerId, currency);
  if (found) return found;
  const declared = await trx.selectFrom('currencies').select('active').where('code', '=', currency).executeTakeFirst();
  if (!declared?.active) throw unknownCurrency(currency);
  const player = await trx.selectFrom('players').select('id').where('id', '=', playerId).executeTakeFirst();
  if (!player) throw noPlayer();
  const now = new Date();
  await trx
    .insertInto('wallets')
    .values({ id: ids.uuid(), player_id: playerId, currency, balance: 0, inserted_at: now, updated_at: now })
    .onConflict((oc) => oc.columns(['player_id', 'currency']).doNothing())
    .execute();
  return (await lockedWallet(trx, playerId, currency))!;
}

/**
 * The writes of a change to a wallet this transaction locked: the balance and
 * its ledger row, as the leading parts of one statement that the caller
 * finishes (a purchase with its inventory row). The wallet is locked, so the
 * new balance is known and nothing needs reading back: a change costs one
 * round trip. Refusals (a balance below zero or past MAX_BALANCE) come
 * before anything is written.
 */
export function changeWrites(trx: Trx, ids: Ctx['ids'], wallet: Wallet, change: LedgerWrite): { statement: QueryCreator<Database>; after: Wallet } {
  const balance = wallet.balance + change.amount;
  if (balance < 0) throw insufficientFunds(wallet.balance, -change.amount);
  if (balance > MAX_BALANCE) {
    throw new ApiError('validation_failed', `A balance cannot exceed ${MAX_BALANCE}.`, { reason: 'balance_overflow', balance: wallet.balance, amount: change.amount });
  }
  const now = new Date();
  const statement = trx
    .with('changed', (db) => db.updateTable('wallets').set({ balance, updated_at: now }).where('id', '=', wallet.id))
    .with('ledger', (db) =>
      db.insertInto('transactions').values({
        id: ids.uuid(),
        wallet_id: wallet.id,
        amount: change.amount,
        balance_after: balance,
        reason: change.reason,
        reference_type: change.referenceType ?? null,
        reference_id: change.referenceId ?? null,
        metadata: jsonb(change.metadata ?? {}),
        inserted_at: now,
      }),
    );
  // The CTE names are never referenced, so the statement is finished against the plain schema.
  return { statement: statement as unknown as QueryCreator<Database>, after: { ...wallet, balance, updated_at: now } };
}

/** A change with nothing else to write; returns the wallet after. */
export async function applyChange(trx: Trx, ids: Ctx['ids'], wallet: Wallet, change: LedgerWrite): Promise<Wallet> {
  const { statement, after } = changeWrites(trx, ids, wallet, change);
  await statement.selectNoFrom(sql<number>`1`.as('done')).execute();
  return after;
}

export interface WalletChange {
  playerId: string;
  currency: string;
  /** Positive. */
  amount: number;
  reason: string;
}

/** Credits a wallet (created if absent). Refusals: `player.not_found`, an undeclared currency, a balance past MAX_BALANCE. */
export async function grant(ctx: Pick<Ctx, 'db' | 'ids'>, c: WalletChange, guard: CommitGuard = {}): Promise<Wallet> {
  if (!isUuid(c.playerId)) throw noPlayer();
  return ctx.db.transaction().execute(async (trx) => {
    const wallet = await openWallet(trx, ctx.ids, c.playerId, c.currency);
    const after = await applyChange(trx, ctx.ids, wallet, { amount: c.amount, reason: c.reason });
    guard.beforeCommit?.();
    return after;
  });
}

/**
 * Debits a wallet. A wallet the player does not have holds 0 (and is not
 * created for a refusal); a currency the catalogue dropped can still be
 * spent, so balances left in it keep their use.
 */
export async function debit(ctx: Pick<Ctx, 'db' | 'ids'>, c: WalletChange, guard: CommitGuard = {}): Promise<Wallet> {
  if (!isUuid(c.playerId)) throw noPlayer();
  return ctx.db.transaction().execute(async (trx) => {
    const wallet = await lockedWallet(trx, c.playerId, c.currency);
    if (!wallet) {
      const declared = await trx.selectFrom('currencies').select('code').where('code', '=', c.currency).executeTakeFirst();
      if (!declared) throw unknownCurrency(c.currency);
      const player = await trx.selectFrom('players').select('id').where('id', '=', c.playerId).executeTakeFirst();
      if (!player) throw noPlayer();
      throw insufficientFunds(0, c.amount);
    }
    const after = await applyChange(trx, ctx.ids, wallet, { amount: -c.amount, reason: c.reason });
    guard.beforeCommit?.();
    return after;
  });
}

/** Every wallet of the player, in currency order. */
export async function listWallets(db: Db, playerId: string): Promise<Wallet[]> {
  if (!isUuid(playerId)) return [];
  return db.selectFrom('wallets').selectAll().where('player_id', '=', playerId).orderBy('currency').execute();
}

function ledgerView(row: Selectable<Database['transactions']>): LedgerEntryView {
  return {
    id: row.id,
    wallet_id: row.wallet_id,
    amount: row.amount,
    balance_after: row.balance_after,
    reason: row.reason,
    reference_type: row.reference_type,
    reference_id: row.reference_id,
    metadata: row.metadata,
    inserted_at: isoSeconds(row.inserted_at)!,
  };
}

/**
 * `GET /wallets/:currency/history`, newest first. Reading the history of a
 * declared currency opens the wallet at 0 (the established clients expect
 * it to exist afterwards); a currency the game never declared has no
 * history and gets no wallet.
 */
export async function walletHistory(ctx: Pick<Ctx, 'db' | 'ids'>, playerId: string, currency: string, page: LedgerQuery): Promise<LedgerEntryView[]> {
  const wallet = await ctx.db.selectFrom('wallets').select('id').where('player_id', '=', playerId).where('currency', '=', currency).executeTakeFirst();
  if (!wallet) {
    const declared = await ctx.db.selectFrom('currencies').select('active').where('code', '=', currency).executeTakeFirst();
    if (!declared?.active) return [];
    await ctx.db
      .insertInto('wallets')
      .values({ id: ctx.ids.uuid(), player_id: playerId, currency, balance: 0, inserted_at: new Date(), updated_at: new Date() })
      .onConflict((oc) => oc.columns(['player_id', 'currency']).doNothing())
      .execute();
    return [];
  }
  const rows = await newestFirst(ctx.db.selectFrom('transactions').selectAll().where('wallet_id', '=', wallet.id), page).execute();
  return rows.map(ledgerView);
}
