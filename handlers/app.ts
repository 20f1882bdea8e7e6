import { Router } from 'itty-router';
import type { Ctx } from '../runtime/context';
import { databaseFault, databaseFaultError } from '../runtime/database';
import { ApiError, rateLimited } from '../runtime/errors';
import type { RateLimitGroup } from '../runtime/settings';
import {
  bearerOf,
  errorResponse,
  json,
  toFetchResponse,
  type ApiRequest,
  type ApiResponse,
  type Call,
  type RequestLike,
  type Route,
} from './http';
import { allRoutes } from './routes';

export interface RequestMeta {
  /** Peer address as the host determined it (after its trusted-proxy rule). */
  ip: string;
  requestId: string;
  secure?: boolean;
}

export interface App {
  /** For fetch-standard hosts (Workers-style runtimes). */
  fetch(request: Request, meta: RequestMeta): Promise<Response>;
  /** For hosts that write the response themselves (the Node adapter). */
  handle(request: RequestLike, meta: RequestMeta): Promise<ApiResponse>;
}

/**
 * Builds the handler library over a host-supplied `Ctx`. The pipeline is:
 * readiness → bearer resolution → rate limit → route → handler, with every
 * failure turned into the `{error: {code, message, details}}` body and every
 * response given the security headers, CORS (configured origins only) and the request id.
 */
export function createApp(ctx: Ctx, routes: Route[] = allRoutes()): App {
  const dispatch = routerFor(routes);
  const corsOrigins = new Set(ctx.settings.cors_origins);

  async function handle(request: RequestLike, meta: RequestMeta): Promise<ApiResponse> {
    const started = ctx.clock.now();
    const path = pathOf(request.url);
    const call: Call = {
      requestId: meta.requestId,
      ip: meta.ip,
      bearer: null,
      principal: null,
      secure: meta.secure ?? request.url.startsWith('https:'),
    };
    let response: ApiResponse;
    let route = '(none)';
    try {
      if (request.method === 'OPTIONS') {
        response = preflight(request, corsOrigins);
      } else {
        // Liveness answers whenever the process can: an orchestrator must not
        // restart a node that is only waiting for its database.
        if (!ctx.readiness.ready() && path !== '/api/v1/health') throw notReady(ctx);
        const isOps = path.startsWith('/api/v1/ops');
        call.bearer = isOps ? null : bearerOf(request);
        if (call.bearer) call.principal = await ctx.auth.resolve(call.bearer);

        const group = rateGroup(request.method, path);
        const decision = ctx.limits.take(group, rateKey(group, call));
        if (!decision.ok) throw rateLimited(decision.retryAfterMs);

        const routed = await dispatch(request as ApiRequest, path, ctx, call);
        route = (request as ApiRequest).route ?? route;
        if (!routed) throw new ApiError('not_found', `No route for ${request.method} ${path}.`);
        response = routed;
      }
    } catch (err) {
      response = failure(err, ctx, call, request);
      route = (request as Partial<ApiRequest>).route ?? route;
    }
    decorate(response, request, call, corsOrigins);
    // Orchestrators probe every few seconds; at `info` those lines would drown the log.
    const level = path.startsWith('/api/v1/health') && response.status < 500 ? 'debug' : 'info';
    ctx.log[level]('http_request', {
      request_id: call.requestId,
      method: request.method,
      route,
      status: response.status,
      duration_ms: ctx.clock.now() - started,
      ip: call.ip,
      player_id: call.principal?.playerId,
    });
    return response;
  }

  return {
    handle,
    fetch: async (request, meta) => toFetchResponse(await handle(request, meta)),
  };
}

type Dispatch = (request: ApiRequest, path: string, ctx: Ctx, call: Call) => Promise<ApiResponse | undefined>;

/**
 * itty matches routes by trying each pattern in turn, so one router over every
 * route makes late routes pay for all earlier ones. One router per first path
 * segment under `/api/v1/` keeps each scan to its own domain's handful;
 * patterns that start with a parameter go to a shared fallback, tried only
 * when the literal segment's routes miss (the more specific pattern wins).
 */
function routerFor(routes: Route[]): Dispatch {
  const shards = new Map<string, ReturnType<typeof Router<ApiRequest, [Ctx, Call]>>>();
  const fallback = Router<ApiRequest, [Ctx, Call]>();
  let fallbackUsed = false;
  for (const r of routes) {
    const segment = firstSegment(r.path);
    let router = fallback;
    if (segment !== null && !/[:*]/.test(segment)) {
      router = shards.get(segment) ?? Router<ApiRequest, [Ctx, Call]>();
      shards.set(segment, router);
    } else {
      fallbackUsed = true;
    }
    router[r.method.toLowerCase() as 'get'](r.path, r.handler);
  }
  const viaFallback = (request: ApiRequest, ctx: Ctx, call: Call) => fallback.fetch(request, ctx, call) as Promise<ApiResponse | undefined>;
  return (request, path, ctx, call) => {
    const segment = firstSegment(path);
    const shard = segment === null ? undefined : shards.get(segment);
    if (!shard) return fallbackUsed ? viaFallback(request, ctx, call) : Promise.resolve(undefined);
    const routed = shard.fetch(request, ctx, call) as Promise<ApiResponse | undefined>;
    return fallbackUsed ? routed.then((r) => r ?? viaFallback(request, ctx, call)) : routed;
  };
}

/** `friends` of `/api/v1/friends/…`; null outside `/api/v1/`. */
function firstSegment(path: string): string | null {
  if (!path.startsWith('/api/v1/')) return null;
  const end = path.indexOf('/', 8);
  return path.slice(8, end < 0 ? undefined : end);
}

/** Still migrating; with the reason when the database is the cause. */
function notReady(ctx: Ctx): ApiError {
  const fault = ctx.readiness.databaseFault?.();
  return fault ? databaseFaultError(fault) : new ApiError('not_ready');
}

/** Which rate-limit bucket a request spends from. */
export function rateGroup(method: string, path: string): RateLimitGroup {
  if (path === '/api/v1/auth/register') return 'register';
  if (path.startsWith('/api/v1/auth/') || (path === '/console/session' && method === 'POST')) return 'auth';
  if (path.startsWith('/api/v1/iap/')) return 'iap';
  return 'api';
}

/**
 * Whose bucket a request spends. Signed-in calls spend their player's bucket,
 * except on the routes that never need a token (register, sign-in): there a
 * bearer would buy an attacker a fresh bucket per token it owns, so those are
 * always keyed on the client address.
 */
function rateKey(group: RateLimitGroup, call: Call): string {
  if (call.principal && group !== 'register' && group !== 'auth') return `p:${call.principal.playerId}`;
  return `ip:${call.ip}`;
}

/** The path of an absolute URL, without parsing the whole URL (the router parses it once). */
function pathOf(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2);
  if (start < 0) return '/';
  let end = url.indexOf('?', start);
  const hash = url.indexOf('#', start);
  if (hash >= 0 && (end < 0 || hash < end)) end = hash;
  return url.slice(start, end < 0 ? undefined : end);
}

function failure(err: unknown, ctx: Ctx, call: Call, request: RequestLike): ApiResponse {
  if (err instanceof ApiError) return errorResponse(err);
  const fault = databaseFault(err);
  if (fault) {
    ctx.log.warn('database_fault', { request_id: call.requestId, reason: fault, error: err instanceof Error ? err.message : String(err) });
    return errorResponse(databaseFaultError(fault));
  }
  ctx.log.error('unhandled_exception', {
    request_id: call.requestId,
    method: request.method,
    path: pathOf(request.url),
    error: err instanceof Error ? { name: err.name, message: err.message, stack: err.stack } : String(err),
  });
  return errorResponse(new ApiError('internal', undefined, { request_id: call.requestId }));
}

function decorate(response: ApiResponse, request: RequestLike, call: Call, corsOrigins: Set<string>): void {
  const h = response.headers;
  if (call.secure) h['strict-transport-security'] = 'max-age=31536000; includeSubDomains';
  h['x-request-id'] = call.requestId;
  const origin = request.headers.get('origin');
  if (origin && corsOrigins.has(origin)) {
    h['access-control-allow-origin'] = origin;
    h['access-control-allow-credentials'] = 'true';
    h['access-control-expose-headers'] = 'x-request-id, retry-after';
    h['vary'] = 'Origin';
  }
}

function preflight(request: RequestLike, corsOrigins: Set<string>): ApiResponse {
  const origin = request.headers.get('origin');
  if (!origin || !corsOrigins.has(origin)) throw new ApiError('not_found', 'No route for OPTIONS from this origin.');
  return json({}, 200, {
    'access-control-allow-methods': 'GET, POST, PUT, DELETE, PATCH, OPTIONS',
    'access-control-allow-headers': 'authorization, content-type, x-csrf-token, x-svc-operator',
    'access-control-max-age': '600',
  });
}
