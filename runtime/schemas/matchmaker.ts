import { z } from 'zod';
import { EpochMs, JsonObject, Success, Uuid } from './common';
import { clientFrame, type PushContract } from './frame-contract';
import { ruled } from './rules';

/**
 * `POST /matchmaker` and `matchmaker.add`. An absent mode is `default`; one
 * that is not a string cannot name a mode (`matchmaker.unknown_mode` on both
 * transports, docs/decisions/0026). Absent or null properties are `{}`.
 */
export const MatchmakerAdd = z.object({
  mode: ruled(z.string().optional(), { code: 'matchmaker.unknown_mode' }).transform((m) => m ?? 'default'),
  properties: ruled(JsonObject.nullish(), { code: 'invalid_payload' }).transform((p) => p ?? {}),
});
export type MatchmakerAdd = z.output<typeof MatchmakerAdd>;

export const MatchmakerQueued = z.object({
  ticket_id: Uuid,
  status: z.literal('pending'),
  players_needed: z.number().int().nullable(),
  already_queued: z.boolean(),
});

export const MatchmakerTicket = z.object({
  id: Uuid,
  mode: z.string(),
  status: z.literal('pending'),
  properties: JsonObject,
  submitted_at: EpochMs,
});

export const TicketId = z.object({ ticket_id: z.string() });

export const matchmakerAdd = clientFrame({
  type: 'matchmaker.add',
  summary: 'Queue for a mode; one live ticket per player and mode.',
  auth: true,
  payload: MatchmakerAdd,
  absent: 'unknown_type',
  missing: 'invalid_payload',
  typed: true,
  reply: { type: 'matchmaker.queued', payload: MatchmakerQueued },
});

export const matchmakerRemove = clientFrame({
  type: 'matchmaker.remove',
  summary: 'Withdraw a ticket.',
  auth: true,
  payload: TicketId,
  absent: 'unknown_type',
  missing: 'unknown_type',
  reply: { type: 'matchmaker.removed', payload: Success },
});

export const matchmakerFrames = [matchmakerAdd, matchmakerRemove];

export const matchmakerPushes: PushContract[] = [
  { type: 'match.matched', summary: 'The matchmaker put this player in a match.', payload: z.object({ match_id: Uuid, mode: z.string(), players: z.array(Uuid) }) },
  { type: 'match.matchmaker_expired', summary: 'A ticket waited longer than the mode allows.', payload: z.object({ ticket_id: Uuid }) },
  { type: 'match.matchmaker_failed', summary: 'The matched group could not be started.', payload: z.object({ reason: z.string() }) },
];
