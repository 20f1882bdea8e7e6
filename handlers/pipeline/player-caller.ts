import type { Ctx } from '../../runtime/contracts/context';
import type { AnyRouteSpec } from '../contract';
import type { RateLimitGroup } from '../../runtime/contracts/settings';
import { bearerOf, type Call, type PipelineRequest } from '../http';
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
  // Not async: a token the cache holds resolves at once, and the step then costs no promise (nor a closure).
  return (request: PipelineRequest): undefined | Promise<undefined> => {
    const call = request.call;
    call.bearer = bearerOf(request);
    if (!call.bearer || spec.auth !== 'player') return spendOwn(ctx, group, byAddress, call, false);
    let addressSpent = false;
    const resolved = ctx.auth.resolve(call.bearer, () => {
      addressSpent = true;
      spend(ctx, group, `ip:${call.ip}`);
    });
    if (resolved instanceof Promise) {
      return resolved.then((principal) => {
        call.principal = principal;
        return spendOwn(ctx, group, byAddress, call, addressSpent);
      });
    }
    call.principal = resolved;
    return spendOwn(ctx, group, byAddress, call, addressSpent);
  };
}

/** The signed-in player's bucket, or the address's unless the token lookup already spent that one. */
function spendOwn(ctx: Ctx, group: RateLimitGroup, byAddress: boolean, call: Call, addressSpent: boolean): undefined {
  if (call.principal && !byAddress) spend(ctx, group, `p:${call.principal.playerId}`);
  else if (!addressSpent) spend(ctx, group, `ip:${call.ip}`);
  return undefined;
}
