import type { Selectable, Transaction } from 'kysely';
import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { Database, TournamentsTable } from '../contracts/tables';
import { applyChange, lockedWallet, openWallet } from '../economy/wallets';
import { isoSeconds, jsonb, type Db } from '../platform/database';
import { registerErasable } from '../changes/erasure';
import type { TournamentFilter, TournamentView } from '../schemas/tournaments';

/**
 * Tournaments: the game declares them (runtime/tournaments/declarations.ts),
 * players join them, and the host's tournament clock moves each one
 * `pending → active` at `start_at` and `active → finished` at `end_at`,
 * freezing the standings of its board and paying the rewards in the same
 * transaction, so a tournament pays exactly once however often a node
 * restarts or how many nodes race to finish it (decision 0034).
 */

// An erased player leaves the tournaments they entered and the results they
// were in (the ranks of the others stay as frozen).
registerErasable(
  { table: 'tournament_entrants', column: 'player_id', mode: 'delete' },
  { table: 'tournament_standings', column: 'player_id', mode: 'delete' },
);

type Trx = Transaction<Database>;
export type TournamentRow = Selectable<TournamentsTable>;

/** A tournament accepts entrants until it ends. */
const OPEN: TournamentRow['status'][] = ['pending', 'active'];

export interface EntryFee {
  currency: string;
  amount: number;
}

/** A rank or an inclusive range of ranks, and what each player in it receives, by currency. */
export interface RewardTier {
  from: number;
  to: number;
  currencies: Record<string, number>;
}

/** One ranked line of a board, as the host's leaderboards give it. */
export interface BoardLine {
  playerId: string;
  score: bigint;
  subScore: bigint;
}

/** Where the clock reads a tournament's final order: these players' lines on its board, best first (players without a score left out). */
export type StandingsSource = (leaderboardId: string, playerIds: readonly string[]) => readonly BoardLine[];

export function feeOf(row: Pick<TournamentRow, 'entry_fee'>): EntryFee | null {
  const fee = row.entry_fee as Partial<EntryFee>;
  return typeof fee.currency === 'string' && typeof fee.amount === 'number' && fee.amount > 0 ? { currency: fee.currency, amount: fee.amount } : null;
}

/** `"1"` or `"2-3"`; anything else names no rank (declarations are checked before they get here). */
export function parseRankRange(key: string): { from: number; to: number } | null {
  const m = /^([1-9]\d{0,5})(?:-([1-9]\d{0,5}))?$/.exec(key);
  if (!m) return null;
  const from = Number(m[1]);
  const to = m[2] === undefined ? from : Number(m[2]);
  return to >= from ? { from, to } : null;
}

export function rewardTiers(row: Pick<TournamentRow, 'rewards'>): RewardTier[] {
  const tiers: RewardTier[] = [];
  for (const [key, currencies] of Object.entries(row.rewards as Record<string, Record<string, number>>)) {
    const range = parseRankRange(key);
    if (range) tiers.push({ ...range, currencies });
  }
  return tiers.sort((a, b) => a.from - b.from);
}

/** The columns the public view reads. */
export const TOURNAMENT_VIEW_COLUMNS = ['id', 'name', 'leaderboard_id', 'max_entries', 'entry_fee', 'rewards', 'status', 'start_at', 'end_at', 'metadata', 'inserted_at'] as const;

export function tournamentView(row: Pick<TournamentRow, (typeof TOURNAMENT_VIEW_COLUMNS)[number]>): TournamentView {
  return {
    id: row.id,
    name: row.name,
    leaderboard_id: row.leaderboard_id,
    max_entries: row.max_entries,
    entry_fee: feeOf(row) ?? {},
    rewards: row.rewards as TournamentView['rewards'],
    status: row.status,
    start_at: isoSeconds(row.start_at)!,
    end_at: isoSeconds(row.end_at)!,
    metadata: row.metadata,
    inserted_at: isoSeconds(row.inserted_at)!,
  };
}

/** By `start_at`, earliest first; `status` defaults to `active`. */
export async function listTournaments(db: Db, filter: TournamentFilter): Promise<TournamentView[]> {
  const rows = await db
    .selectFrom('tournaments')
    .selectAll()
    .where('status', '=', (filter.status ?? 'active') as TournamentRow['status'])
    .orderBy('start_at', 'asc')
    .orderBy('id', 'asc')
    .limit(filter.limit)
    .execute();
  return rows.map(tournamentView);
}

export async function getTournament(db: Db, id: string): Promise<TournamentView> {
  const row = await db.selectFrom('tournaments').selectAll().where('id', '=', id).executeTakeFirst();
  if (!row) throw notFound();
  return tournamentView(row);
}

function notFound(): ApiError {
  return new ApiError('tournament.not_found', 'No such tournament, or it is no longer running.');
}

/**
 * Enters the player, charging the entry fee in the same transaction. The
 * tournament's row is locked first, so concurrent joins queue on it and
 * `max_entries` holds exactly. A tournament that ended (finished or
 * cancelled) answers as unknown, as the clients expect.
 */
export async function joinTournament(ctx: Pick<Ctx, 'db' | 'ids' | 'clock'>, playerId: string, id: string): Promise<{ success: true; tournament_id: string }> {
  return ctx.db.transaction().execute(async (trx) => {
    const row = await trx.selectFrom('tournaments').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
    if (!row || !OPEN.includes(row.status)) throw notFound();
    const already = await trx.selectFrom('tournament_entrants').select('player_id').where('tournament_id', '=', id).where('player_id', '=', playerId).executeTakeFirst();
    if (already) throw new ApiError('tournament.already_joined', 'You already entered this tournament.');
    if (row.max_entries !== null) {
      const { n } = await trx.selectFrom('tournament_entrants').select((eb) => eb.fn.countAll<string>().as('n')).where('tournament_id', '=', id).executeTakeFirstOrThrow();
      if (Number(n) >= row.max_entries) throw new ApiError('tournament.full', 'The tournament has no places left.', { max_entries: row.max_entries });
    }
    const fee = feeOf(row);
    if (fee) {
      const wallet = await openWallet(trx, ctx.ids, playerId, fee.currency);
      await applyChange(trx, ctx.ids, wallet, { amount: -fee.amount, reason: 'tournament_entry', referenceType: 'tournament', referenceId: id });
    }
    await trx
      .insertInto('tournament_entrants')
      .values({ tournament_id: id, player_id: playerId, fee_currency: fee?.currency ?? null, fee_amount: fee?.amount ?? 0, joined_at: new Date(ctx.clock.now()) })
      .execute();
    return { success: true as const, tournament_id: id };
  });
}

/** The tournaments the clock still has to move, with the instant each is next due. */
export async function openTournaments(db: Db): Promise<Pick<TournamentRow, 'id' | 'status' | 'start_at' | 'end_at'>[]> {
  return db.selectFrom('tournaments').select(['id', 'status', 'start_at', 'end_at']).where('status', 'in', OPEN).execute();
}

export interface Advanced {
  activated: string[];
  finished: string[];
}

/**
 * Moves every open tournament that is due at `now`: starts the pending ones
 * whose `start_at` has passed and finishes the ones whose `end_at` has (a
 * node that was down through a whole tournament starts and finishes it at
 * once). Each finish is its own transaction.
 */
export async function advanceTournaments(ctx: Pick<Ctx, 'db' | 'ids' | 'log'>, now: number, standings: StandingsSource): Promise<Advanced> {
  const at = new Date(now);
  const activated = await ctx.db
    .updateTable('tournaments')
    .set({ status: 'active', updated_at: at })
    .where('status', '=', 'pending')
    .where('start_at', '<=', at)
    .returning('id')
    .execute();
  const due = await ctx.db.selectFrom('tournaments').select('id').where('status', '=', 'active').where('end_at', '<=', at).execute();
  const finished: string[] = [];
  for (const t of due) if (await finishTournament(ctx, t.id, standings, at)) finished.push(t.id);
  return { activated: activated.map((r) => r.id), finished };
}

/**
 * Freezes the standings of the tournament's entrants and pays each rank's
 * reward, in one transaction that first flips the status from `active` to
 * `finished`: whoever flips it pays, anyone else (a second node, a retry after
 * a crash that rolled the first attempt back) finds nothing to do.
 */
async function finishTournament(ctx: Pick<Ctx, 'db' | 'ids' | 'log'>, id: string, standings: StandingsSource, at: Date): Promise<boolean> {
  return ctx.db.transaction().execute(async (trx) => {
    const row = await trx
      .updateTable('tournaments')
      .set({ status: 'finished', finished_at: at, updated_at: at })
      .where('id', '=', id)
      .where('status', '=', 'active')
      .returningAll()
      .executeTakeFirst();
    if (!row) return false;
    const entrants = await trx.selectFrom('tournament_entrants').select('player_id').where('tournament_id', '=', id).execute();
    // The board is this node's memory, read at once: the transaction waits on nothing else.
    const ranked = standings(row.leaderboard_id, entrants.map((e) => e.player_id));
    const tiers = rewardTiers(row);
    for (let i = 0; i < ranked.length; i++) {
      const rank = i + 1;
      const line = ranked[i]!;
      const tier = tiers.find((t) => rank >= t.from && rank <= t.to);
      const paid = tier ? await payReward(trx, ctx, id, line.playerId, rank, tier.currencies) : {};
      await trx
        .insertInto('tournament_standings')
        .values({ tournament_id: id, rank, player_id: line.playerId, score: line.score.toString(), sub_score: line.subScore.toString(), reward: jsonb(paid) })
        .execute();
    }
    ctx.log.info('tournament_finished', { tournament_id: id, entrants: entrants.length, ranked: ranked.length });
    return true;
  });
}

/**
 * Credits one rank's reward. A reward the economy refuses (a currency the
 * catalogue dropped, a balance at its ceiling) is logged and left out of
 * what the standing records as paid, rather than holding every other
 * entrant's prize hostage.
 */
async function payReward(trx: Trx, ctx: Pick<Ctx, 'ids' | 'log'>, id: string, playerId: string, rank: number, currencies: Record<string, number>): Promise<Record<string, number>> {
  const paid: Record<string, number> = {};
  for (const [currency, amount] of Object.entries(currencies)) {
    try {
      const wallet = await openWallet(trx, ctx.ids, playerId, currency);
      await applyChange(trx, ctx.ids, wallet, { amount, reason: 'tournament_reward', referenceType: 'tournament', referenceId: id, metadata: { rank } });
      paid[currency] = amount;
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      ctx.log.warn('tournament_reward_refused', { tournament_id: id, player_id: playerId, rank, currency, code: err.code });
    }
  }
  return paid;
}

/**
 * Ends a tournament that has not finished and refunds every entrant exactly
 * what they paid, inside the caller's transaction. Returns false when there
 * was nothing to cancel.
 */
export async function cancelTournament(trx: Trx, ids: Ctx['ids'], id: string, at: Date): Promise<boolean> {
  const row = await trx
    .updateTable('tournaments')
    .set({ status: 'cancelled', updated_at: at })
    .where('id', '=', id)
    .where('status', 'in', OPEN)
    .returning('id')
    .executeTakeFirst();
  if (!row) return false;
  const paid = await trx
    .selectFrom('tournament_entrants')
    .select(['player_id', 'fee_currency', 'fee_amount'])
    .where('tournament_id', '=', id)
    .where('fee_amount', '>', 0)
    .execute();
  for (const e of paid) {
    // The entrant's wallet exists (the fee came out of it), so a dropped currency still refunds.
    const wallet = await lockedWallet(trx, e.player_id, e.fee_currency!);
    if (wallet) await applyChange(trx, ids, wallet, { amount: e.fee_amount, reason: 'tournament_refund', referenceType: 'tournament', referenceId: id });
  }
  return true;
}

/** The frozen results of a finished tournament, best first (empty before it finishes). */
export async function tournamentStandings(db: Db, id: string) {
  const row = await db.selectFrom('tournaments').select(['id', 'status']).where('id', '=', id).executeTakeFirst();
  if (!row) throw notFound();
  const lines = await db.selectFrom('tournament_standings').selectAll().where('tournament_id', '=', id).orderBy('rank', 'asc').execute();
  return {
    tournament_id: row.id,
    status: row.status,
    // As leaderboard entries answer them: the nearest JSON number.
    standings: lines.map((l) => ({ rank: l.rank, player_id: l.player_id, score: Number(l.score), sub_score: Number(l.sub_score), reward: l.reward as Record<string, number> })),
  };
}
