import type { Ctx } from '../../runtime/contracts/context';
import { rateLimited } from '../../runtime/contracts/errors';
import type { RateLimitGroup } from '../../runtime/contracts/settings';
import type { AnyRouteSpec } from '../contract';
import { bearerOf, type PipelineRequest } from '../http';

/**
 * Who is calling, and the rate-limit bucket the call spends, in the order
 * that keeps floods cheap: a token not in the cache spends the client
 * address's bucket before it costs a database read, so a stream of distinct
 * garbage tokens is limited like any other anonymous flood. A signed-in call
 * then spends its player's bucket, except on the routes that never need a
 * token (register, sign-in): there a bearer would buy an attacker a fresh
 * bucket per token it owns, so those always spend the address's.
 */
export function caller(spec: Pick<AnyRouteSpec, 'auth' | 'rate'>, ctx: Ctx) {
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
