import { dmHistory, sendDirectMessage } from '../../../runtime/social/dm';
import { idOf, pageQuery } from '../../../runtime/schemas/common';
import { DmHistory, DmSend, DmSent } from '../../../runtime/schemas/dm';
import { z } from 'zod';
import { route, type Route } from '../../contract';

/** Direct messages between two players. */
export const dmRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/api/v1/dm',
    summary: 'Send a direct message',
    tag: 'social',
    auth: 'player',
    rate: 'api',
    body: DmSend,
    response: DmSent,
    errors: ['missing_field', 'invalid_payload', 'player.not_found', 'dm.content_empty', 'dm.content_too_large', 'dm.blocked'],
    handle: ({ ctx, player, body }) => sendDirectMessage(ctx, player.playerId, body),
  }),
  route({
    method: 'GET',
    path: '/api/v1/dm/:player_id/history',
    summary: 'The conversation with one player, oldest first',
    tag: 'social',
    auth: 'player',
    rate: 'api',
    params: z.object({ player_id: idOf('player.not_found', 'player') }),
    query: pageQuery(),
    response: DmHistory,
    errors: ['player.not_found'],
    handle: ({ ctx, player, params, query }) => dmHistory(ctx, player.playerId, params.player_id, query),
  }),
];
