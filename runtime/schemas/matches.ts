import { z } from 'zod';
import { byteLength, isPlainObject } from '../contracts/frame-envelope';
import type { JsonObject as ScriptObject } from '../contracts/json';
import { BooleanFilter, idOf, IsoTime, JsonObject, pageQuery, Success, Text, Uuid } from './common';
import { clientFrame, type PushContract } from './frame-contract';
import { PhaseListing } from './phases';
import { coded, ruled } from './rules';

/**
 * Matches on the wire: finished records over REST, live matches over REST and
 * the socket, and the `match.*` frames. Joining and playing happen on the
 * socket only.
 */

// ---- finished records ------------------------------------------------------

/** A finished match as the public sees it: the roster and metadata are withheld. */
export const MatchRecord = z.object({
  id: Uuid,
  mode: z.string().nullable(),
  status: z.string(),
  result: JsonObject,
  started_at: IsoTime.nullable().meta({ description: 'null when the match never ran' }),
  finished_at: IsoTime.nullable(),
  inserted_at: IsoTime,
});
export type MatchRecord = z.output<typeof MatchRecord>;

export const MatchRecordList = z.object({ matches: z.array(MatchRecord) });

/** `GET /matches`: exact filters on mode and status, newest record first. */
export const MatchRecordQuery = pageQuery(50, 200).extend({
  mode: Text.optional(),
  status: Text.optional(),
});
export type MatchRecordQuery = z.output<typeof MatchRecordQuery>;

export const MatchRecordId = z.object({ id: idOf('match.not_found', 'match record') });

// ---- live matches ----------------------------------------------------------

export const LiveMatchStatus = z.enum(['waiting', 'running', 'paused', 'finished']);
export type LiveMatchStatus = z.output<typeof LiveMatchStatus>;

/** A live match in a listing, on the socket and over REST alike: no roster, no `listed`. */
export const MatchListing = z.object({
  match_id: Uuid,
  mode: z.string(),
  status: LiveMatchStatus,
  player_count: z.number().int(),
  max_players: z.number().int(),
  joinable: z.boolean(),
  phase: PhaseListing.optional().meta({ description: 'only for modes that declare phases' }),
});
export type MatchListing = z.output<typeof MatchListing>;

export const MatchList = z.object({ matches: z.array(MatchListing) });

/** What a join answers: the listing, the roster in join order, and whether the mode is listed. */
export const MatchJoined = MatchListing.extend({ players: z.array(Uuid), listed: z.boolean() });
export type MatchJoined = z.output<typeof MatchJoined>;

/** Mode names are at most this long, so a longer filter could only match nothing; it is ignored instead, as for worlds. */
const MODE_FILTER_MAX_BYTES = 64;

/** The listing's mode filter on both transports, for matches and worlds alike. */
export const ModeFilter = ruled(
  Text.optional()
    .transform((mode) => (mode !== undefined && byteLength(mode) <= MODE_FILTER_MAX_BYTES ? mode : undefined))
    .meta({ description: `exact mode name; one over ${MODE_FILTER_MAX_BYTES} bytes is ignored` }),
  { invalidReason: 'invalid_mode_filter' },
);

/**
 * `match.list`. The flags are JSON booleans here; `has_capacity: false` and
 * an absent flag both mean no filter, while `joinable` filters either way.
 */
export const MatchListFilter = z.object({
  mode: ModeFilter,
  has_capacity: ruled(z.boolean(), { invalidReason: 'invalid_has_capacity_filter' }).optional().meta({ description: '`true` keeps matches with room' }),
  joinable: ruled(z.boolean(), { invalidReason: 'invalid_joinable_filter' }).optional(),
});
export type LiveMatchFilter = z.output<typeof MatchListFilter>;

/**
 * `GET /matches/live`, the same filter spelled as query text: a flag counts
 * only when it reads exactly `true` or `false`, so a typo widens the list
 * rather than failing it.
 */
export const LiveMatchQuery = z.object({
  mode: ModeFilter,
  has_capacity: BooleanFilter.transform((v) => v ?? undefined),
  joinable: BooleanFilter.transform((v) => v ?? undefined),
});

// ---- joining and playing -----------------------------------------------------

type JoinCtxValue = string | number | boolean;

const JOIN_CTX_MAX_KEYS = 8;
const JOIN_CTX_KEY_MAX_BYTES = 64;
const JOIN_CTX_TEXT_MAX_BYTES = 256;

/** Each join-context failure has a reason of its own that clients match on. */
const JOIN_CTX_PROBLEMS = {
  invalid_join_ctx: 'ctx must be an object.',
  join_ctx_too_many_keys: `ctx holds at most ${JOIN_CTX_MAX_KEYS} keys.`,
  join_ctx_key_too_long: `A ctx key is at most ${JOIN_CTX_KEY_MAX_BYTES} bytes.`,
  join_ctx_value_too_long: `A ctx string is at most ${JOIN_CTX_TEXT_MAX_BYTES} bytes.`,
  invalid_join_ctx_value: 'A ctx value is a string, an integer or a boolean.',
} as const;

function joinCtxProblem(value: unknown): keyof typeof JOIN_CTX_PROBLEMS | null {
  if (!isPlainObject(value)) return 'invalid_join_ctx';
  const keys = Object.keys(value);
  if (keys.length > JOIN_CTX_MAX_KEYS) return 'join_ctx_too_many_keys';
  for (const key of keys) {
    if (byteLength(key) > JOIN_CTX_KEY_MAX_BYTES) return 'join_ctx_key_too_long';
    const v = value[key];
    if (typeof v === 'string') {
      if (byteLength(v) > JOIN_CTX_TEXT_MAX_BYTES) return 'join_ctx_value_too_long';
    } else if (!(typeof v === 'boolean' || Number.isInteger(v))) {
      return 'invalid_join_ctx_value';
    }
  }
  return null;
}

/**
 * What the joiner tells the script's `join`: a flat object, absent meaning
 * `{}`. Its failures answer `ws.request_failed` with the reason in the details.
 */
export const JoinCtx = z
  .unknown()
  .superRefine((value, ctx) => {
    const reason = joinCtxProblem(value);
    if (reason) ctx.addIssue({ code: 'custom', ...coded('ws.request_failed', JOIN_CTX_PROBLEMS[reason], { reason }) });
  })
  .transform((value) => value as Record<string, JoinCtxValue>)
  .optional()
  .transform((value) => value ?? {})
  .meta({
    description: `at most ${JOIN_CTX_MAX_KEYS} keys of at most ${JOIN_CTX_KEY_MAX_BYTES} bytes; values are strings of at most ${JOIN_CTX_TEXT_MAX_BYTES} bytes, integers or booleans`,
  });

/** `match.join`: the id is looked up as given, so anything but a string names no match. */
export const MatchJoin = z.object({
  match_id: ruled(z.string({ error: 'No such live match.' }), { invalidReason: 'match_not_found' }),
  ctx: JoinCtx,
});
export type MatchJoin = z.output<typeof MatchJoin>;

/** `match.find_or_create`: joins the fullest open match of a quick-play mode, or opens one. */
export const MatchFindOrCreate = z.object({
  mode: ruled(z.string(), { invalidReason: 'unknown_request' }),
  ctx: JoinCtx,
});
export type MatchFindOrCreate = z.output<typeof MatchFindOrCreate>;

/**
 * `match.input`: the payload is the input. Older clients wrap it as
 * `{data: {...}}` or `{data: "<JSON text of an object>"}`; a payload whose
 * only key is `data` holding either is unwrapped.
 */
export const MatchInput = z.record(z.string(), z.unknown()).transform((payload, ctx): ScriptObject => {
  const keys = Object.keys(payload);
  if (keys.length !== 1 || keys[0] !== 'data') return payload as ScriptObject;
  const data = payload.data;
  if (isPlainObject(data)) return data as ScriptObject;
  if (typeof data !== 'string') return payload as ScriptObject;
  let decoded: unknown;
  try {
    decoded = JSON.parse(data);
  } catch {
    decoded = undefined;
  }
  if (isPlainObject(decoded)) return decoded as ScriptObject;
  ctx.issues.push({ code: 'custom', input: data, ...coded('invalid_payload', 'data must hold the JSON text of an object.', { field: 'data' }) });
  return z.NEVER;
});

export const matchList = clientFrame({
  type: 'match.list',
  summary: 'Live matches of listed modes that are waiting or running.',
  auth: true,
  payload: MatchListFilter,
  absent: 'unknown_type',
  missing: 'invalid_payload',
  notObject: 'unknown_type',
  reply: { type: 'match.list', payload: MatchList },
});

export const matchJoin = clientFrame({
  type: 'match.join',
  summary: 'Join a live match by id; spends the join bucket once the match is found.',
  auth: true,
  payload: MatchJoin,
  absent: 'unknown_type',
  missing: 'unknown_type',
  reply: { type: 'match.joined', payload: MatchJoined },
});

export const matchFindOrCreate = clientFrame({
  type: 'match.find_or_create',
  summary: 'Join the fullest open match of a quick-play mode, opening one when none has room.',
  auth: true,
  payload: MatchFindOrCreate,
  absent: 'unknown_type',
  missing: 'unknown_type',
  reply: { type: 'match.joined', payload: MatchJoined },
});

export const matchLeave = clientFrame({
  type: 'match.leave',
  summary: 'Leave the current match; succeeds in a match or not.',
  auth: true,
  payload: z.object({}),
  absent: 'empty',
  missing: 'invalid_payload',
  reply: { type: 'match.left', payload: Success },
});

export const matchInput = clientFrame({
  type: 'match.input',
  summary: 'Input for the next tick; no reply. Outside a match it answers a `not_in_match` notice without the cid.',
  auth: true,
  payload: MatchInput,
  absent: 'unknown_type',
  missing: 'invalid_payload',
  reply: null,
});

export const matchFrames = [matchList, matchJoin, matchFindOrCreate, matchLeave, matchInput];

export const matchPushes: PushContract[] = [
  {
    type: 'match.state',
    summary: 'Every tick while the match runs: this player\'s view, or the one shared view, as the mode\'s `get_state` returns it.',
    payload: JsonObject,
  },
  { type: 'match.finished', summary: 'The match ended; its record keeps this result.', payload: z.object({ match_id: Uuid, result: JsonObject }) },
  {
    type: 'match.<event>',
    summary: 'A script broadcast to everyone in the match (`game.broadcast`); the event is 1-64 of `A-Z a-z 0-9 _ -` and never a name the server uses.',
    payload: JsonObject,
  },
];
