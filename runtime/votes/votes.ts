import { sql } from 'kysely';
import { ApiError } from '../contracts/errors';
import type { LiveMatches } from '../contracts/live';
import { isoSeconds, jsonb, type Db } from '../platform/database';
import type { Vote as VoteView, VoteStatus } from '../schemas/votes';
import type { Vote, VoteResult } from './engine';

/**
 * Stored votes: one row per vote, written when it closes (resolved, vetoed,
 * or cancelled because its match ended first). Open votes live only in the
 * host that runs them.
 */

/** At most this many votes per match list, newest first. */
const LIST_LIMIT = 50;

export interface ClosedVote {
  vote: Vote;
  /** The match (or world) it ran in. */
  matchId: string;
  status: VoteStatus;
  /** Null for a vote that closed without being counted (vetoed, cancelled). */
  result: VoteResult | null;
  openedAt: Date;
  closedAt: Date;
}

export async function recordVote(db: Db, closed: ClosedVote): Promise<void> {
  const { vote, result } = closed;
  await db
    .insertInto('votes')
    .values({
      id: vote.id,
      match_id: closed.matchId,
      template: vote.config.template,
      method: vote.config.method,
      options: jsonb(vote.config.options),
      votes_cast: jsonb(vote.votesCast()),
      result: jsonb(result ? storedResult(result) : {}),
      distribution: jsonb(result?.distribution ?? {}),
      turnout: result?.turnout ?? 0,
      eligible_count: vote.eligible.size,
      window_ms: vote.config.window_ms,
      visibility: vote.config.visibility,
      status: closed.status,
      opened_at: closed.openedAt,
      closed_at: closed.closedAt,
    })
    .execute();
}

/** The row's `result` object: the outcome without the id the row already carries. */
function storedResult(result: VoteResult): Record<string, unknown> {
  const { vote_id: _id, turnout: _turnout, ...rest } = result;
  return rest;
}

/**
 * The match's votes, for a caller who played in it: on the live match's
 * roster on this node, or on its finished record's. Anyone else is refused
 * the same way whether or not the match exists.
 */
export async function listMatchVotes(db: Db, live: LiveMatches, matchId: string, playerId: string): Promise<VoteView[]> {
  if (!live.isParticipant(matchId, playerId) && !(await playedIn(db, matchId, playerId))) {
    throw new ApiError('forbidden', 'Only players of this match may list its votes.');
  }
  const rows = await db
    .selectFrom('votes')
    .selectAll()
    .where('match_id', '=', matchId)
    .orderBy('opened_at', 'desc')
    .orderBy('id', 'desc')
    .limit(LIST_LIMIT)
    .execute();
  return rows.map(project);
}

export async function getVote(db: Db, id: string): Promise<VoteView> {
  const row = await db.selectFrom('votes').selectAll().where('id', '=', id).executeTakeFirst();
  if (!row) throw new ApiError('vote.not_found', 'No such vote.');
  return project(row);
}

async function playedIn(db: Db, matchId: string, playerId: string): Promise<boolean> {
  const row = await db
    .selectFrom('match_records')
    .select('id')
    .where('id', '=', matchId)
    .where(sql<boolean>`players @> ${jsonb([playerId])}`)
    .executeTakeFirst();
  return row !== undefined;
}

type VoteRow = {
  id: string;
  match_id: string;
  template: string;
  method: string;
  options: { id: string; label: string }[];
  votes_cast: Record<string, string | string[]>;
  result: Record<string, unknown>;
  distribution: Record<string, number>;
  turnout: number;
  eligible_count: number;
  window_ms: number;
  visibility: 'live' | 'hidden';
  status: VoteStatus;
  opened_at: Date | null;
  closed_at: Date | null;
  inserted_at: Date;
};

/** A `hidden` vote shows who chose what only once it resolved (decision 0033: on every route). */
function project(row: VoteRow): VoteView {
  const view: VoteView = {
    id: row.id,
    match_id: row.match_id,
    template: row.template,
    method: row.method as VoteView['method'],
    visibility: row.visibility,
    status: row.status,
    options: row.options ?? [],
    result: row.result ?? {},
    distribution: row.distribution ?? {},
    turnout: Number(row.turnout ?? 0),
    eligible_count: row.eligible_count ?? 0,
    window_ms: row.window_ms,
    opened_at: isoSeconds(row.opened_at),
    closed_at: isoSeconds(row.closed_at),
    inserted_at: isoSeconds(row.inserted_at)!,
  };
  if (row.visibility !== 'hidden' || row.status === 'resolved') view.votes_cast = row.votes_cast ?? {};
  return view;
}
