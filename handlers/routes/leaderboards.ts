import { ApiError, validationFailed } from '../../runtime/contracts/errors';
import type { Standing } from '../../runtime/contracts/services';
import { isoSeconds } from '../../runtime/platform/database';
import {
  AroundPath,
  AroundQuery,
  BoardPath,
  EntryList,
  SCORE_RULE,
  Submitted,
  SubmitRequest,
  TopQuery,
  type LeaderboardEntryView,
} from '../../runtime/schemas/leaderboards';
import { bodyLiteral } from '../body';
import { route, type Route } from '../contract';
import type { RequestLike } from '../http';

/** Leaderboards: top and around reads with whole-board ranks, and submissions where the operator opened a board. */
export const leaderboardRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/leaderboards/:id',
    summary: 'The top of a board; an unknown board has no entries',
    tag: 'leaderboards',
    auth: 'player',
    rate: 'api',
    params: BoardPath,
    query: TopQuery,
    response: EntryList,
    errors: [],
    handle: async ({ ctx, params, query }) => ({ entries: ctx.leaderboards.top(params.id, query.limit).map((s) => entryView(params.id, s)) }),
  }),
  route({
    method: 'GET',
    path: '/api/v1/leaderboards/:id/around/:player_id',
    summary: 'A player and up to `range` entries either side, with whole-board ranks; empty when the player has no score',
    tag: 'leaderboards',
    auth: 'player',
    rate: 'api',
    params: AroundPath,
    query: AroundQuery,
    response: EntryList,
    errors: [],
    handle: async ({ ctx, params, query }) => ({
      entries: ctx.leaderboards.around(params.id, params.player_id, query.range).map((s) => entryView(params.id, s)),
    }),
  }),
  route({
    method: 'POST',
    path: '/api/v1/leaderboards/:id',
    summary: "Submit the caller's score under the board's operator (boards the operator opened to clients only); answers the entry as it stands",
    tag: 'leaderboards',
    auth: 'player',
    rate: 'api',
    params: BoardPath,
    body: SubmitRequest,
    response: Submitted,
    errors: ['leaderboard.client_submit_disabled', 'leaderboard.capacity_reached'],
    handle: async ({ ctx, player, params, request }) => {
      if (!ctx.leaderboards.clientMaySubmit(params.id)) {
        throw new ApiError('leaderboard.client_submit_disabled', 'Scores for this board are submitted by the game, not by clients.', { board_id: params.id });
      }
      const score = integerField(request, 'score')!;
      const subScore = integerField(request, 'sub_score') ?? 0n;
      const standing = ctx.leaderboards.submit(params.id, player.playerId, score, subScore, ctx.clock.now());
      if (!standing) {
        throw new ApiError('leaderboard.capacity_reached', 'This node holds its maximum of leaderboards.', { limit: ctx.settings.leaderboard_max_boards });
      }
      return entryView(params.id, standing);
    },
  }),
];

/**
 * A body member that must be a 64-bit integer, read from its JSON text:
 * parsing rounds past 2^53 and reads `1.0` as 1, so the literal decides.
 * Undefined when absent (the schema already answered an absent `score`).
 */
function integerField(request: RequestLike, key: string): bigint | undefined {
  const literal = bodyLiteral(request, key);
  if (literal === undefined) return undefined;
  const value = /^-?(0|[1-9]\d*)$/.test(literal) ? BigInt(literal) : null;
  if (value === null || value > BigInt(Number.MAX_SAFE_INTEGER) || value < -BigInt(Number.MAX_SAFE_INTEGER)) {
    throw validationFailed('errors', { [key]: [`${key} ${SCORE_RULE}`] });
  }
  return value;
}

function entryView(boardId: string, s: Standing): LeaderboardEntryView {
  return {
    leaderboard_id: boardId,
    player_id: s.playerId,
    score: Number(s.score),
    sub_score: Number(s.subScore),
    rank: s.rank,
    updated_at: isoSeconds(new Date(s.updatedAt))!,
  };
}
