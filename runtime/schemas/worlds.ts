import { z } from 'zod';
import { isPlainObject } from '../contracts/frame-envelope';
import type { JsonObject as ScriptObject } from '../contracts/json';
import { EpochMs, JsonObject, Success, Text, Uuid } from './common';
import { clientFrame, type PushContract } from './frame-contract';
import { JoinCtx, ModeFilter } from './matches';
import { PhaseListing } from './phases';
import { coded, ruled } from './rules';
import { votePushes } from './votes';

/**
 * Worlds on the wire: the world info object over REST and the socket, and
 * the `world.*` frames. Joining and playing happen on the socket only.
 */

export const WorldStatus = z.enum(['loading', 'running', 'finished']);
export type WorldStatus = z.output<typeof WorldStatus>;

/** A live world in a listing and over REST: no roster, no `listed`, no `quick_play`. */
export const WorldListing = z.object({
  world_id: Uuid,
  mode: z.string().nullable(),
  status: WorldStatus,
  player_count: z.number().int(),
  max_players: z.number().int(),
  grid_size: z.number().int().meta({ description: 'zones per side' }),
  started_at: EpochMs.nullable().meta({ description: 'null while loading' }),
  phase: PhaseListing.optional().meta({ description: 'only for modes that declare phases' }),
});
export type WorldListing = z.output<typeof WorldListing>;

export const WorldList = z.object({ worlds: z.array(WorldListing) });

/** What a join answers: the listing, the roster, and the mode's discovery flags; `phase` in full. */
export const WorldJoined = WorldListing.extend({
  listed: z.boolean(),
  quick_play: z.boolean(),
  players: z.array(Uuid),
  phase: JsonObject.optional(),
});
export type WorldJoined = z.output<typeof WorldJoined>;

/** `world.list` and `GET /worlds` filter alike; `joinable` is type-checked on the socket and otherwise ignored. */
export const WorldListFilter = z.object({
  mode: ModeFilter,
  has_capacity: ruled(z.boolean(), { invalidReason: 'invalid_has_capacity_filter' }).optional().meta({ description: '`true` keeps worlds with room' }),
  joinable: ruled(z.boolean(), { invalidReason: 'invalid_joinable_filter' }).optional().meta({ description: 'checked, then ignored: every live world takes joins' }),
});
export type WorldListFilter = z.output<typeof WorldListFilter>;

export const WorldListQuery = z.object({
  mode: ModeFilter,
  has_capacity: z
    .string()
    .optional()
    .transform((v) => (v === 'true' ? true : undefined))
    .meta({ description: '`true` keeps worlds with room; any other value means no filter' }),
});

/** `world.create`: a mode that is not a string names no mode. */
export const WorldCreate = z.object({
  mode: ruled(z.string(), { invalidReason: 'not_found' }).meta({ description: 'a world mode of the game' }),
});
export type WorldCreate = z.output<typeof WorldCreate>;

/**
 * `POST /worlds`: a body without `mode` is `invalid_payload`; a `mode` that
 * is not a string names no mode, so it fails as an unknown mode does.
 */
export const WorldCreateBody = z
  .unknown()
  .superRefine((body, ctx) => {
    if (!isPlainObject(body) || body.mode === undefined) ctx.addIssue({ code: 'custom', ...coded('invalid_payload', 'The body must be an object with a mode.') });
  })
  .transform((body) => ({ mode: typeof (body as { mode: unknown }).mode === 'string' ? ((body as { mode: string }).mode) : null }))
  .meta({ type: 'object', properties: { mode: { type: 'string' } }, required: ['mode'] });

export const WorldFindOrCreate = z.object({
  mode: ruled(z.string(), { invalidReason: 'unknown_request' }),
  ctx: JoinCtx,
});
export type WorldFindOrCreate = z.output<typeof WorldFindOrCreate>;

export const WorldJoin = z.object({
  world_id: ruled(z.string({ error: 'No such live world.' }), { invalidReason: 'world_not_found' }),
  ctx: JoinCtx,
});
export type WorldJoin = z.output<typeof WorldJoin>;

export const WorldId = z.object({ id: Text });

/** A `world.input`'s `seq` as the engine keeps it: a non-negative safe integer, or null (none, or anything else). */
export function inputSeq(seq: unknown): number | null {
  return typeof seq === 'number' && Number.isSafeInteger(seq) && seq >= 0 ? seq : null;
}

/**
 * `world.input`: the payload is the input, handed to the zone's
 * `handle_input` as is; a payload whose only key is `data` holding an
 * object is unwrapped (the string form belongs to `match.input`).
 */
export const WorldInput = z.record(z.string(), z.unknown()).transform((payload): ScriptObject => {
  const keys = Object.keys(payload);
  if (keys.length === 1 && keys[0] === 'data' && isPlainObject(payload.data)) return payload.data as ScriptObject;
  return payload as ScriptObject;
});

/** Largest zone coordinate a resync may name. */
const ZONE_COORD_MAX = 2 ** 32 - 1;

/** `world.resync`: anything malformed is ignored, never answered, so the schema accepts anything. */
export const WorldResync = z.unknown().transform((payload): [number, number] | null => {
  if (!isPlainObject(payload) || !Array.isArray(payload.zone) || payload.zone.length !== 2) return null;
  const [x, y] = payload.zone as unknown[];
  const ok = (v: unknown): v is number => Number.isInteger(v) && Math.abs(v as number) <= ZONE_COORD_MAX;
  return ok(x) && ok(y) ? [x, y] : null;
});

export const worldList = clientFrame({
  type: 'world.list',
  summary: 'Listed worlds that are loading or running (up to 500 ms stale).',
  auth: true,
  payload: WorldListFilter,
  absent: 'unknown_type',
  missing: 'invalid_payload',
  notObject: 'unknown_type',
  reply: { type: 'world.list', payload: WorldList },
});

export const worldCreate = clientFrame({
  type: 'world.create',
  summary: 'Create a world of a world mode and join it; the caller owns it for the per-player cap.',
  auth: true,
  payload: WorldCreate,
  absent: 'unknown_type',
  missing: 'unknown_type',
  reply: { type: 'world.joined', payload: WorldJoined },
});

export const worldFindOrCreate = clientFrame({
  type: 'world.find_or_create',
  summary: 'Join the first quick-play world of the mode with room, creating one when none has any.',
  auth: true,
  payload: WorldFindOrCreate,
  absent: 'unknown_type',
  missing: 'unknown_type',
  reply: { type: 'world.joined', payload: WorldJoined },
});

export const worldJoin = clientFrame({
  type: 'world.join',
  summary: 'Join a live world by id; spends the join bucket once the world is found. The first `world.tick` of each watched zone is a keyframe.',
  auth: true,
  payload: WorldJoin,
  absent: 'unknown_type',
  missing: 'unknown_type',
  reply: { type: 'world.joined', payload: WorldJoined },
});

export const worldLeave = clientFrame({
  type: 'world.leave',
  summary: 'Leave the current world; succeeds in a world or not. Each watched zone first sends a removal frame.',
  auth: true,
  payload: z.object({}),
  absent: 'empty',
  missing: 'invalid_payload',
  reply: { type: 'world.left', payload: Success },
});

export const worldInput = clientFrame({
  type: 'world.input',
  summary: 'Input for the zone that owns the player, with an optional top-level `seq` acknowledged by `world.ack`. Outside a world it answers a `not_in_match` notice without the cid.',
  auth: true,
  payload: WorldInput,
  absent: 'unknown_type',
  missing: 'invalid_payload',
  reply: null,
});

export const worldResync = clientFrame({
  type: 'world.resync',
  summary: 'Ask a watched zone for a keyframe after a `frame_seq` gap. Never answered with an error: malformed, unwatched or rate-limited asks are ignored.',
  auth: true,
  payload: WorldResync,
  absent: 'unknown_type',
  missing: 'invalid_payload',
  reply: null,
});

export const worldFrames = [worldList, worldCreate, worldFindOrCreate, worldJoin, worldLeave, worldInput, worldResync];

const EntityDelta = z.looseObject({ op: z.enum(['a', 'u', 'r']), id: z.string() });

export const worldPushes: PushContract[] = [
  {
    type: 'world.tick',
    summary: 'One zone\'s entity changes: a delta (`kf: false`), a keyframe (`kf: true`, all adds) or, without `frame_seq`, the removals of a zone no longer watched.',
    payload: z.object({
      zone: z.tuple([z.number().int(), z.number().int()]),
      frame_seq: z.number().int().optional(),
      kf: z.boolean().optional(),
      tick: z.number().int(),
      updates: z.array(EntityDelta),
    }),
  },
  { type: 'world.ack', summary: 'The highest input `seq` consumed for this player as of zone tick `tick`; only ever increases.', payload: z.object({ tick: z.number().int(), seq: z.number().int() }) },
  { type: 'world.terrain', summary: 'A watched zone\'s terrain chunk: base64 of the zlib-compressed chunk bytes.', payload: z.object({ coords: z.tuple([z.number().int(), z.number().int()]), data: z.string() }) },
  {
    type: 'world.phase_changed',
    summary: 'A phase transition (with `world_id`), and about every 3 s the current phase (without it).',
    payload: z.looseObject({ world_id: Uuid.optional(), status: z.enum(['waiting', 'active', 'complete']), phase: z.string().nullable() }),
  },
  { type: 'world.finished', summary: 'The world ended: the script\'s result, or `empty`, `empty_grace_expired`, `cancelled`, `phases_complete`.', payload: z.object({ world_id: Uuid, result: JsonObject }) },
  // A vote a world's `post_tick` opened: the same payloads as a match's, under `world.`.
  ...votePushes.map((push) => ({ ...push, type: push.type.replace(/^match\./, 'world.'), summary: `${push.summary} (A vote inside a world.)` })),
  {
    type: 'world.<event>',
    summary: 'A script broadcast from the world VM or any zone VM to everyone in the world (`game.broadcast`).',
    payload: JsonObject,
  },
];
