import { Router, type RouterOptions } from 'itty-router';
import type { Ctx } from '../runtime/contracts/context';
import { ApiError } from '../runtime/contracts/errors';
import { onOperatorPlane, type Route } from './contract';
import { toFetchResponse, type ApiResponse, type Call, type PipelineRequest, type RequestLike } from './http';
import { cors, preflight } from './pipeline/cors';
import { errorObject } from './pipeline/error-object';
import { operatorCaller, opsDenied } from './pipeline/operator-caller';
import { playerCaller } from './pipeline/player-caller';
import { spendUnrouted } from './pipeline/rate-bucket';
import { readiness } from './pipeline/readiness';
import { requestLog } from './pipeline/request-log';
import { securityHeaders } from './pipeline/security-headers';
import { allRoutes } from './routes';
import { extensionActionRoutes } from './routes/ops/extensions';

export interface RequestMeta {
  /** Peer address as the host determined it (after its trusted-proxy rule). */
  ip: string;
  requestId: string;
  secure?: boolean;
  /** The host's own clock reading when the request arrived, handed back to its `served` observer untouched. */
  arrived?: number;
}

/**
 * Told of every answered request once its pipeline finished: the matched
 * route template (undefined when a step answered before routing), never the raw path.
 */
export type ServedObserver = (route: string | undefined, method: string, status: number, meta: RequestMeta) => void;

export interface App {
  /** For fetch-standard hosts (Workers-style runtimes). */
  fetch(request: Request, meta: RequestMeta): Promise<Response>;
  /** For hosts that write the response themselves (the Node adapter). */
  handle(request: RequestLike, meta: RequestMeta): Promise<ApiResponse>;
}

/**
 * Builds the handler library over a host-supplied `Ctx`. A request passes
 * named steps (handlers/pipeline/, one a file), composed with itty-router's
 * own hooks:
 *
 * - before: readiness, CORS preflight;
 * - per route: the caller step of the route's plane (the player's or the
 *   operator's credential, and the rate limit), then the route's contract
 *   (inputs, handler, answer);
 * - catch: every failure becomes the error object;
 * - finally: security headers, CORS, the request log.
 */
export function createApp(ctx: Ctx, routes: Route[] = allRoutes(), served?: ServedObserver): App {
  const origins: ReadonlySet<string> = new Set(ctx.settings.cors_origins);
  const hooks = {
    before: [readiness(ctx), preflight(origins)],
    catch: errorObject(ctx),
    finally: [securityHeaders, cors(origins), requestLog(ctx)],
  };
  // Extension actions exist only once the host loaded the extensions, so they join here rather than in allRoutes().
  // With the console off its session routes are not mounted at all: they answer exactly as an unknown path does.
  const mounted = ctx.settings.console ? routes : routes.filter((r) => !r.path.startsWith('/console/'));
  const dispatch = routerFor([...mounted, ...extensionActionRoutes(ctx.extensions)], ctx, hooks);

  function handle(request: RequestLike, meta: RequestMeta): Promise<ApiResponse> {
    const call: Call = {
      requestId: meta.requestId,
      ip: meta.ip,
      bearer: null,
      principal: null,
      secure: meta.secure ?? request.url.startsWith('https:'),
    };
    const entering: PipelineRequest = {
      method: request.method,
      url: request.url,
      headers: request.headers,
      body: request.body,
      bufferedBody: request.bufferedBody,
      path: pathOf(request.url),
      params: {},
      query: {},
      call,
      started: ctx.clock.now(),
    };
    const answered = dispatch(entering);
    if (!served) return answered;
    return answered.then((response) => {
      served(entering.route, entering.method, response.status, meta);
      return response;
    });
  }

  return {
    handle,
    fetch: async (request, meta) => toFetchResponse(await handle({ method: request.method, url: request.url, headers: request.headers, body: request.body }, meta)),
  };
}

type Hooks = {
  before: ((request: PipelineRequest) => ApiResponse | undefined)[];
  catch: (err: unknown, request: PipelineRequest) => ApiResponse;
  finally: ((response: ApiResponse, request: PipelineRequest) => ApiResponse)[];
};

/**
 * itty matches routes by trying each pattern in turn, so one router over every
 * route makes late routes pay for all earlier ones. One router per first path
 * segment under `/api/v1/` keeps each scan to its own domain's handful; every
 * route lives under `/api/v1/<literal>` or is a literal path of its own (the
 * few outside `/api/v1/`, each its own shard), so a path whose segment names no
 * router matches nothing, and a router of its own answers it (404, after
 * spending the address's bucket) through the same hooks.
 */
function routerFor(routes: Route[], ctx: Ctx, hooks: Hooks): (request: PipelineRequest) => Promise<ApiResponse> {
  // itty types its hooks over its own request type; ours is the plain pipeline object.
  const make = () => Router<PipelineRequest, [Ctx]>(hooks as unknown as RouterOptions);
  const shards = new Map<string, ReturnType<typeof make>>();
  const roots = new Set(routes.filter((r) => !r.path.startsWith('/api/v1/') && !/[:*]/.test(r.path)).map((r) => r.path));
  for (const r of routes) {
    const segment = firstSegment(r.path, roots);
    if (segment === null || /[:*]/.test(segment)) throw new Error(`route ${r.method} ${r.path} is not under /api/v1/<literal> (nor one of the root routes)`);
    let router = shards.get(segment);
    if (!router) shards.set(segment, (router = make()));
    const caller = r.plane === 'operator' ? operatorCaller(r.spec, ctx) : playerCaller(r.spec, ctx);
    router[r.method.toLowerCase() as 'get']<PipelineRequest, [Ctx]>(r.path, caller, r.handler);
  }
  const unrouted = (request: PipelineRequest): never => {
    spendUnrouted(ctx, request);
    // The ops plane answers an undeclared path or method as it answers every refusal there.
    if (onOperatorPlane(request.path)) throw opsDenied(ctx, request, 'undeclared_route');
    throw new ApiError('not_found', `No route for ${request.method} ${request.path}.`);
  };
  for (const router of shards.values()) router.all('*', unrouted);
  const nowhere = make();
  nowhere.all('*', unrouted);
  return (request) => {
    const segment = firstSegment(request.path, roots);
    const router = (segment !== null && shards.get(segment)) || nowhere;
    return router.fetch(request, ctx) as Promise<ApiResponse>;
  };
}

/**
 * `friends` of `/api/v1/friends/…`; one of the few routes outside `/api/v1/`
 * (the console's session, the probes at the root), each a shard of its own,
 * by its own path; null for any other path.
 */
function firstSegment(path: string, roots: ReadonlySet<string>): string | null {
  if (roots.has(path)) return path;
  if (!path.startsWith('/api/v1/')) return null;
  const end = path.indexOf('/', 8);
  return path.slice(8, end < 0 ? undefined : end);
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
