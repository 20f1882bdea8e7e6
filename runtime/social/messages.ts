import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import { afterCommit } from '../changes/effects';
import { byteLength } from '../contracts/frame-envelope';
import { isStorableText } from '../platform/text';
import { chatPush, insertChatMessages, stampChatMessage } from './chat';
import type { Channel, ChatDelivery, NewChatMessage } from '../contracts/live';
import { CONTENT_MAX_BYTES } from '../schemas/common';
import { blockPartners, eitherBlocked } from './blocks';
import type { Db } from '../platform/database';

/**
 * The one way a message is written, whoever sends it and however it
 * arrives: `chat.send`, `dm.send`, `POST /dm` and a script's
 * `game.chat.send` all end here, so the rule that a block silences a pair
 * (docs/decisions/0049-one-dm-write-path.md) cannot be missed by a path
 * added later. A message on a pair's `dm:` channel is a direct message
 * whichever frame carried it: stored with its recipient and pushed to them as
 * `dm.message`.
 */

/** Refuses a pair's `dm:` channel while either of the two has blocked the other; every other channel is nobody's pair. */
export async function requireUnblocked(db: Db, channel: Channel): Promise<void> {
  if (channel.kind !== 'dm') return;
  const [a, b] = channel.players!;
  if (await eitherBlocked(db, a, b)) throw new ApiError('dm.blocked', 'Messages between you and this player are blocked.', { channel_id: channel.id });
}

/**
 * The content rule every message meets, whichever path carries it: text the
 * database can store, at most CONTENT_MAX_BYTES, and on a pair's `dm:`
 * channel not empty (on a shared channel an empty line is broadcast). The
 * transports' schemas refuse the same earlier, each with its own wire error;
 * this is what no path can skip.
 */
export function contentProblem(channel: Channel, content: string): ApiError | null {
  const dm = channel.kind === 'dm';
  if (dm && content === '') return new ApiError('dm.content_empty', 'A message needs some content.');
  if (byteLength(content) > CONTENT_MAX_BYTES) {
    return dm
      ? new ApiError('dm.content_too_large', `A message is at most ${CONTENT_MAX_BYTES} bytes.`, { limit: CONTENT_MAX_BYTES })
      : new ApiError('invalid_payload', `A message is at most ${CONTENT_MAX_BYTES} bytes.`, { field: 'content', limit: CONTENT_MAX_BYTES });
  }
  if (!isStorableText(content)) return new ApiError('invalid_payload', 'A message must be text the server can store.', { field: 'content' });
  return null;
}

/**
 * Checks the content and the block, stores the message (through the node's group commit
 * where it has one), then hands it to the channel's members and, for a
 * direct message, to its recipient. In a channel the pair only shares, the
 * message is not refused but hidden from the players in a block with its
 * sender. Settles once stored; a message refused or not stored reaches nobody.
 */
export async function postMessage(ctx: Ctx, message: Omit<NewChatMessage, 'recipientId'>): Promise<void> {
  const problem = contentProblem(message.channel, message.content);
  if (problem) throw problem;
  const turn = deliveryTurn(ctx, message.channel.id);
  try {
    await requireUnblocked(ctx.db, message.channel);
    const stamped = stampChatMessage(ctx, { ...message, recipientId: recipientOf(message.channel, message.senderId) });
    // Both start now, so the group commit still takes messages in call order.
    const [hidden] = await Promise.all([
      message.channel.kind === 'dm' ? [] : blockPartners(ctx.db, message.senderId),
      ctx.live.chat.persist ? ctx.live.chat.persist(stamped) : insertChatMessages(ctx.db, [stamped]),
    ]);
    const push: ChatDelivery = hidden.length > 0 ? { ...chatPush(stamped), hidden_from: hidden } : chatPush(stamped);
    await turn.previous;
    await afterCommit(ctx, { kind: 'message_stored', push, recipientId: stamped.recipientId ?? null });
  } finally {
    turn.done();
  }
}

/** Each node's channels' last delivery still to come, by channel id. */
const deliveries = new WeakMap<Ctx, Map<string, Promise<void>>>();

/**
 * A message's place in its channel's deliveries: its members hear it after
 * every message posted before it on this node, whichever of the messages'
 * database reads (the block checks) a pooled database answers first. Only
 * the delivery waits; the reads and the store run side by side.
 */
function deliveryTurn(ctx: Ctx, channelId: string): { previous: Promise<void>; done(): void } {
  let channels = deliveries.get(ctx);
  if (!channels) deliveries.set(ctx, (channels = new Map()));
  const previous = channels.get(channelId) ?? Promise.resolve();
  let done!: () => void;
  const mine = new Promise<void>((resolve) => (done = resolve));
  channels.set(channelId, mine);
  return {
    previous,
    done: () => {
      done();
      if (channels.get(channelId) === mine) channels.delete(channelId);
    },
  };
}

/** The other participant when a participant writes on a `dm:` channel (a script may write there as anyone). */
function recipientOf(channel: Channel, senderId: string): string | undefined {
  if (channel.kind !== 'dm') return undefined;
  const [a, b] = channel.players!;
  return senderId === a ? b : senderId === b ? a : undefined;
}
