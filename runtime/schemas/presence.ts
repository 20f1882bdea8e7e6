import { z } from 'zod';
import { byteLength } from '../contracts/frame-envelope';
import { JsonObject, Uuid } from './common';
import { clientFrame, type PushContract } from './frame-contract';

export const METADATA_MAX_BYTES = 1024;
export const DEFAULT_STATUS = 'online';

/** A player's presence as the reply, the friends' push and the friend listing carry it. */
export const PresenceState = z.object({
  status: z.unknown().meta({ description: 'any JSON value the player chose' }),
  metadata: JsonObject,
});
export type Presence = z.output<typeof PresenceState>;

/**
 * `presence.update`. The status is the game's own vocabulary, so any JSON
 * value is kept as sent; only the metadata is bounded, since it is held in
 * memory for every online player and copied into every friend's push.
 */
export const PresenceUpdate = z.object({
  status: z.unknown().default(DEFAULT_STATUS).meta({ description: `any JSON value; absent means \`${DEFAULT_STATUS}\`` }),
  metadata: JsonObject.nullish()
    .transform((m) => m ?? {})
    .refine((m) => byteLength(JSON.stringify(m)) <= METADATA_MAX_BYTES, `must encode to at most ${METADATA_MAX_BYTES} bytes`)
    .meta({ description: `an object of at most ${METADATA_MAX_BYTES} bytes encoded; absent or null means {}` }),
});
export type PresenceUpdate = z.output<typeof PresenceUpdate>;

export const presenceUpdate = clientFrame({
  type: 'presence.update',
  summary: "Set the player's presence while a socket is live; online friends are told.",
  auth: true,
  payload: PresenceUpdate,
  absent: 'unknown_type',
  missing: 'invalid_payload',
  reply: { type: 'presence.updated', payload: PresenceState },
});

export const presenceFrames = [presenceUpdate];

export const presencePushes: PushContract[] = [
  {
    type: 'presence.updated',
    summary: "An online friend's presence changed; `offline` once their last socket closed. Unlike the reply it names the player and carries no cid.",
    payload: PresenceState.extend({ player_id: Uuid }),
  },
];
