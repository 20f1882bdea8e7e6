import { getMatchRecord, listMatchRecords } from '../../runtime/matches/matches';
import { LiveMatchQuery, MatchList, MatchRecord, MatchRecordId, MatchRecordList, MatchRecordQuery } from '../../runtime/schemas/matches';
import { route, type Route } from '../contract';

/**
 * Match history and live matches. No roster is
 * ever returned here; joining happens over the WebSocket.
 */
export const matchRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/matches',
    summary: 'Finished match records, newest first',
    tag: 'matches',
    auth: 'player',
    rate: 'api',
    query: MatchRecordQuery,
    response: MatchRecordList,
    errors: [],
    handle: async ({ ctx, query }) => ({ matches: await listMatchRecords(ctx.db, query) }),
  }),
  route({
    method: 'GET',
    path: '/api/v1/matches/live',
    summary: 'Live matches of listed modes on this node',
    tag: 'matches',
    auth: 'player',
    rate: 'api',
    query: LiveMatchQuery,
    response: MatchList,
    errors: [],
    handle: async ({ ctx, query }) => ({ matches: ctx.live.matches.list(query) }),
  }),
  route({
    method: 'GET',
    path: '/api/v1/matches/:id',
    summary: 'One finished match record',
    tag: 'matches',
    auth: 'player',
    rate: 'api',
    params: MatchRecordId,
    response: MatchRecord,
    errors: ['match.not_found'],
    handle: ({ ctx, params }) => getMatchRecord(ctx.db, params.id),
  }),
];
