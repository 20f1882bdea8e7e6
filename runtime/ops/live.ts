import { sql } from 'kysely';
import type { Ctx } from '../contracts/context';
import { isoSeconds } from '../platform/database';
import type { ChatChannel, ListRules, MatchmakerMode, OpsBoard, OpsBoardEntry } from '../schemas/ops';
import { memoryPage, sqlPage, type ListPage, type ListRequest } from './lists';

/**
 * The ops reads over state this node holds in memory: the matchmaker's
 * published sample and the leaderboards (merged with the stored boards, since
 * a board lives in memory before its first flush and in the table after a
 * restart until a score reopens it). Node-local: two nodes answer differently.
 */

// ---- matchmaker: the sample only, never the queue --------------------------------

export const MATCHMAKER_LIST: ListRules = {
  sorts: ['mode', 'waiting', 'oldest_wait_ms', 'average_wait_ms'],
  unique: 'mode',
  default: { sort: 'waiting', order: 'desc' },
};

export interface MatchmakerPage extends ListPage<MatchmakerMode> {
  queue: { waiting: number; modes: number; sampled_at: number | null; age_ms: number | null };
}

export function listMatchmaker(ctx: Pick<Ctx, 'live' | 'clock'>, request: ListRequest): MatchmakerPage {
  const samples = ctx.live.matchmaker.samples();
  const rows = Object.entries(samples).map(([mode, s]) => ({ mode, ...s }));
  const sampledAt = ctx.live.matchmaker.sampledAt();
  return {
    ...memoryPage(rows, MATCHMAKER_LIST, request),
    queue: {
      waiting: rows.reduce((sum, r) => sum + r.waiting, 0),
      modes: rows.length,
      sampled_at: sampledAt,
      age_ms: sampledAt === null ? null : Math.max(0, ctx.clock.now() - sampledAt),
    },
  };
}

// ---- chat channels running here ---------------------------------------------------

/** The listing enumerates at most this many running channels; the list rules then apply to those. */
export const CHANNEL_ENUMERATION_MAX = 1000;

export const CHANNEL_LIST: ListRules = {
  sorts: ['channel_id', 'members'],
  unique: 'channel_id',
  default: { sort: 'members', order: 'desc' },
  q: ['channel_id'],
};

export function listChannels(ctx: Pick<Ctx, 'live'>, request: ListRequest): ListPage<ChatChannel> {
  return memoryPage(ctx.live.chat.running(CHANNEL_ENUMERATION_MAX), CHANNEL_LIST, request);
}

// ---- leaderboards ------------------------------------------------------------------

export const BOARD_LIST: ListRules = {
  sorts: ['board_id', 'entries', 'top_score', 'updated_at'],
  unique: 'board_id',
  default: { sort: 'entries', order: 'desc' },
  q: ['board_id'],
};

/** Every board this node holds or the table stores, one row each. */
export async function listBoards(ctx: Pick<Ctx, 'db' | 'leaderboards' | 'settings'>, request: ListRequest): Promise<ListPage<OpsBoard>> {
  const stored = await ctx.db
    .selectFrom('leaderboard_entries')
    .select([
      'leaderboard_id',
      sql<string>`count(*)`.as('entries'),
      sql<string>`max(score)::text`.as('high'),
      sql<string>`min(score)::text`.as('low'),
      sql<Date>`max(updated_at)`.as('updated_at'),
    ])
    .groupBy('leaderboard_id')
    .execute();
  const boards = new Map<string, OpsBoard>();
  for (const row of stored) {
    const asc = ctx.settings.leaderboards[row.leaderboard_id]?.order === 'asc';
    boards.set(row.leaderboard_id, {
      board_id: row.leaderboard_id,
      entries: Number(row.entries),
      top_score: Number(asc ? row.low : row.high),
      updated_at: isoSeconds(row.updated_at),
      live: false,
    });
  }
  // The memory is ahead of the table (scores not yet flushed), so a live board's own figures win.
  for (const board of ctx.leaderboards.boards()) {
    const top = board.top(1)[0];
    const storedAt = boards.get(board.id)?.updated_at ?? null;
    const changedAt = board.changedAt > 0 ? isoSeconds(new Date(board.changedAt)) : null;
    boards.set(board.id, {
      board_id: board.id,
      entries: board.size,
      top_score: top ? Number(top.score) : null,
      updated_at: [storedAt, changedAt].filter((t) => t !== null).sort().at(-1) ?? null,
      live: true,
    });
  }
  return memoryPage([...boards.values()], BOARD_LIST, request);
}

export const ENTRY_LIST: ListRules = {
  sorts: ['id', 'player_id', 'score', 'sub_score', 'updated_at'],
  unique: 'player_id',
  default: { sort: 'score', order: 'desc' },
};

/**
 * A board's stored entries (what the last flush wrote), each with its place
 * on the whole board in the board's own order: score, then sub-score, then
 * player id, as the live board ranks them.
 */
export async function listBoardEntries(ctx: Pick<Ctx, 'db' | 'settings'>, boardId: string, request: ListRequest): Promise<ListPage<OpsBoardEntry>> {
  const dir = ctx.settings.leaderboards[boardId]?.order === 'asc' ? sql`asc` : sql`desc`;
  const ranked = ctx.db
    .selectFrom((eb) =>
      eb
        .selectFrom('leaderboard_entries')
        .select([
          'id',
          'leaderboard_id',
          'player_id',
          'score',
          'sub_score',
          'updated_at',
          sql<string>`row_number() over (order by score ${dir}, sub_score ${dir}, player_id asc)`.as('rank'),
        ])
        .where('leaderboard_id', '=', boardId)
        .as('entries'),
    )
    .select(['id', 'leaderboard_id', 'player_id', sql<string>`score::text`.as('score'), sql<string>`sub_score::text`.as('sub_score'), 'updated_at', 'rank']);
  // The page's text renderings of the scores must not shadow the numbers it sorts on.
  const page = await sqlPage(ranked, ENTRY_LIST, request, { score: 'entries.score', sub_score: 'entries.sub_score' });
  return {
    ...page,
    data: page.data.map((row) => ({
      id: row.id,
      leaderboard_id: row.leaderboard_id,
      player_id: row.player_id,
      score: Number(row.score),
      sub_score: Number(row.sub_score),
      rank: Number(row.rank),
      updated_at: isoSeconds(row.updated_at)!,
    })),
  };
}
