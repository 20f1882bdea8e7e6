import { ApiError } from '../../runtime/contracts/errors';
import { FrameError } from '../../runtime/contracts/frame-envelope';
import { WorldCreateBody, WorldId, WorldList, WorldListing, WorldListQuery } from '../../runtime/schemas/worlds';
import type { LiveWorlds } from '../../runtime/contracts/live';
import { Answer, route, type Route } from '../contract';

/**
 * Live worlds over REST. No roster is ever returned here, and there is no
 * REST join: joining binds the world to the player's WebSocket (`world.join`).
 */
export const worldRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/worlds',
    summary: 'Listed worlds on this node that are loading or running (up to 500 ms stale)',
    tag: 'worlds',
    auth: 'player',
    rate: 'api',
    query: WorldListQuery,
    response: WorldList,
    errors: [],
    handle: async ({ ctx, query }) => ({ worlds: ctx.live.worlds.list(query) }),
  }),
  route({
    method: 'GET',
    path: '/api/v1/worlds/:id',
    summary: 'One live world, listed or not',
    tag: 'worlds',
    auth: 'player',
    rate: 'api',
    params: WorldId,
    response: WorldListing,
    errors: ['world.not_found'],
    handle: async ({ ctx, params }) => {
      const world = ctx.live.worlds.get(params.id);
      if (!world) throw new ApiError('world.not_found', 'No such live world.');
      return world;
    },
  }),
  route({
    method: 'POST',
    path: '/api/v1/worlds',
    summary: 'Create a world of a world mode; the caller owns it (for the per-player cap) but is not joined',
    tag: 'worlds',
    auth: 'player',
    rate: 'api',
    status: 201,
    body: WorldCreateBody,
    response: WorldListing,
    errors: ['invalid_payload', 'world.create_failed', 'world.player_limit_reached', 'world.capacity_reached'],
    handle: async ({ ctx, body, player }) => new Answer(await createWorld(ctx.live.worlds, body.mode, player.playerId), 201),
  }),
];

/** The socket's reasons for a failed creation, as REST spells them. */
async function createWorld(worlds: LiveWorlds, mode: string | null, ownerId: string) {
  try {
    return await worlds.create(mode, ownerId);
  } catch (err) {
    if (!(err instanceof FrameError)) throw err;
    if (err.reason === 'world_capacity_reached') throw new ApiError('world.capacity_reached', 'This node runs as many worlds as it may.');
    if (err.reason === 'player_world_limit_reached') throw new ApiError('world.player_limit_reached', 'You own as many live worlds as a player may.');
    throw new ApiError('world.create_failed', 'The world could not be created.', { reason: err.reason });
  }
}
