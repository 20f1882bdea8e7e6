import { ApiError, rateLimited } from '../../runtime/contracts/errors';
import { eraseSelf, findPlayersByUsername, getPlayer, updatePlayer } from '../../runtime/players/players';
import { idOf, Text } from '../../runtime/schemas/common';
import { EraseConfirmation, Erased, Player, PlayerList, PlayerSearch, ProfileUpdate } from '../../runtime/schemas/players';
import { z } from 'zod';
import { route, type Route } from '../contract';

/** Player profiles and self-erasure. */
export const playerRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/api/v1/players/me/erase',
    summary: "Erase the caller's account and everything that is theirs",
    tag: 'players',
    auth: 'player',
    rate: 'api',
    body: EraseConfirmation,
    response: Erased,
    errors: ['player.confirmation_failed', 'player.credentials_changed', 'player.erase_failed'],
    handle: async ({ ctx, player, body }) => {
      // Its own tight bucket: the wrong-password path costs a full hash.
      const decision = ctx.limits.take('erase', `p:${player.playerId}`);
      if (!decision.ok) throw rateLimited(decision.retryAfterMs);
      await eraseSelf(ctx, player.playerId, body);
      return { deleted: true as const };
    },
  }),
  route({
    // Before `/players/:id`, which would read `me` as an id.
    method: 'GET',
    path: '/api/v1/players/me',
    summary: "The caller's own profile",
    tag: 'players',
    auth: 'player',
    rate: 'api',
    response: Player,
    errors: ['player.not_found'],
    handle: ({ ctx, player }) => getPlayer(ctx, player.playerId),
  }),
  route({
    method: 'GET',
    path: '/api/v1/players',
    summary: 'Find a player by exact username; empty when nobody has it',
    tag: 'players',
    auth: 'player',
    rate: 'api',
    query: PlayerSearch,
    response: PlayerList,
    errors: ['missing_field'],
    handle: ({ ctx, query }) => findPlayersByUsername(ctx, query.username),
  }),
  route({
    method: 'GET',
    path: '/api/v1/players/:id',
    summary: "Any player's public profile",
    tag: 'players',
    auth: 'player',
    rate: 'api',
    params: z.object({ id: idOf('player.not_found', 'player') }),
    response: Player,
    errors: ['player.not_found'],
    handle: ({ ctx, params }) => getPlayer(ctx, params.id),
  }),
  route({
    method: 'PUT',
    path: '/api/v1/players/:id',
    summary: "Update the caller's own profile",
    tag: 'players',
    auth: 'player',
    rate: 'api',
    // Any id but the caller's is refused before a lookup, so this one is not checked as a UUID.
    params: z.object({ id: Text }),
    body: ProfileUpdate,
    response: Player,
    errors: ['forbidden', 'player.not_found'],
    handle: ({ ctx, player, params, body }) => {
      if (params.id !== player.playerId) throw new ApiError('forbidden', 'You can only update your own profile.');
      return updatePlayer(ctx, player.playerId, body);
    },
  }),
];
