import type { Db } from '../platform/database';
import { isBotId } from '../bots/ids';
import { isoSeconds, jsonb } from '../platform/database';
import { ApiError } from '../contracts/errors';
import { newestFirst } from '../platform/pages';
import type { LiveMatchFilter, MatchListing, MatchRecord, MatchRecordQuery } from '../schemas/matches';

/**
 * Matches as the handler library sees them: the finished-match records in the
 * database and the shapes of the node's live match
 * and matchmaker state, which the host serves behind `ctx.live`.
 */

export interface NewMatchRecord {
  id: string;
  mode: string | null;
  status: string;
  players: string[];
  result: Record<string, unknown>;
  startedAt: Date | null;
  finishedAt: Date;
}

/**
 * Writes a finished match in one transaction: its record, and the players'
 * counters: everyone who played gets `games_played` + 1;
 * `winner`/`winners` and `loser`/`losers` in the result move `wins`/`losses`,
 * but only for ids that actually played, so a script cannot credit strangers.
 */
export async function recordFinishedMatch(db: Db, record: NewMatchRecord): Promise<void> {
  const played = new Set(record.players);
  const pick = (one: unknown, many: unknown) =>
    [...new Set([one, ...(Array.isArray(many) ? many : [])])].filter((id): id is string => typeof id === 'string' && played.has(id));
  // Bots are in the record's roster but have no account to count games on.
  const winners = pick(record.result.winner, record.result.winners).filter((id) => !isBotId(id));
  const losers = pick(record.result.loser, record.result.losers).filter((id) => !isBotId(id));
  const people = [...played].filter((id) => !isBotId(id));
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('match_records')
      .values({
        id: record.id,
        mode: record.mode,
        status: record.status,
        players: jsonb(record.players),
        result: jsonb(record.result),
        metadata: jsonb({}),
        started_at: record.startedAt,
        finished_at: record.finishedAt,
      })
      .execute();
    if (people.length === 0) return;
    const at = record.finishedAt;
    await trx.updateTable('player_stats').set((eb) => ({ games_played: eb('games_played', '+', 1), updated_at: at })).where('player_id', 'in', people).execute();
    if (winners.length) await trx.updateTable('player_stats').set((eb) => ({ wins: eb('wins', '+', 1) })).where('player_id', 'in', winners).execute();
    if (losers.length) await trx.updateTable('player_stats').set((eb) => ({ losses: eb('losses', '+', 1) })).where('player_id', 'in', losers).execute();
  });
}

export async function listMatchRecords(db: Db, q: MatchRecordQuery): Promise<MatchRecord[]> {
  let query = db.selectFrom('match_records').select(['id', 'mode', 'status', 'result', 'started_at', 'finished_at', 'inserted_at']);
  if (q.mode !== undefined) query = query.where('mode', '=', q.mode);
  if (q.status !== undefined) query = query.where('status', '=', q.status);
  // Newest record first: a record is written when its match ends, long after its id was made.
  const rows = await newestFirst(query, q, { table: 'match_records', column: 'inserted_at' }).execute();
  return rows.map(matchRecordView);
}

/** The id's form was checked by the route; a well-formed id may still name nothing. */
export async function getMatchRecord(db: Db, id: string): Promise<MatchRecord> {
  const row = await db
    .selectFrom('match_records')
    .select(['id', 'mode', 'status', 'result', 'started_at', 'finished_at', 'inserted_at'])
    .where('id', '=', id)
    .executeTakeFirst();
  if (!row) throw new ApiError('match.not_found', 'No such match record.');
  return matchRecordView(row);
}

export function matchRecordView(row: {
  id: string;
  mode: string | null;
  status: string;
  result: Record<string, unknown>;
  started_at: Date | null;
  finished_at: Date | null;
  inserted_at: Date;
}): MatchRecord {
  return {
    id: row.id,
    mode: row.mode,
    status: row.status,
    result: row.result ?? {},
    started_at: isoSeconds(row.started_at),
    finished_at: isoSeconds(row.finished_at),
    inserted_at: isoSeconds(row.inserted_at)!,
  };
}

// ---- live state (served by the host) -------------------------------------

export interface LiveMatches {
  /** Listed modes only, `waiting` and `running` only. */
  list(filter: LiveMatchFilter): MatchListing[];
  /** The player was admitted to this node's live (or just finished) match of that id. */
  isParticipant(matchId: string, playerId: string): boolean;
}

export interface MatchmakerQueued {
  ticket_id: string;
  status: 'pending';
  players_needed: number | null;
  already_queued: boolean;
}

/** `GET /matchmaker/:ticket_id`: the key is `id`; `submitted_at` is epoch ms. */
export interface MatchmakerTicketView {
  id: string;
  mode: string;
  status: 'pending';
  properties: Record<string, unknown>;
  submitted_at: number;
}

/** What the ops plane reads per mode, published every matchmaker tick. */
export interface MatchmakerSample {
  waiting: number;
  oldest_wait_ms: number;
  average_wait_ms: number;
}

export interface LiveMatchmaker {
  /** Throws `matchmaker.unknown_mode` / `matchmaker.queue_full`. */
  add(playerId: string, mode: string, properties: Record<string, unknown>): MatchmakerQueued;
  /** Throws `matchmaker.ticket_not_found` (404), for another player's ticket too. */
  get(playerId: string, ticketId: string): MatchmakerTicketView;
  remove(playerId: string, ticketId: string): void;
  /** The latest per-mode sample; never touches the queue. */
  samples(): Record<string, MatchmakerSample>;
  /** Epoch ms the latest sample was taken, or null before the first. */
  sampledAt(): number | null;
}
