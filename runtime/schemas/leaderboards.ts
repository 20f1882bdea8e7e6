import { z } from 'zod';
import { isStorableText, UNSTORABLE_TEXT } from '../platform/text';
import { clampedInt, IsoTime, Uuid } from './common';

/** Leaderboards over REST: entries with whole-board ranks, `sub_score` stored and breaking ties (decision 0032). */

/** Any string of 1-255 characters names a board. */
export const BoardId = z.string().min(1).max(255).refine(isStorableText, UNSTORABLE_TEXT);

export const BoardPath = z.object({ id: BoardId });
export const AroundPath = z.object({
  id: BoardId,
  player_id: z
    .string()
    .transform((s) => s.toLowerCase())
    .meta({ description: 'a player without an entry (or an id that is not one) gives an empty list' }),
});

export const TopQuery = z.object({ limit: clampedInt(100, 1, 100) });
export const AroundQuery = z.object({ range: clampedInt(5, 1, 50) });

// Not `.int()`, which stops at 2^53: a stored 64-bit score past it goes out as the nearest JSON number.
const Score = z.number().meta({ description: '64-bit integer; exact over JSON within ±(2^53 − 1), the nearest number beyond' });

export const LeaderboardEntry = z.object({
  leaderboard_id: z.string(),
  player_id: Uuid,
  score: Score,
  sub_score: Score.meta({ description: 'breaks ties on score, in the board’s order' }),
  rank: z.number().int().meta({ description: '1-based position on the whole board' }),
  updated_at: IsoTime,
});
export type LeaderboardEntryView = z.output<typeof LeaderboardEntry>;

export const EntryList = z.object({ entries: z.array(LeaderboardEntry) });

/** Integers written as JSON integers within ±(2^53 − 1); the route checks the literal, which parsing would round. */
export const SubmitRequest = z.object({
  score: z.number().meta({ description: 'integer within ±(2^53 − 1), written without fraction or exponent' }),
  sub_score: z.number().optional().meta({ description: 'integer as score; default 0' }),
});

export const Submitted = LeaderboardEntry.extend({ rank: z.number().int().nullable() });

export const SCORE_RULE = 'must be an integer within ±9007199254740991 written without a fraction or exponent; larger values lose precision in JSON';
