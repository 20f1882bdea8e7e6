import { Router } from 'itty-router';
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
  /** For hosts that write the response themselves (the Node adapter): at once when every step answered at once. */
  handle(request: RequestLike, meta: RequestMeta): ApiResponse | Promise<ApiResponse>;
}

/**
 * Builds the handler library over a host-supplied `Ctx`. A request passes
 * named steps (handlers/pipeline/, one a file), in the order of itty-router's
 * own hooks (run by `answer` below, over itty's route table):
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

  function handle(request: RequestLike, meta: RequestMeta): ApiResponse | Promise<ApiResponse> {
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
    if (answered instanceof Promise) return answered.then((response) => tell(served, entering, response, meta));
    return tell(served, entering, answered, meta);
  }

  return {
    handle,
    fetch: async (request, meta) => toFetchResponse(await handle({ method: request.method, url: request.url, headers: request.headers, body: request.body }, meta)),
  };
}

/** Tells the observer of an answered request; returns the answer. */
function tell(served: ServedObserver, request: PipelineRequest, response: ApiResponse, meta: RequestMeta): ApiResponse {
  served(request.route, request.method, response.status, meta);
  return response;
}

type Hooks = {
  before: ((request: PipelineRequest) => ApiResponse | undefined)[];
  catch: (err: unknown, request: PipelineRequest) => ApiResponse;
  finally: ((response: ApiResponse, request: PipelineRequest) => ApiResponse)[];
};

/** A step as the router calls it: an answer ends the request; a promise is awaited first. */
type Step = (request: PipelineRequest, ctx: Ctx) => ApiResponse | undefined | Promise<ApiResponse | undefined>;

/**
 * itty matches routes by trying each pattern in turn, so one router over every
 * route makes late routes pay for all earlier ones. One router per first path
 * segment under `/api/v1/` keeps each scan to its own domain's handful; every
 * route lives under `/api/v1/<literal>` or is a literal path of its own (the
 * few outside `/api/v1/`, each its own shard), so a path whose segment names no
 * router matches nothing, and a router of its own answers it (404, after
 * spending the address's bucket) through the same hooks.
 *
 * itty compiles each route's pattern and holds the table; `answer` walks it
 * as itty's `fetch` does (decision 0060).
 */
function routerFor(routes: Route[], ctx: Ctx, hooks: Hooks): (request: PipelineRequest) => ApiResponse | Promise<ApiResponse> {
  const make = () => Router<PipelineRequest, [Ctx]>();
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
  // itty types a route's handlers over its own request type; they are the Steps registered above.
  const tables = new Map([...shards].map(([segment, router]) => [segment, router.routes as unknown as RouteRow[]]));
  const elsewhere = nowhere.routes as unknown as RouteRow[];
  return (request) => {
    const segment = firstSegment(request.path, roots);
    return answer((segment !== null && tables.get(segment)) || elsewhere, request, ctx, hooks);
  };
}

/** One row of itty's route table: method (`ALL` for any), compiled pattern, steps, pattern as written. */
type RouteRow = [method: string, pattern: RegExp, steps: Step[], route: string];

/**
 * What itty-router's `fetch` does with a request (v6, `Router`), step for
 * step: the before hooks, then every route whose method and pattern match,
 * in order, until a step answers; a throw anywhere goes to the catch hook;
 * the finally hooks see every answer. Two things differ, neither visible to
 * a step: a step's result is awaited only when it is a promise (itty awaits
 * each, a turn of the event loop's microtask queue per step, and most of
 * ours answer at once), so a request whose steps all answered at once is
 * answered without a promise at all; and the URL is parsed only when
 * `routedPath` cannot read its path and query as the parser would.
 */
function answer(table: RouteRow[], request: PipelineRequest, ctx: Ctx, hooks: Hooks): ApiResponse | Promise<ApiResponse> {
  const pathname = routedPath(request);
  let reached: ApiResponse | undefined | Promise<ApiResponse | undefined>;
  try {
    for (const step of hooks.before) {
      reached = step(request);
      if (reached != null) break;
    }
    reached ??= walk(table, 0, 0, pathname, request, ctx);
  } catch (err) {
    return settle(hooks.catch(err, request), request, hooks);
  }
  if (reached instanceof Promise) {
    return reached.then(
      (response) => settle(response, request, hooks),
      (err: unknown) => settle(hooks.catch(err, request), request, hooks),
    );
  }
  return settle(reached, request, hooks);
}

/**
 * Runs the route table from row `from`, step `next` (a row's pattern is
 * matched when its first step is due): the first answer, nothing when no
 * step answered, or, once a step returned a promise, a promise of either.
 */
function walk(table: RouteRow[], from: number, next: number, pathname: string, request: PipelineRequest, ctx: Ctx): ApiResponse | undefined | Promise<ApiResponse | undefined> {
  for (let row = from, first = next; row < table.length; row++, first = 0) {
    const [method, pattern, steps, route] = table[row]!;
    if (first === 0) {
      if (method !== request.method && method !== 'ALL') continue;
      const match = pattern.exec(pathname);
      if (match === null) continue;
      request.params = match.groups || {};
      request.route = route;
    }
    for (let at = first; at < steps.length; at++) {
      const result = steps[at]!(request, ctx);
      if (result instanceof Promise) return result.then((response) => response ?? walk(table, row, at + 1, pathname, request, ctx));
      if (result != null) return result;
    }
  }
  return undefined;
}

/** The finally hooks over what the route left (itty hands them nothing when no step answered; our catch-all route always does). */
function settle(reached: ApiResponse | undefined, request: PipelineRequest, hooks: Hooks): ApiResponse {
  let response = reached;
  try {
    for (const step of hooks.finally) response = step(response!, request) ?? response;
  } catch (err) {
    response = hooks.catch(err, request);
  }
  return response!;
}

/**
 * The host's URLs for the Node adapter (and the tests): `localhost`, a path
 * of characters the URL parser keeps as they are (no dot segments, no
 * backslash, nothing it percent-encodes), a query of the same kind. For one
 * of those the raw path is the parsed `pathname` and the raw query parses as
 * the parsed `searchParams`; any other URL is parsed.
 */
const PLAIN_TARGET = /^https?:\/\/localhost\/[\w\-~!$&'()*+,;=:@/%]*(?:\?[\w\-~!$&()*+,;=:@/%.]*)?$/;
const ENCODED_DOT = /%2e/i;

/**
 * Sets `request.query` (a repeated key holds an array; an empty first value
 * gives way to the next, as in itty) and returns the path routes are matched
 * against: the URL's `pathname`.
 */
function routedPath(request: PipelineRequest): string {
  const url = request.url;
  const query: Record<string, string | string[] | undefined> = { __proto__: null } as unknown as Record<string, string | string[] | undefined>;
  request.query = query;
  let pathname: string;
  let search: URLSearchParams | null = null;
  if (PLAIN_TARGET.test(url) && !ENCODED_DOT.test(request.path)) {
    pathname = request.path;
    const mark = url.indexOf('?');
    if (mark >= 0 && mark < url.length - 1) search = new URLSearchParams(url.slice(mark + 1));
  } else {
    const parsed = new URL(url);
    pathname = parsed.pathname;
    search = parsed.searchParams;
  }
  if (search !== null) for (const [key, value] of search) query[key] = query[key] ? ([] as string[]).concat(query[key]!, value) : value;
  return pathname;
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
