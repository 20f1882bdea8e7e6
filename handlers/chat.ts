import { channelHistory, chatMessageView, mayUseChannel, parseChannel } from '../runtime/chat';
import { ApiError } from '../runtime/errors';
import { decodedParam, json, requirePlayer, type Route } from './http';
import { pageOf } from './pagination';

/** Chat history: persisted messages, readable whether or not the channel runs. */
export const chatRoutes: Route[] = [
  {
    method: 'GET',
    path: '/api/v1/chat/:channel_id/history',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      let raw: string;
      try {
        raw = decodedParam(request, 'channel_id');
      } catch {
        // Not decodable, so not a channel anyone may read.
        raw = '';
      }
      const channel = parseChannel(raw);
      // A malformed id and a channel the caller may not read answer alike.
      if (!channel || !(await mayUseChannel(ctx, playerId, channel))) throw new ApiError('forbidden', 'You are not a member of that channel.');
      const rows = await channelHistory(ctx.db, channel.id, pageOf(request.query));
      return json({ messages: rows.map(chatMessageView) });
    },
  },
];
