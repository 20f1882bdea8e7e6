import { z } from 'zod';
import type { Ctx, Principal } from '../runtime/contracts/context';
import { ApiError, validationFailed, type ErrorCode } from '../runtime/contracts/errors';
import type { RateLimitGroup } from '../runtime/contracts/settings';
import { readJson } from './body';
import { json, type ApiResponse, type Call, type PipelineRequest, type RequestLike } from './http';
import { restInput, type LegacyKey } from '../runtime/schemas/input';
import { isStorableText, UNSTORABLE_TEXT } from '../runtime/platform/text';
import type { Capability } from '../runtime/contracts/capabilities';
import type { Operator } from '../runtime/ops/operators';

/**
 * A REST route as a contract: what it takes (params, query, body), what it
 * answers (status and body schema), who may call it, which rate-limit bucket
 * it spends and which codes it can fail with. The pipeline enforces the
 * declaration, the API document is generated from it, and in tests every
 * answer is checked against it.
 */

export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
/** `operator`: the ops plane's credential (runtime/ops/operators.ts); player tokens are never read there. */
export type Auth = 'player' | 'none' | 'operator';

/**
 * Which credential a route's caller step reads: players' bearer tokens, or
 * the operator's secret, tokens and console session. A route declared
 * `auth: 'operator'` is on the operator plane, and so is every route under
 * the plane's path whatever it declares (a player declaration there admits
 * nobody), so a slip in a declaration never opens an ops route to players.
 */
export type Plane = 'client' | 'operator';

/**
 * The operator plane's paths (`/api/v1/ops` and below). The one place the
 * plane is read off a path: route() for declared routes, and the pipeline
 * for a request no route matched.
 */
export function onOperatorPlane(path: string): boolean {
  return path === '/api/v1/ops' || path.startsWith('/api/v1/ops/');
}

type AnyObject = z.ZodType<Record<string, unknown>, Record<string, unknown>>;

/** What a route's handler receives: the parts it declared, already parsed and typed. */
export interface RouteInput<A extends Auth, P, Q, B> {
  params: P;
  query: Q;
  body: B;
  /** The signed-in player; only routes declaring `auth: 'player'` are sure to have one. */
  player: A extends 'player' ? Principal : Principal | null;
  /** The operator; only routes declaring `auth: 'operator'` have one. */
  operator: A extends 'operator' ? Operator : null;
  ctx: Ctx;
  call: Call;
  /** The request itself, for the few routes that read a header. */
  request: RequestLike;
}

/** A success answer with a status or headers of its own; a handler returning a plain value answers 200 with it. */
export class Answer<T = unknown> {
  constructor(
    readonly body: T,
    readonly status = 200,
    readonly headers?: Record<string, string | string[]>,
  ) {}
}

export interface RouteSpec<A extends Auth, P extends AnyObject, Q extends AnyObject, B extends z.ZodType, R extends z.ZodType> {
  method: Method;
  /** itty pattern, e.g. `/api/v1/groups/:id`. */
  path: string;
  /** One line for the API document. */
  summary: string;
  /** The API document's grouping. */
  tag: string;
  auth: A;
  /**
   * The one capability class an operator needs for this route; required on
   * `auth: 'operator'` routes (the pipeline denies one without it).
   */
  capability?: Capability;
  rate: RateLimitGroup;
  params?: P;
  query?: Q;
  /** Absent body reads as `{}`; a body that is not an object is 400 `invalid_payload`. */
  body?: B;
  /** Where 422 bodies repeat their per-field messages (`fields` on the account routes, `errors` elsewhere). */
  legacyKey?: LegacyKey;
  /** An unreadable or invalid body reads as `{}` instead of failing (logout answers 200 whatever it is sent). */
  lenientBody?: boolean;
  /** What a body that is not a JSON object answers, where the route's reference names it (default 400 `invalid_payload`). */
  notObject?: () => ApiError;
  /**
   * A precondition about the deployment, checked before the session or any
   * input is looked at (e.g. guests switched off): what a client needs to learn first.
   */
  precondition?: (ctx: Ctx) => void;
  response: R;
  /** The success status the API document lists (a handler answers another one with `Answer`); default 200. */
  status?: number;
  /** Codes this route can answer beyond the ones every route of its kind can (see `commonErrors`). */
  errors: readonly ErrorCode[];
  /** May answer at once (a cached read): the pipeline then spends no promise on it. */
  handle(input: RouteInput<A, z.output<P>, z.output<Q>, z.output<B>>): Promise<z.input<R> | Answer<z.input<R>>> | z.input<R> | Answer<z.input<R>>;
}

/** The handler as the router calls it, after the pipeline's caller step; synchronous when its route's work was. */
export type Handler = (request: PipelineRequest, ctx: Ctx) => ApiResponse | Promise<ApiResponse>;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyRouteSpec = RouteSpec<Auth, any, any, any, any>;

export interface Route {
  method: Method;
  path: string;
  plane: Plane;
  spec: AnyRouteSpec;
  handler: Handler;
}

const EMPTY = z.object({});

/** An ops route without its capability class is a type error (and, should one get through, denied). */
type CapabilityDeclaration<A extends Auth> = A extends 'operator' ? { capability: Capability } : { capability?: never };

/** Declares a route. */
export function route<A extends Auth, P extends AnyObject = typeof EMPTY, Q extends AnyObject = typeof EMPTY, B extends z.ZodType = typeof EMPTY, R extends z.ZodType = z.ZodType>(
  spec: RouteSpec<A, P, Q, B, R> & CapabilityDeclaration<A>,
): Route {
  const legacy = spec.legacyKey ?? 'errors';
  // An undeclared part parses as the empty object whatever was sent (zod strips unknown keys), so it is not parsed at all.
  const { params, query } = spec;
  // Not async: a route whose work is done at once (a cached read) answers without a promise; a throw
  // reaches the pipeline's catch as a rejection would. No closure is made per request on that path.
  const handler: Handler = (request, ctx) => {
    spec.precondition?.(ctx);
    const call = request.call;
    const player = spec.auth === 'player' ? requirePlayer(call) : spec.auth === 'operator' ? null : call.principal;
    const parsedParams = params ? restInput(params, decodedParams(request.params), 'params', legacy) : {};
    const parsedQuery = query ? restInput(query, firstValues(request.query), 'query', legacy) : {};
    if (spec.body) return bodyOf(spec, request, legacy).then((body) => run(spec, ctx, request, player, parsedParams, parsedQuery, body));
    return run(spec, ctx, request, player, parsedParams, parsedQuery, undefined);
  };
  const plane: Plane = spec.auth === 'operator' || onOperatorPlane(spec.path) ? 'operator' : 'client';
  return { method: spec.method, path: spec.path, plane, spec, handler };
}

/** Calls the route's `handle` with its input (the parts parsed before the body was read, and the body) and answers what it returns, at once when it returned a value. */
function run(spec: AnyRouteSpec, ctx: Ctx, request: PipelineRequest, player: Principal | null, params: unknown, query: unknown, body: unknown): ApiResponse | Promise<ApiResponse> {
  const call = request.call;
  const out = spec.handle({
    params,
    query,
    body,
    player,
    operator: spec.auth === 'operator' ? requireOperator(call) : null,
    ctx,
    call,
    request,
  });
  return out instanceof Promise ? out.then((value) => answer(spec, ctx, value)) : answer(spec, ctx, out);
}

/** A handler's value as the response: 200 unless it chose an `Answer` (a plain value is not wrapped in one first). */
function answer(spec: AnyRouteSpec, ctx: Ctx, out: unknown): ApiResponse {
  const chosen = out instanceof Answer;
  const body: unknown = chosen ? out.body : out;
  if (ctx.settings.response_checks) checkResponse(spec, body);
  return chosen ? json(body, out.status, out.headers) : json(body);
}

/**
 * With `response_checks` on (the test suite runs so), an answer that does not
 * match the route's declared schema is a defect: 500, and the log line names it.
 */
function checkResponse(spec: AnyRouteSpec, body: unknown): void {
  const result = (spec.response as z.ZodType).safeParse(body);
  if (result.success) return;
  const problems = result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
  throw new Error(`response of ${spec.method} ${spec.path} does not match its declared schema: ${problems}`);
}

/** The caller's player, or 401 `unauthenticated`. */
function requirePlayer(call: Call): Principal {
  if (!call.principal) throw new ApiError('unauthenticated');
  return call.principal;
}

/** The pipeline's operator step admitted the call; without it (a route mounted without that step) nobody passes. */
function requireOperator(call: Call): Operator {
  if (!call.operator) throw new ApiError('forbidden');
  return call.operator;
}

async function bodyOf(spec: AnyRouteSpec, request: RequestLike, legacy: LegacyKey): Promise<unknown> {
  let value: unknown;
  try {
    value = await readJson(request, legacy);
    if (value === undefined) value = {};
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw spec.notObject?.() ?? new ApiError('invalid_payload');
    return restInput(spec.body!, value, 'body', legacy);
  } catch (err) {
    if (spec.lenientBody && err instanceof ApiError) return spec.body!.safeParse({}).data ?? {};
    throw err;
  }
}

/**
 * Path parameters, percent-decoded (itty leaves them encoded). A malformed
 * escape (`%E0%A4%A`) or text the database cannot store is 422
 * `validation_failed` naming the parameter.
 */
function decodedParams(raw: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  // for-in, not Object.entries: itty's match groups are a dictionary-mode object, which sends Object.entries down V8's slow path.
  for (const name in raw) {
    const encoded = raw[name]!;
    let value = encoded;
    // Most params (ids) carry no escapes, and the decoder is not free.
    if (encoded.includes('%')) {
      try {
        value = decodeURIComponent(encoded);
      } catch {
        throw validationFailed('errors', { [name]: ['must be valid percent-encoded UTF-8'] });
      }
    }
    if (!isStorableText(value)) throw validationFailed('errors', { [name]: [UNSTORABLE_TEXT] });
    out[name] = value;
  }
  return out;
}

/**
 * A repeated query key reads as its first value, as `URLSearchParams.get`
 * does. itty replaces an empty first value by the next one, so
 * `?limit=&limit=5` reads `5`.
 */
function firstValues(q: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k in q) {
    const v = q[k];
    const first = typeof v === 'string' ? v : v?.[0];
    if (first !== undefined) out[k] = first;
  }
  return out;
}
