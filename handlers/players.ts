import { ApiError, missingField, rateLimited } from '../runtime/errors';
import { eraseSelf, findPlayersByUsername, getPlayer, updatePlayer } from '../runtime/players';
import { readJsonObject } from './body';
import { json, requirePlayer, type Route } from './http';
import { queryParam } from './pagination';

/** Player profiles and self-erasure. */
export const playerRoutes: Route[] = [
  {
    method: 'POST',
    path: '/api/v1/players/me/erase',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      // Its own tight bucket: the wrong-password path costs a full hash.
      const decision = ctx.limits.take('erase', `p:${playerId}`);
      if (!decision.ok) throw rateLimited(decision.retryAfterMs);
      await eraseSelf(ctx, playerId, await readJsonObject(request));
      return json({ deleted: true });
    },
  },
  {
    // Before `/players/:id`, which would read `me` as an id.
    method: 'GET',
    path: '/api/v1/players/me',
    handler: async (_request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      return json(await getPlayer(ctx, playerId));
    },
  },
  {
    method: 'GET',
    path: '/api/v1/players',
    handler: async (request, ctx, call) => {
      requirePlayer(call);
      const username = queryParam(request.query, 'username');
      if (username === null || username === '') throw missingField('username');
      if (username.length > 255) return json({ players: [] });
      return json(await findPlayersByUsername(ctx, username));
    },
  },
  {
    method: 'GET',
    path: '/api/v1/players/:id',
    handler: async (request, ctx, call) => {
      requirePlayer(call);
      return json(await getPlayer(ctx, request.params.id!));
    },
  },
  {
    method: 'PUT',
    path: '/api/v1/players/:id',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      if (request.params.id !== playerId) throw new ApiError('forbidden', 'You can only update your own profile.');
      return json(await updatePlayer(ctx, playerId, await readJsonObject(request)));
    },
  },
];
