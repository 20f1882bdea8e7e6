import { getTournament, joinTournament, listTournaments, tournamentStandings } from '../../runtime/tournaments/tournaments';
import { Joined, StandingList, Tournament, TournamentList, TournamentPath, TournamentQuery } from '../../runtime/schemas/tournaments';
import { route, type Route } from '../contract';

/** Tournaments the game declares: list, read, join, and the frozen results. */
export const tournamentRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/tournaments',
    summary: 'Tournaments by start time, earliest first; active ones unless `status` says otherwise',
    tag: 'tournaments',
    auth: 'player',
    rate: 'api',
    query: TournamentQuery,
    response: TournamentList,
    errors: [],
    handle: async ({ ctx, query }) => ({ tournaments: await listTournaments(ctx.db, query) }),
  }),
  route({
    method: 'GET',
    path: '/api/v1/tournaments/:id',
    summary: 'One tournament',
    tag: 'tournaments',
    auth: 'player',
    rate: 'api',
    params: TournamentPath,
    response: Tournament,
    errors: ['tournament.not_found'],
    handle: ({ ctx, params }) => getTournament(ctx.db, params.id),
  }),
  route({
    method: 'GET',
    path: '/api/v1/tournaments/:id/standings',
    summary: "A finished tournament's frozen results with the reward each rank was paid (empty before it finishes)",
    tag: 'tournaments',
    auth: 'player',
    rate: 'api',
    params: TournamentPath,
    response: StandingList,
    errors: ['tournament.not_found'],
    handle: ({ ctx, params }) => tournamentStandings(ctx.db, params.id),
  }),
  route({
    method: 'POST',
    path: '/api/v1/tournaments/:id/join',
    summary: 'Enter a tournament that has not ended, paying its entry fee',
    tag: 'tournaments',
    auth: 'player',
    rate: 'api',
    params: TournamentPath,
    response: Joined,
    errors: ['tournament.not_found', 'tournament.full', 'tournament.already_joined', 'economy.insufficient_funds'],
    handle: ({ ctx, player, params }) => joinTournament(ctx, player.playerId, params.id),
  }),
];
