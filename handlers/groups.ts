import {
  acceptRequest,
  changeRole,
  createGroup,
  dropRequest,
  getGroup,
  invitePlayer,
  joinGroup,
  kickMember,
  leaveGroup,
  listMembers,
  listRequests,
  requestToJoin,
  searchGroups,
  updateGroup,
} from '../runtime/groups';
import { readJsonObject } from './body';
import { json, requirePlayer, type Route } from './http';
import { pageOf, queryParam } from './pagination';

/** Groups, plus join requests and invitations for closed groups. */

export const groupRoutes: Route[] = [
  {
    method: 'POST',
    path: '/api/v1/groups',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      return json(await createGroup(ctx, playerId, await readJsonObject(request)));
    },
  },
  {
    method: 'GET',
    path: '/api/v1/groups',
    handler: async (request, ctx, call) => {
      requirePlayer(call);
      const open = queryParam(request.query, 'open');
      const search = { q: queryParam(request.query, 'q'), open: open === 'true' ? true : open === 'false' ? false : null };
      return json({ groups: await searchGroups(ctx.db, search, pageOf(request.query)) });
    },
  },
  {
    method: 'GET',
    path: '/api/v1/groups/:id',
    handler: async (request, ctx, call) => {
      requirePlayer(call);
      return json(await getGroup(ctx.db, request.params.id!));
    },
  },
  {
    method: 'PUT',
    path: '/api/v1/groups/:id',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      return json(await updateGroup(ctx, playerId, request.params.id!, await readJsonObject(request)));
    },
  },
  {
    method: 'POST',
    path: '/api/v1/groups/:id/join',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      return json(await joinGroup(ctx, playerId, request.params.id!));
    },
  },
  {
    method: 'POST',
    path: '/api/v1/groups/:id/requests',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      return json(await requestToJoin(ctx, playerId, request.params.id!));
    },
  },
  {
    method: 'POST',
    path: '/api/v1/groups/:id/leave',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      const id = request.params.id!;
      if (await leaveGroup(ctx, playerId, id)) ctx.live.chat.evict(playerId, `room:${id}`);
      return json({ success: true });
    },
  },
  {
    method: 'GET',
    path: '/api/v1/groups/:id/members',
    handler: async (request, ctx, call) => {
      requirePlayer(call);
      return json({ members: await listMembers(ctx.db, request.params.id!, pageOf(request.query)) });
    },
  },
  {
    method: 'PUT',
    path: '/api/v1/groups/:id/members/:player_id/role',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      const body = await readJsonObject(request);
      return json(await changeRole(ctx, playerId, request.params.id!, request.params.player_id!, body.role));
    },
  },
  {
    method: 'DELETE',
    path: '/api/v1/groups/:id/members/:player_id',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      const { id, player_id: target } = request.params as { id: string; player_id: string };
      await kickMember(ctx, playerId, id, target);
      ctx.live.chat.evict(target, `room:${id}`);
      return json({ success: true });
    },
  },
  {
    method: 'POST',
    path: '/api/v1/groups/:id/invites',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      const body = await readJsonObject(request);
      return json(await invitePlayer(ctx, playerId, request.params.id!, body.player_id));
    },
  },
  {
    method: 'GET',
    path: '/api/v1/groups/:id/requests',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      return json({ requests: await listRequests(ctx, playerId, request.params.id!, pageOf(request.query)) });
    },
  },
  {
    method: 'POST',
    path: '/api/v1/groups/:id/requests/:player_id/accept',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      return json(await acceptRequest(ctx, playerId, request.params.id!, request.params.player_id!));
    },
  },
  {
    method: 'DELETE',
    path: '/api/v1/groups/:id/requests/:player_id',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      await dropRequest(ctx, playerId, request.params.id!, request.params.player_id!);
      return json({ success: true });
    },
  },
];
