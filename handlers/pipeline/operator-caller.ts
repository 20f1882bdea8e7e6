import type { Ctx } from '../../runtime/contracts/context';
import { ApiError } from '../../runtime/contracts/errors';
import { authenticateOperator, isCapability } from '../../runtime/ops/operators';
import { consoleOperatorFor, cookieValue, CSRF_HEADER, SESSION_COOKIE, type CookieRequest } from '../../runtime/ops/console-sessions';
import type { AnyRouteSpec } from '../contract';
import { bearerOf, type PipelineRequest, type RequestLike } from '../http';
import { spend } from './rate-bucket';

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
 * The operator plane's caller step. The address's bucket is spent first, so
 * guessing at the secret costs what any anonymous flood does; then the bearer
 * must be the operator secret or a token minted with it that carries the
 * route's one capability class. A route that declares none (or a route under
 * the ops path declared for players) admits nobody.
 */
export function operatorCaller(spec: Pick<AnyRouteSpec, 'auth' | 'rate' | 'capability'>, ctx: Ctx) {
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
