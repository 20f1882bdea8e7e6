import { channelHistory, chatMessageView, mayUseChannel } from '../../../runtime/social/chat';
import { ApiError } from '../../../runtime/contracts/errors';
import { ChatHistory, ChatHistoryPath, ChatHistoryQuery } from '../../../runtime/schemas/chat';
import { route, type Route } from '../../contract';

/** Chat history: persisted messages, readable whether or not the channel runs. */
export const chatRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/chat/:channel_id/history',
    summary: 'A channel\'s stored messages, oldest first within the newest `limit`',
    tag: 'social',
    auth: 'player',
    rate: 'api',
    params: ChatHistoryPath,
    query: ChatHistoryQuery,
    response: ChatHistory,
    errors: ['forbidden'],
    handle: async ({ ctx, player, params: { channel_id: channel }, query }) => {
      // A malformed id and a channel the caller may not read answer alike.
      if (!channel || !(await mayUseChannel(ctx, player.playerId, channel))) throw new ApiError('forbidden', 'You are not a member of that channel.');
      const rows = await channelHistory(ctx.db, channel, player.playerId, query);
      return { messages: rows.map(chatMessageView) };
    },
  }),
];
