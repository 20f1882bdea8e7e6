import { dmHistory, sendDirectMessage } from '../runtime/dm';
import { readJsonObject, requireString } from './body';
import { json, requirePlayer, type Route } from './http';
import { pageOf } from './pagination';

/** Direct messages between two players. */
export const dmRoutes: Route[] = [
  {
    method: 'POST',
    path: '/api/v1/dm',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      const body = await readJsonObject(request);
      // A field that is absent or not a string answers `missing_field`.
      const recipient = requireString(body, 'recipient_id');
      const content = requireString(body, 'content');
      return json(await sendDirectMessage(ctx, playerId, recipient, content));
    },
  },
  {
    method: 'GET',
    path: '/api/v1/dm/:player_id/history',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      return json(await dmHistory(ctx, playerId, request.params.player_id!, pageOf(request.query)));
    },
  },
];
