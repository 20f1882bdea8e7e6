import { z } from 'zod';
import { EpochMs, JsonObject, Success, Uuid } from './common';
import { clientFrame, type PushContract } from './frame-contract';
import { ruled } from './rules';
import { isPlainObject } from '../contracts/frame-envelope';
import { textProblem } from '../platform/text';

/**
 * A ticket's properties as the asobi family's clients send them. Unity's
 * SDK types them as a string (its serializer has no null string), so every
 * ticket it sends says `"properties": ""`, or the caller's JSON object as a
 * string. Like the reference server, anything that is not an object (or a
 * string holding one) reads as no properties, and its strategies use their
 * defaults; a string's object must be text the service can store.
 */
export function ticketProperties(value: unknown): Record<string, unknown> {
  if (isPlainObject(value)) return value;
  if (typeof value !== 'string' || value === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return {};
  }
  return isPlainObject(parsed) && textProblem(parsed) === null ? parsed : {};
}

/**
 * `POST /matchmaker` and `matchmaker.add`. An absent mode is `default`; one
 * that is not a string cannot name a mode (`matchmaker.unknown_mode` on both
 * transports, docs/decisions/0026). Properties: see `ticketProperties`; keys
 * the schema does not name (Unity's `party`) are ignored.
 */
export const MatchmakerAdd = z.object({
  mode: ruled(z.string().optional(), { code: 'matchmaker.unknown_mode' }).transform((m) => m ?? 'default'),
  properties: z
    .unknown()
    .optional()
    .transform(ticketProperties)
    .meta({ description: 'an object; absent, null, a non-object or "" read as {}, and a string holding a JSON object as that object' }),
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
  {
    type: 'match.matched',
    summary: 'The matchmaker put this player in a match.',
    payload: z.object({
      match_id: Uuid,
      players: z.array(z.string()).meta({ description: 'the grouped players\' ids: UUIDs, and `bot_…` ids for the bots a mode fills in' }),
    }),
  },
  { type: 'match.matchmaker_expired', summary: 'A ticket waited longer than the mode allows.', payload: z.object({ ticket_id: Uuid }) },
  { type: 'match.matchmaker_failed', summary: 'The matched group could not be started.', payload: z.object({ reason: z.string() }) },
];
