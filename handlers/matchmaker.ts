import { ApiError } from '../runtime/errors';
import { isPlainObject } from '../runtime/frames';
import { readJsonObject } from './body';
import { json, requirePlayer, type Route } from './http';

/**
 * Matchmaker tickets over REST. Tickets are
 * node-local and owner-only; outcomes arrive over the WebSocket.
 */
export const matchmakerRoutes: Route[] = [
  {
    method: 'POST',
    path: '/api/v1/matchmaker',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      const body = await readJsonObject(request);
      // asobi's defaulting, kept: a missing or non-string mode means "default".
      const mode = typeof body.mode === 'string' ? body.mode : 'default';
      const properties = body.properties === undefined || body.properties === null ? {} : body.properties;
      if (!isPlainObject(properties)) throw new ApiError('invalid_payload', 'properties must be an object.', { field: 'properties' });
      return json(ctx.live.matchmaker.add(playerId, mode, properties));
    },
  },
  {
    method: 'GET',
    path: '/api/v1/matchmaker/:ticket_id',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      return json(ctx.live.matchmaker.get(playerId, request.params.ticket_id!));
    },
  },
  {
    method: 'DELETE',
    path: '/api/v1/matchmaker/:ticket_id',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      ctx.live.matchmaker.remove(playerId, request.params.ticket_id!);
      return json({ success: true });
    },
  },
];
