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
