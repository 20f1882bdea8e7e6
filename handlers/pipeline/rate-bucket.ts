import type { Ctx } from '../../runtime/contracts/context';
import { rateLimited } from '../../runtime/contracts/errors';
import type { RateLimitGroup } from '../../runtime/contracts/settings';
import type { PipelineRequest } from '../http';

/**
 * Spends one call from a rate-limit bucket, or refuses the call 429 with the
 * limiter's wait. Both callers and the unrouted answer spend through here, so
 * a refusal reads the same whichever step made it.
 */
export function spend(ctx: Ctx, group: RateLimitGroup, key: string): void {
  const decision = ctx.limits.take(group, key);
  if (!decision.ok) throw rateLimited(decision.retryAfterMs);
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
