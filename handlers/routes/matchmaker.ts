import { z } from 'zod';
import { Success } from '../../runtime/schemas/common';
import { MatchmakerAdd, MatchmakerQueued, MatchmakerTicket } from '../../runtime/schemas/matchmaker';
import { route, type Route } from '../contract';

/**
 * Matchmaker tickets over REST. Tickets are node-local and owner-only;
 * outcomes arrive over the WebSocket.
 */
const ticket = z.object({ ticket_id: z.string() });

export const matchmakerRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/api/v1/matchmaker',
    summary: 'Queue for a game mode',
    tag: 'matchmaker',
    auth: 'player',
    rate: 'api',
    body: MatchmakerAdd,
    response: MatchmakerQueued,
    errors: ['matchmaker.unknown_mode', 'matchmaker.queue_full', 'invalid_payload'],
    handle: async ({ ctx, player, body }) => ctx.live.matchmaker.add(player.playerId, body.mode, body.properties),
  }),
  route({
    method: 'GET',
    path: '/api/v1/matchmaker/:ticket_id',
    summary: 'One of the caller\'s tickets',
    tag: 'matchmaker',
    auth: 'player',
    rate: 'api',
    params: ticket,
    response: MatchmakerTicket,
    errors: ['matchmaker.ticket_not_found'],
    handle: async ({ ctx, player, params }) => ctx.live.matchmaker.get(player.playerId, params.ticket_id),
  }),
  route({
    method: 'DELETE',
    path: '/api/v1/matchmaker/:ticket_id',
    summary: 'Withdraw a ticket',
    tag: 'matchmaker',
    auth: 'player',
    rate: 'api',
    params: ticket,
    response: Success,
    errors: ['matchmaker.ticket_not_found'],
    handle: async ({ ctx, player, params }) => {
      ctx.live.matchmaker.remove(player.playerId, params.ticket_id);
      return { success: true as const };
    },
  }),
];
