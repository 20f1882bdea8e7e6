import { z } from 'zod';
import { idOf, IsoTime, JsonObject, pageQuery, Text, Uuid } from './common';

/** Tournaments over REST (the game declares them; players list, read and join). */

export const TOURNAMENT_STATUSES = ['pending', 'active', 'finished', 'cancelled'] as const;

/** What entering costs: nothing (`{}`), or an amount of one currency, charged in the join's transaction. */
export const EntryFee = z.union([
  z.strictObject({}),
  z.object({ currency: z.string(), amount: z.number().int() }),
]);

/**
 * Prizes by final rank: keys are a rank (`"1"`) or an inclusive range
 * (`"2-3"`), values what each player in it receives, by currency.
 */
export const Rewards = z.record(z.string(), z.record(z.string(), z.number().int()));

export const Tournament = z.object({
  id: Uuid,
  name: z.string(),
  leaderboard_id: z.string(),
  max_entries: z.number().int().nullable(),
  entry_fee: EntryFee,
  rewards: Rewards,
  status: z.enum(TOURNAMENT_STATUSES),
  start_at: IsoTime,
  end_at: IsoTime,
  metadata: JsonObject,
  inserted_at: IsoTime,
});
export type TournamentView = z.output<typeof Tournament>;

export const TournamentList = z.object({ tournaments: z.array(Tournament) });

/** `status` filters exactly (default `active`; an unknown value matches nothing); `limit` defaults to 50, clamped to 1–200. */
export const TournamentQuery = pageQuery(50, 200)
  .pick({ limit: true })
  .extend({ status: Text.optional().meta({ description: 'exact status filter; default active' }) });
export type TournamentFilter = z.output<typeof TournamentQuery>;

export const TournamentPath = z.object({ id: idOf('tournament.not_found', 'tournament') });

export const Joined = z.object({ success: z.literal(true), tournament_id: Uuid });

/** One frozen line of a finished tournament's results. */
export const Standing = z.object({
  rank: z.number().int(),
  player_id: Uuid,
  score: z.number().int(),
  sub_score: z.number().int(),
  reward: z.record(z.string(), z.number().int()),
});
export const StandingList = z.object({ tournament_id: Uuid, status: z.enum(TOURNAMENT_STATUSES), standings: z.array(Standing) });
