import { answerFriend, listFriends, removeFriend, requestFriend } from '../runtime/friends';
import { readJsonObject } from './body';
import { json, requirePlayer, type Route } from './http';
import { pageOf, queryParam } from './pagination';

/** Friends: the caller's list, requests, answers and removal. */
export const friendRoutes: Route[] = [
  {
    method: 'GET',
    path: '/api/v1/friends',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      const status = queryParam(request.query, 'status');
      const direction = queryParam(request.query, 'direction');
      const friends = await listFriends(
        ctx.db,
        playerId,
        {
          ...(status !== null ? { status } : {}),
          // Like every filter, an unrecognised value means the default.
          ...(direction === 'incoming' || direction === 'all' ? { direction } : {}),
          ...pageOf(request.query),
        },
        (id) => ctx.live.presence.get(id),
      );
      return json({ friends });
    },
  },
  {
    method: 'POST',
    path: '/api/v1/friends',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      const body = await readJsonObject(request);
      return json(await requestFriend(ctx, playerId, body.friend_id));
    },
  },
  {
    method: 'PUT',
    path: '/api/v1/friends/:friend_id',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      const body = await readJsonObject(request);
      return json(await answerFriend(ctx, playerId, request.params.friend_id!, body.status));
    },
  },
  {
    method: 'DELETE',
    path: '/api/v1/friends/:friend_id',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      await removeFriend(ctx, playerId, request.params.friend_id!);
      return json({ success: true });
    },
  },
];
