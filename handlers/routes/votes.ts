import { getVote, listMatchVotes } from '../../runtime/votes/votes';
import { Vote, VoteId, VoteList, VoteMatchId } from '../../runtime/schemas/votes';
import { route, type Route } from '../contract';

/**
 * Closed votes. Voting itself happens on the WebSocket (`vote.cast`,
 * `vote.veto`); a vote appears here once it has closed.
 */
export const voteRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/matches/:id/votes',
    summary: 'A match\'s closed votes, newest first, at most 50; players of the match only',
    tag: 'votes',
    auth: 'player',
    rate: 'api',
    params: VoteMatchId,
    response: VoteList,
    errors: ['forbidden'],
    handle: async ({ ctx, params, player }) => ({ votes: await listMatchVotes(ctx.db, ctx.live.matches, params.id, player.playerId) }),
  }),
  route({
    method: 'GET',
    path: '/api/v1/votes/:id',
    summary: 'One closed vote with its full result',
    tag: 'votes',
    auth: 'player',
    rate: 'api',
    params: VoteId,
    response: Vote,
    errors: ['vote.not_found'],
    handle: ({ ctx, params }) => getVote(ctx.db, params.id),
  }),
];
