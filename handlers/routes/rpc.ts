import { z } from 'zod';
import { ApiError } from '../../runtime/contracts/errors';
import { RpcHttpAnswer, RpcHttpCall, rpcParams } from '../../runtime/schemas/rpc';
import { Answer, route, type Route } from '../contract';

/**
 * `rpc.call` over HTTP: the same dispatcher as the socket,
 * body `{params}`, answered in the `{type, payload}` envelope. A failure also
 * carries the error object at the top level, as every failure does.
 */
export const rpcRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/api/v1/rpc/:method',
    summary: 'Call a server method',
    tag: 'rpc',
    auth: 'player',
    rate: 'api',
    params: z.object({ method: z.string().meta({ description: '`<namespace>.<name>`' }) }),
    body: RpcHttpCall,
    response: RpcHttpAnswer,
    // Beyond these, any code a method declares for itself.
    errors: ['rpc.unknown_method', 'rpc.invalid_params', 'validation_failed', 'datagram_unavailable'],
    handle: async ({ ctx, player, params, body }) => {
      try {
        const result = await ctx.live.rpc.call(params.method, rpcParams(body.params), { playerId: player.playerId });
        return { type: 'rpc.ok' as const, payload: { result } };
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        const error = { code: err.code, message: err.message, details: err.details };
        return new Answer({ type: 'rpc.error' as const, payload: { error }, error }, err.status);
      }
    },
  }),
];
