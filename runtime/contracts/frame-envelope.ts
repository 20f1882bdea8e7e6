import { ApiError, type ErrorCode, type ErrorDetails } from './errors';
import { textProblem, textProblemMessage } from '../platform/text';

/**
 * WebSocket frames. The reason → code table is the
 * one place a socket failure gets its code: every `error` frame is built from
 * a `FrameError`, which wraps an `ApiError` so REST and the socket share the
 * closed code set and its messages.
 */

/** What the server sends: `cid` only on a direct reply to a frame that carried one. */
export interface ServerFrame {
  type: string;
  cid?: unknown;
  payload: Record<string, unknown>;
}

/** An envelope that parsed: `type` is a string; the rest is as the client sent it. */
export interface ClientFrame {
  type: string;
  /** The `payload` key, or undefined when absent. */
  payload: unknown;
  hasPayload: boolean;
  cid: unknown;
  hasCid: boolean;
  /** Top-level `seq` sibling (world.input only). */
  seq?: unknown;
  /**
   * Set when the payload holds text the database cannot store or nests too
   * deep: the gateway answers it instead of running the handler, once the
   * type is known to be routed (an unknown type stays `unknown_type`).
   */
  refusal?: ApiError;
}

/** Reasons with a code of their own. Every other reason is `ws.request_failed`. */
const REASON_CODES: Readonly<Record<string, ErrorCode>> = {
  payload_too_large: 'payload_too_large',
  invalid_json: 'invalid_json',
  invalid_message: 'invalid_message',
  invalid_payload: 'invalid_payload',
  missing_field: 'missing_field',
  rate_limited: 'rate_limited',
  join_rate_limited: 'join_rate_limited',
  unknown_type: 'unknown_type',
  internal: 'internal',
  internal_error: 'internal',
  invalid_token: 'unauthenticated',
  not_authorized: 'forbidden',
  not_owner: 'forbidden',
  not_in_match: 'match.not_in_match',
  match_not_found: 'match.not_found',
  match_full: 'match.full',
  match_locked: 'match.locked',
  join_refused: 'match.join_refused',
  world_not_found: 'world.not_found',
  already_in_world: 'world.already_joined',
  invalid_channel_id: 'chat.invalid_channel_id',
  too_many_channels: 'chat.too_many_channels',
  unknown_mode: 'matchmaker.unknown_mode',
  queue_full: 'matchmaker.queue_full',
  blocked: 'dm.blocked',
  content_empty: 'dm.content_empty',
  content_too_large: 'dm.content_too_large',
  fleet_unavailable: 'fleet_unavailable',
};

/** The reason a domain `ApiError` travels under on the socket (inverse of the table). */
const CODE_REASONS: ReadonlyMap<ErrorCode, string> = (() => {
  const m = new Map<ErrorCode, string>();
  for (const [reason, code] of Object.entries(REASON_CODES)) if (!m.has(code)) m.set(code, reason);
  m.set('internal', 'internal_error');
  m.set('forbidden', 'not_owner');
  m.set('player.not_found', 'not_found');
  return m;
})();

const MESSAGES: Readonly<Record<string, string>> = {
  payload_too_large: 'The frame exceeds 65536 bytes.',
  invalid_json: 'The frame is not valid JSON.',
  invalid_message: 'A frame must be a JSON object with a string type.',
  invalid_payload: 'The payload has the wrong shape.',
  rate_limited: 'Too many frames; slow down.',
  join_rate_limited: 'Too many joins; slow down.',
  unknown_type: 'This frame type is not handled here.',
  invalid_token: 'Token missing, expired or invalid.',
  not_owner: 'That ticket belongs to another player.',
  not_in_match: 'This socket is not in a match.',
  match_not_found: 'No such live match.',
  match_full: 'The match is full.',
  match_locked: 'The match is closed to new players.',
  join_refused: 'The game turned this join away.',
  unknown_mode: 'Unknown game mode.',
  queue_full: 'The matchmaker queue is full.',
  internal_error: 'An internal error occurred.',
  internal: 'An internal error occurred.',
  binary_uplink_unsupported: 'Binary frames are not accepted; send JSON text.',
};

export function codeForReason(reason: string): ErrorCode {
  return REASON_CODES[reason] ?? 'ws.request_failed';
}

/** A failing client frame: its reason, the error object it answers with, and how. */
export class FrameError extends Error {
  readonly reason: string;
  readonly error: ApiError;
  /** The top-level `payload.type` some errors carry. */
  readonly frameType: string | undefined;
  /** False for failures found before the `cid` was read: such a reply carries no `cid`. */
  readonly echoCid: boolean;

  constructor(
    reason: string,
    options: { details?: ErrorDetails; message?: string; frameType?: string; echoCid?: boolean; code?: ErrorCode } = {},
  ) {
    const code = options.code ?? codeForReason(reason);
    const details = code === 'ws.request_failed' ? { ...(options.details ?? {}), reason } : (options.details ?? {});
    const error = new ApiError(code, options.message ?? MESSAGES[reason] ?? (code === 'ws.request_failed' ? 'The request failed.' : undefined), details);
    super(error.message);
    this.name = 'FrameError';
    this.reason = reason;
    this.error = error;
    this.frameType = options.frameType;
    this.echoCid = options.echoCid ?? true;
  }

  /**
   * A domain failure thrown as `ApiError` (shared with REST), carried on the socket.
   * The code always follows from the reason, and the table is the whole set: a
   * code with no reason of its own travels as `ws.request_failed`.
   */
  static from(err: ApiError, frameType?: string): FrameError {
    const known = CODE_REASONS.get(err.code);
    const reason = known ?? (typeof err.details.reason === 'string' ? err.details.reason : err.code);
    return new FrameError(reason, {
      details: err.details,
      message: err.message,
      ...(frameType ? { frameType } : {}),
    });
  }

  payload(): Record<string, unknown> {
    return {
      ...(this.frameType ? { type: this.frameType } : {}),
      reason: this.reason,
      error: { code: this.error.code, message: this.error.message, details: this.error.details },
    };
  }
}

/** Builds a reply, echoing the request's `cid` exactly when it had one. */
export function reply(request: Pick<ClientFrame, 'cid' | 'hasCid'> | null, type: string, payload: Record<string, unknown>): ServerFrame {
  return request?.hasCid ? { type, cid: request.cid, payload } : { type, payload };
}

export function errorFrame(request: Pick<ClientFrame, 'cid' | 'hasCid'> | null, err: FrameError): ServerFrame {
  return reply(err.echoCid ? request : null, 'error', err.payload());
}

/** `rpc.error` carries the error object only: no `reason` or `type`, unlike an `error` frame. */
export function rpcErrorFrame(request: Pick<ClientFrame, 'cid' | 'hasCid'> | null, err: ApiError): ServerFrame {
  return reply(request, 'rpc.error', { error: { code: err.code, message: err.message, details: err.details } });
}

/** Classifies raw text into a frame or the envelope failure it is. */
export function parseClientFrame(text: string): ClientFrame | FrameError {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return new FrameError('invalid_json', { echoCid: false });
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return new FrameError('invalid_message', { echoCid: false });
  const o = value as Record<string, unknown>;
  if (typeof o.type !== 'string') return new FrameError('invalid_message', { echoCid: false });
  const frame: ClientFrame = { type: o.type, payload: o.payload, hasPayload: 'payload' in o, cid: o.cid, hasCid: 'cid' in o };
  if ('seq' in o) frame.seq = o.seq;
  const problem = textProblem(o.payload, text);
  if (problem) {
    // A failure that is the client's fault and not an absent key is `invalid_payload` (decision 0025).
    const field = problem.under !== undefined && !Array.isArray(o.payload) ? String(problem.under) : undefined;
    const message = `${field === undefined ? 'The payload' : field} ${textProblemMessage(problem)}.`;
    frame.refusal = new ApiError('invalid_payload', message, field === undefined ? {} : { field });
  }
  return frame;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

const encoder = new TextEncoder();
export function byteLength(s: string): number {
  // ASCII fast path: most ids and modes never need the encoder.
  // eslint-disable-next-line no-control-regex
  return /^[\x00-\x7f]*$/.test(s) ? s.length : encoder.encode(s).byteLength;
}
