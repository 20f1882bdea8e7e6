import { getMatchRecord, listMatchRecords, type LiveMatchFilter } from '../runtime/matches';
import { json, requirePlayer, type Route } from './http';
import { pageOf, queryParam } from './pagination';

/**
 * Match history and live matches. No roster is
 * ever returned here; joining happens over the WebSocket.
 */
export const matchRoutes: Route[] = [
  {
    method: 'GET',
    path: '/api/v1/matches',
    handler: async (request, ctx, call) => {
      requirePlayer(call);
      const mode = queryParam(request.query, 'mode');
      const status = queryParam(request.query, 'status');
      const matches = await listMatchRecords(ctx.db, {
        ...(mode !== null ? { mode } : {}),
        ...(status !== null ? { status } : {}),
        ...pageOf(request.query),
      });
      return json({ matches });
    },
  },
  {
    method: 'GET',
    path: '/api/v1/matches/live',
    handler: async (request, ctx, call) => {
      requirePlayer(call);
      const q = request.query;
      // Boolean filters count only when spelled exactly (`true`, or `false`
      // where it narrows); any other value is ignored, not rejected.
      const filter: LiveMatchFilter = {};
      const mode = queryParam(q, 'mode');
      if (mode !== null) filter.mode = mode;
      if (queryParam(q, 'has_capacity') === 'true') filter.hasCapacity = true;
      const joinable = queryParam(q, 'joinable');
      if (joinable === 'true' || joinable === 'false') filter.joinable = joinable === 'true';
      return json({ matches: ctx.live.matches.list(filter) });
    },
  },
  {
    method: 'GET',
    path: '/api/v1/matches/:id',
    handler: async (request, ctx, call) => {
      requirePlayer(call);
      return json(await getMatchRecord(ctx.db, request.params.id!));
    },
  },
];

