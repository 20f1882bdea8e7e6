import type { Ctx } from '../../runtime/contracts/context';
import type { AnyRouteSpec } from '../contract';
import { bearerOf, type PipelineRequest } from '../http';
import { spend } from './rate-bucket';

/**
 * The client plane's caller step: who is calling, and the rate-limit bucket
 * the call spends, in the order that keeps floods cheap: a token not in the
 * cache spends the client address's bucket before it costs a database read,
 * so a stream of distinct garbage tokens is limited like any other anonymous
 * flood. A signed-in call then spends its player's bucket, except on the
 * routes that never need a token (register, sign-in): there a bearer would
 * buy an attacker a fresh bucket per token it owns, so those always spend the
 * address's.
 */
export function playerCaller(spec: Pick<AnyRouteSpec, 'auth' | 'rate'>, ctx: Ctx) {
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
