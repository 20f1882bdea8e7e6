import { answerFriend, listFriends, removeFriend, requestFriend } from '../../../runtime/social/friends';
import { Success } from '../../../runtime/schemas/common';
import { FriendAnswer, FriendAnswerPath, FriendList, FriendPath, FriendQuery, FriendRequest, Friendship } from '../../../runtime/schemas/social';
import { route, type Route } from '../../contract';

/** Friends: the caller's list, requests, answers and removal. */
export const friendRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/friends',
    summary: "The caller's relations, newest first, with accepted friends' presence",
    tag: 'social',
    auth: 'player',
    rate: 'api',
    query: FriendQuery,
    response: FriendList,
    errors: [],
    handle: async ({ ctx, player, query }) => ({
      friends: await listFriends(ctx.db, player.playerId, query, (id) => ctx.live.presence.get(id)),
    }),
  }),
  route({
    method: 'POST',
    path: '/api/v1/friends',
    summary: 'Ask a player to be friends; to one who already asked, the friendship at once',
    tag: 'social',
    auth: 'player',
    rate: 'api',
    body: FriendRequest,
    response: Friendship,
    errors: ['social.cannot_friend_self', 'social.friend_not_found', 'social.already_friend', 'forbidden'],
    handle: ({ ctx, player, body }) => requestFriend(ctx, player.playerId, body),
  }),
  route({
    method: 'PUT',
    path: '/api/v1/friends/:friend_id',
    summary: 'Accept, reject or keep a request from a player, or block a player',
    tag: 'social',
    auth: 'player',
    rate: 'api',
    params: FriendAnswerPath,
    body: FriendAnswer,
    response: Friendship,
    errors: ['social.friendship_not_found', 'social.friend_not_found', 'social.cannot_friend_self'],
    handle: ({ ctx, player, params, body }) => answerFriend(ctx, player.playerId, params.friend_id, body),
  }),
  route({
    method: 'DELETE',
    path: '/api/v1/friends/:friend_id',
    summary: 'End a friendship, cancel or decline a request, or lift your own block',
    tag: 'social',
    auth: 'player',
    rate: 'api',
    params: FriendPath,
    response: Success,
    errors: ['social.friendship_not_found'],
    handle: async ({ ctx, player, params }) => {
      await removeFriend(ctx, player.playerId, params.friend_id);
      return { success: true as const };
    },
  }),
];
