import type { Ctx } from '../../runtime/contracts/context';
import { ApiError, rateLimited } from '../../runtime/contracts/errors';
import { authenticateOperator, isCapability } from '../../runtime/ops/operators';
import { consoleOperatorFor, cookieValue, CSRF_HEADER, SESSION_COOKIE, type CookieRequest } from '../../runtime/ops/console-sessions';
import type { RateLimitGroup } from '../../runtime/contracts/settings';
import type { AnyRouteSpec } from '../contract';
import { bearerOf, type PipelineRequest, type RequestLike } from '../http';

/**
 * Who is calling, and the rate-limit bucket the call spends, in the order
 * that keeps floods cheap: a token not in the cache spends the client
 * address's bucket before it costs a database read, so a stream of distinct
 * garbage tokens is limited like any other anonymous flood. A signed-in call
 * then spends its player's bucket, except on the routes that never need a
 * token (register, sign-in): there a bearer would buy an attacker a fresh
 * bucket per token it owns, so those always spend the address's.
 */
export function caller(spec: Pick<AnyRouteSpec, 'auth' | 'rate' | 'path' | 'capability'>, ctx: Ctx) {
  if (spec.auth === 'operator' || isOpsPath(spec.path)) return operatorCaller(spec, ctx);
  const group = spec.rate;
  const byAddress = group === 'register' || group === 'auth';
  return async (request: PipelineRequest): Promise<undefined> => {
    const call = request.call;
    call.bearer = bearerOf(request);
    let addressSpent = false;
    if (call.bearer && spec.auth === 'player') {
      call.principal = await ctx.auth.resolve(call.bearer, () => {
        addressSpent = true;
        spend(ctx, group, `ip:${call.ip}`);
      });
    }
    if (call.principal && !byAddress) spend(ctx, group, `p:${call.principal.playerId}`);
    else if (!addressSpent) spend(ctx, group, `ip:${call.ip}`);
    return undefined;
  };
}

/** The operator plane's paths: whatever a route under them declares, only an operator passes. */
export function isOpsPath(path: string): boolean {
  return path === '/api/v1/ops' || path.startsWith('/api/v1/ops/');
}

/**
 * Every refusal on the operator plane is the same 403 with empty details,
 * whatever the cause, so a caller learns nothing about which part failed.
 * The reason goes to the log only.
 */
export function opsDenied(ctx: Ctx, request: PipelineRequest, reason: string): ApiError {
  ctx.log.info('ops_denied', { request_id: request.call.requestId, reason, method: request.method, path: request.path });
  return new ApiError('forbidden');
}

/**
 * The ops plane's caller step. The address's bucket is spent first, so
 * guessing at the secret costs what any anonymous flood does; then the bearer
 * must be the operator secret or a token minted with it that carries the
 * route's one capability class. A route that declares none (or a route under
 * the ops path declared for players) admits nobody.
 */
function operatorCaller(spec: Pick<AnyRouteSpec, 'auth' | 'rate' | 'capability'>, ctx: Ctx) {
  const needed = spec.auth === 'operator' && isCapability(spec.capability) ? spec.capability : null;
  return async (request: PipelineRequest): Promise<undefined> => {
    const call = request.call;
    spend(ctx, spec.rate, `ip:${call.ip}`);
    call.bearer = bearerOf(request);
    // A bearer wins over a console cookie; the cookie counts only with its CSRF header.
    const operator = call.bearer
      ? await authenticateOperator(ctx.settings.ops_secret, call.bearer, request.headers.get('x-svc-operator'), ctx.clock.now())
      : await consoleOperatorFor(ctx, consoleCookies(request, call.secure));
    if (!operator) throw opsDenied(ctx, request, ctx.settings.ops_secret ? 'bad_credential' : 'no_secret');
    if (!needed) throw opsDenied(ctx, request, 'no_capability_declared');
    if (!operator.caps.has(needed)) throw opsDenied(ctx, request, 'missing_capability');
    call.operator = operator;
    return undefined;
  };
}

/** The console's session cookie and CSRF header of a request. */
export function consoleCookies(request: RequestLike, secure: boolean): CookieRequest {
  return { cookie: cookieValue(request.headers.get('cookie'), SESSION_COOKIE), csrf: request.headers.get(CSRF_HEADER), secure };
}

/**
 * A request that matched no route still spends its address's bucket, the one
 * of the family its path belongs to, so probing for sign-in routes costs what
 * signing in costs.
 */
export function spendUnrouted(ctx: Ctx, request: PipelineRequest): void {
  const path = request.path;
  const group: RateLimitGroup = path === '/api/v1/auth/register' ? 'register' : path.startsWith('/api/v1/auth/') ? 'auth' : path.startsWith('/api/v1/iap/') ? 'iap' : 'api';
  spend(ctx, group, `ip:${request.call.ip}`);
}

function spend(ctx: Ctx, group: RateLimitGroup, key: string): void {
  const decision = ctx.limits.take(group, key);
  if (!decision.ok) throw rateLimited(decision.retryAfterMs);
}
