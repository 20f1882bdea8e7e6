import { ApiError } from '../runtime/errors';
import { isPlainObject } from '../runtime/frames';
import { readJsonObject } from './body';
import { decodedParam, json, requirePlayer, type Route } from './http';

/**
 * `rpc.call` over HTTP: the same dispatcher as the socket,
 * body `{params}`, answered in the `{type, payload}` envelope. A failure also
 * carries the error object at the top level, as every failure does.
 */
export const rpcRoutes: Route[] = [
  {
    method: 'POST',
    path: '/api/v1/rpc/:method',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      const body = await readJsonObject(request);
      try {
        const method = decodedParam(request, 'method');
        if (!isPlainObject(body.params)) throw new ApiError('rpc.invalid_params', 'params must be an object.');
        const result = await ctx.live.rpc.call(method, body.params, { playerId });
        return json({ type: 'rpc.ok', payload: { result } });
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        const error = { code: err.code, message: err.message, details: err.details };
        return json({ type: 'rpc.error', payload: { error }, error }, err.status);
      }
    },
  },
];
