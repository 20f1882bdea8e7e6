import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import { channelHistory, dmChannelId } from './chat';
import { parseChannel } from '../schemas/chat';
import { postMessage } from './messages';
import type { Page } from '../platform/pages';
import type { DmSend } from '../schemas/dm';

/**
 * Direct messages. A DM is a
 * chat message on `dm:<a>:<b>`, persisted in `chat_messages` with its
 * recipient, pushed to the recipient as `dm.message` on every live socket and
 * to anyone joined to the DM channel as `chat.message`. It is written the way
 * every chat message is (`postMessage`), which refuses it while either player
 * blocks the other (`dm.blocked`).
 */

export interface DmMessage {
  id: string;
  sender_id: string;
  content: string;
  /** Epoch ms, as the socket push carries it. */
  sent_at: number;
}

/** The schema checked the content and the id's form; then the recipient, then (in `postMessage`) the block. */
export async function sendDirectMessage(ctx: Ctx, senderId: string, { recipient_id: recipient, content }: DmSend): Promise<{ success: true; channel_id: string }> {
  if (recipient === senderId) throw new ApiError('invalid_payload', 'You cannot message yourself.', { field: 'recipient_id' });
  const exists = await ctx.db.selectFrom('players').select('id').where('id', '=', recipient).executeTakeFirst();
  if (!exists) throw new ApiError('player.not_found', 'No such player.');
  const channel = parseChannel(dmChannelId(senderId, recipient))!;
  await postMessage(ctx, { channel, senderId, content });
  return { success: true, channel_id: channel.id };
}

/** The conversation with one player: the newest `limit` messages before the cursor, oldest first. */
export async function dmHistory(
  ctx: Pick<Ctx, 'db'>,
  caller: string,
  other: string,
  q: Page,
): Promise<{ messages: DmMessage[]; channel_id: string }> {
  const channelId = dmChannelId(caller, other);
  const rows = await channelHistory(ctx.db, { id: channelId, kind: 'dm' }, caller, q);
  return {
    channel_id: channelId,
    messages: rows.map((r) => ({ id: r.id, sender_id: r.sender_id, content: r.content, sent_at: new Date(r.sent_at).getTime() })),
  };
}
