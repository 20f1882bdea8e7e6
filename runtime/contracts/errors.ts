/**
 * The closed set of error codes and the HTTP status each one answers with.
 * This table is the only place a code can come from: `ApiError` accepts only
 * keys of it, so a string from a client, a provider or a script can never
 * become a code. Such strings travel in `details`.
 */
export const ERROR_STATUS = {
  // cross-cutting
  internal: 500,
  rate_limited: 429,
  join_rate_limited: 429,
  payload_too_large: 413,
  invalid_json: 400,
  invalid_message: 400,
  invalid_payload: 400,
  missing_field: 400,
  unknown_type: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  validation_failed: 422,
  length_required: 411,
  client_gate_denied: 403,
  not_ready: 503,
  datagram_unavailable: 503,
  fleet_unavailable: 503,

  // auth
  'auth.invalid_credentials': 401,
  'auth.provider_rejected': 401,
  'auth.unsupported_provider': 401,
  'auth.registration_closed': 403,
  'auth.password_registration_disabled': 403,
  'auth.identity_not_found': 404,
  'auth.already_registering': 409,
  'auth.provider_already_linked': 409,
  'auth.username_taken': 409,
  'auth.last_auth_method': 422,
  'auth.registration_failed': 500,
  'auth.link_failed': 500,
  'auth.token_issue_failed': 500,

  // guest
  'guest.weak_device_secret': 400,
  'guest.invalid_device_id': 400,
  'guest.invalid_device_secret': 401,
  'guest.revoked': 401,
  'guest.already_upgraded': 401,
  'guest.disabled': 403,
  'guest.device_already_registered': 409,
  'guest.not_unclaimed': 409,
  'guest.rate_limited': 429,
  'guest.create_failed': 500,
  'guest.capacity_reached': 503,
  'guest.unavailable': 503,

  // player
  'player.confirmation_failed': 403,
  'player.not_found': 404,
  'player.credentials_changed': 409,
  'player.erase_failed': 500,

  // worlds and matches
  'world.create_failed': 400,
  'world.not_found': 404,
  'world.already_joined': 409,
  'world.player_limit_reached': 429,
  'world.capacity_reached': 503,
  'match.not_found': 404,
  'match.not_in_match': 409,
  'match.full': 409,
  'match.locked': 409,
  'match.join_refused': 403,
  'matchmaker.unknown_mode': 400,
  'matchmaker.ticket_not_found': 404,
  'matchmaker.queue_full': 503,
  'vote.not_found': 404,

  // leaderboards, tournaments
  'leaderboard.client_submit_disabled': 403,
  'leaderboard.capacity_reached': 503,
  'tournament.not_found': 404,
  'tournament.full': 409,
  'tournament.already_joined': 409,

  // economy
  'economy.insufficient_funds': 402,
  'economy.listing_inactive': 400,
  'economy.listing_not_found': 404,
  'economy.purchase_failed': 500,
  'inventory.item_not_found': 404,
  'inventory.insufficient_quantity': 400,
  'inventory.invalid_quantity': 400,
  'iap.verification_failed': 422,
  'iap.missing_transaction_id': 422,
  'iap.transaction_already_claimed': 409,
  'iap.record_failed': 500,

  // social and messaging
  'social.cannot_friend_self': 400,
  'social.friend_not_found': 404,
  'social.already_friend': 409,
  'social.friendship_not_found': 404,
  'social.group_not_found': 404,
  'social.group_closed': 403,
  'social.group_full': 409,
  'social.already_member': 409,
  'social.invalid_role': 400,
  'social.member_not_found': 404,
  'chat.invalid_channel_id': 400,
  'chat.too_many_channels': 429,
  'dm.blocked': 403,
  'dm.content_empty': 400,
  'dm.content_too_large': 413,
  'notification.not_found': 404,

  // saves and storage
  'save.not_found': 404,
  'save.too_large': 413,
  'save.version_conflict': 409,
  'save.slot_limit_reached': 409,
  'storage.not_found': 404,
  'storage.forbidden': 403,
  'storage.value_too_large': 413,
  'storage.invalid_perm': 400,
  'storage.invalid_request': 400,
  'storage.conflict': 500,
  'storage.query_failed': 500,

  // rpc, websocket, console
  'rpc.unknown_method': 404,
  'rpc.invalid_cid': 400,
  'rpc.unsupported_protocol': 400,
  'rpc.invalid_params': 400,
  'ws.request_failed': 400,
  'console.not_found': 404,
  'console.not_built': 503,

  // ops plane
  'ops.not_found': 404,
  'ops.invalid_filter': 400,
  'ops.invalid_sort': 400,
  'ops.invalid_id': 400,
  'ops.invalid_cutoff': 400,
  'ops.confirmation_required': 400,
  'ops.confirmation_mismatch': 400,
  'ops.purge_count_mismatch': 409,
  'ops.export_incomplete': 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;
export type ErrorDetails = Record<string, unknown>;

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details: ErrorDetails };
}

/**
 * The one error constructor. Throw it anywhere below a handler; the pipeline
 * turns it into the `{error: {code, message, details}}` body with the code's status.
 * `legacy` carries the top-level keys some 422 bodies repeat beside `error`
 * (`fields`, `errors`) for clients that still read them there.
 */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetails;
  readonly status: number;
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message?: string, details: ErrorDetails = {}, headers: Record<string, string> = {}) {
    // An ApiError is an expected answer, not a fault: skip the stack trace,
    // which is most of its cost, so floods of 401/404/429 stay cheap.
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message ?? defaultMessage(code));
    Error.stackTraceLimit = limit;
    this.name = 'ApiError';
    this.code = code;
    this.details = details;
    this.status = ERROR_STATUS[code];
    this.headers = headers;
  }

  body(): ErrorBody & Record<string, unknown> {
    const body: ErrorBody & Record<string, unknown> = {
      error: { code: this.code, message: this.message, details: this.details },
    };
    // Legacy keys stay at the top level too, besides `details`.
    for (const key of LEGACY_KEYS[this.code] ?? LEGACY_KEYS_DEFAULT) {
      if (this.details[key] !== undefined) body[key] = this.details[key];
    }
    return body;
  }
}

/** The `details` keys a body repeats at its top level for older clients: per-field messages, and an ops list's rejected sort. */
const LEGACY_KEYS_DEFAULT = ['fields', 'errors'] as const;
const LEGACY_KEYS: Partial<Record<ErrorCode, readonly string[]>> = { 'ops.invalid_sort': ['field', 'order'] };

/** Shorthand for the common "field absent or not a string" failure. */
export function missingField(field: string): ApiError {
  return new ApiError('missing_field', `Field '${field}' is required.`, { field });
}

/** 422 with per-field messages under the given legacy key. */
export function validationFailed(key: 'fields' | 'errors', problems: Record<string, string[]>): ApiError {
  return new ApiError('validation_failed', 'The request did not pass validation.', { [key]: problems });
}

export function rateLimited(retryAfterMs: number, code: 'rate_limited' | 'guest.rate_limited' = 'rate_limited'): ApiError {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return new ApiError(code, 'Too many requests; slow down.', { retry_after: seconds }, { 'retry-after': String(seconds) });
}

function defaultMessage(code: ErrorCode): string {
  const text: Partial<Record<ErrorCode, string>> = {
    internal: 'An internal error occurred.',
    not_found: 'No such route.',
    unauthenticated: 'Authentication is required.',
    forbidden: 'Not permitted.',
    payload_too_large: 'The request body exceeds 1 MiB.',
    length_required: 'A request body needs a Content-Length header.',
    invalid_json: 'The body is not valid JSON.',
    invalid_payload: 'The body must be a JSON object.',
    not_ready: 'The service is starting; try again shortly.',
    fleet_unavailable: 'The fleet did not answer in time; try again shortly.',
  };
  return text[code] ?? code.replace(/[._]/g, ' ');
}
