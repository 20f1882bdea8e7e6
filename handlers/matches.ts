import { getMatchRecord, listMatchRecords, type LiveMatchFilter } from '../runtime/matches';
import { json, requirePlayer, type Route } from './http';
import { pageOf } from './pagination';

/**
 * Match history and live matches (spec 4.4, rest-payloads 4). No roster is
 * ever returned here; joining happens over the WebSocket.
 */
export const matchRoutes: Route[] = [
  {
    method: 'GET',
    path: '/api/v1/matches',
    handler: async (request, ctx, call) => {
      requirePlayer(call);
      const q = new URL(request.url).searchParams;
      const matches = await listMatchRecords(ctx.db, {
        ...(q.has('mode') ? { mode: q.get('mode')! } : {}),
        ...(q.has('status') ? { status: q.get('status')! } : {}),
        ...pageOf(q),
      });
      return json({ matches });
    },
  },
  {
    method: 'GET',
    path: '/api/v1/matches/live',
    handler: async (request, ctx, call) => {
      requirePlayer(call);
      const q = new URL(request.url).searchParams;
      // Boolean filters count only for the literal strings (rest-payloads 0.4).
      const filter: LiveMatchFilter = {};
      if (q.has('mode')) filter.mode = q.get('mode')!;
      if (q.get('has_capacity') === 'true') filter.hasCapacity = true;
      const joinable = q.get('joinable');
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

