import type { Clock } from '../contracts/context';
import type { JsonValue, ScriptBinding } from '../lua/host-interface';
import { isStorableText } from '../platform/text';
import type { NodeLeaderboards, Standing } from '../contracts/services';
import { isPlayerId, saturate } from './board';

/**
 * `game.leaderboard.*` for match and RPC scripts (no client-submit opt-in needed). The
 * boards are in the host's memory, so every call answers at once, from a
 * worker through the binding channel too. Scores are truncated toward zero
 * and held to 64 bits; over Lua they travel as numbers, exact within
 * ±(2^53 − 1). Submissions skip the REST opt-in (`leaderboard_client_submit`).
 * Counts are bounded as over REST: `top` 1-100, `around` 1-50 each side.
 */

const SUBMIT = 'game.leaderboard.submit(board_id, player_id, score[, sub_score]): board_id a string, player_id a player id, scores numbers';
const TOP = 'game.leaderboard.top(board_id, count): board_id a string, count a number';
const RANK = 'game.leaderboard.rank(board_id, player_id): board_id a string, player_id a player id';
const AROUND = 'game.leaderboard.around(board_id, player_id, count): board_id a string, player_id a player id, count a number';

export function leaderboardBindings(boards: NodeLeaderboards, clock: Clock): Record<string, ScriptBinding> {
  return {
    /** `true`, or `false` when the board would be one past `leaderboard_max_boards`. */
    submit: ([boardId, playerId, score, subScore]): JsonValue => {
      if (!isBoardId(boardId) || !isId(playerId) || !isScore(score) || (subScore !== undefined && subScore !== null && !isScore(subScore))) return { error: SUBMIT };
      return boards.submit(boardId, playerId.toLowerCase(), toInt64(score), typeof subScore === 'number' ? toInt64(subScore) : 0n, clock.now()) !== null;
    },
    top: ([boardId, count]): JsonValue => {
      if (!isBoardId(boardId) || typeof count !== 'number' || Number.isNaN(count)) return { error: TOP };
      return { ok: boards.top(boardId, bounded(count, 100)).map(forLua) };
    },
    rank: ([boardId, playerId]): JsonValue => {
      if (!isBoardId(boardId) || typeof playerId !== 'string') return { error: RANK };
      const standing = boards.standing(boardId, playerId.toLowerCase());
      return standing ? { ok: standing.rank } : { error: 'not_found' };
    },
    around: ([boardId, playerId, count]): JsonValue => {
      if (!isBoardId(boardId) || typeof playerId !== 'string' || typeof count !== 'number' || Number.isNaN(count)) return { error: AROUND };
      return { ok: boards.around(boardId, playerId.toLowerCase(), bounded(count, 50)).map(forLua) };
    },
  };
}

function isBoardId(v: JsonValue | undefined): v is string {
  return typeof v === 'string' && v.length >= 1 && v.length <= 255 && isStorableText(v);
}

function isId(v: JsonValue | undefined): v is string {
  return typeof v === 'string' && isPlayerId(v);
}

function isScore(v: JsonValue | undefined): v is number {
  return typeof v === 'number' && !Number.isNaN(v);
}

/** Truncated toward zero (-1.5 → -1), ±infinity and anything past 64 bits held at the bounds. */
function toInt64(n: number): bigint {
  if (!Number.isFinite(n)) return saturate(n > 0 ? 1n << 64n : -(1n << 64n));
  return saturate(BigInt(Math.trunc(n)));
}

function bounded(n: number, max: number): number {
  return Math.min(max, Math.max(1, Math.trunc(n)));
}

/** Rows reach Lua without `updated_at`, as every binding's result rows reach it without timestamps. */
function forLua(s: Standing): JsonValue {
  return { player_id: s.playerId, score: Number(s.score), sub_score: Number(s.subScore), rank: s.rank };
}
