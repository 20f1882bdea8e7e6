import type { Selectable } from 'kysely';
import type { Ctx } from '../contracts/context';
import { isoSeconds, jsonb, type Db } from '../platform/database';
import { registerErasable } from '../changes/erasure';
import { isPlainObject } from '../contracts/frame-envelope';
import { isGroupMember } from './groups';
import { blockPartnersQuery } from './blocks';
import { newestFirst, type Page } from '../platform/pages';
import type { ChatMessagesTable } from '../contracts/tables';
import type { Channel, ChatPush, NewChatMessage, StampedChatMessage } from '../contracts/live';
import type { ChatMessageView } from '../schemas/chat';

/**
 * Chat channels: channel ids, the membership rule shared by the socket and
 * REST history, and the `chat_messages` table that holds chat and direct
 * messages alike.
 *
 * Channel ids, 1-256 bytes:
 *   global:<name>             a name some mode in setting `game_modes` lists under `chat_channels`
 *   dm:<a>:<b>                the two player ids, ascending; only a and b
 *   world:<world_id>          players in that world
 *   zone:<world_id>:<x>,<y>   players in that world
 *   prox:<world_id>:<x>,<y>   players in that world
 *   room:<group_id>           members of the group (the group's channel)
 * Worlds are served by a world host through `LiveChat.worlds()`; until one
 * registers, nobody is in any world and those channels refuse everyone.
 */

registerErasable(
  { table: 'chat_messages', column: 'sender_id', mode: 'delete' },
  { table: 'chat_messages', column: 'recipient_id', mode: 'delete' },
);

export const CHANNELS_PER_CONNECTION = 32;
export const CHANNEL_BUFFER = 100;

/** Both participants name the same channel: `dm:<smaller id>:<larger id>`. */
export function dmChannelId(a: string, b: string): string {
  const [x, y] = a < b ? [a, b] : [b, a];
  return `dm:${x.toLowerCase()}:${y.toLowerCase()}`;
}

/** `global:` names the operator declared, across every mode's `chat_channels` list. */
function declaredGlobal(ctx: Pick<Ctx, 'settings'>, name: string): boolean {
  for (const mode of Object.values(ctx.settings.game_modes)) {
    const list = (mode as Record<string, unknown>).chat_channels;
    if (Array.isArray(list) && list.includes(name)) return true;
  }
  return false;
}

/** Whether the player may join, send to and read the channel. */
export async function mayUseChannel(ctx: Pick<Ctx, 'db' | 'settings' | 'live'>, playerId: string, channel: Channel): Promise<boolean> {
  switch (channel.kind) {
    case 'global':
      return declaredGlobal(ctx, channel.name!);
    case 'dm': {
      const [a, b] = channel.players!;
      if (playerId !== a && playerId !== b) return false;
      const other = playerId === a ? b : a;
      return (await ctx.db.selectFrom('players').select('id').where('id', '=', other).executeTakeFirst()) !== undefined;
    }
    case 'world':
    case 'zone':
    case 'prox':
      return ctx.live.chat.worlds()?.inWorld(playerId, channel.worldId!) ?? false;
    case 'room':
      return isGroupMember(ctx.db, channel.groupId!, playerId);
  }
}

/** Gives a message its id and time (ids are time-ordered, so history order is send order). */
export function stampChatMessage(ctx: Pick<Ctx, 'ids' | 'clock'>, m: NewChatMessage): StampedChatMessage {
  return { ...m, id: ctx.ids.uuid(), sentAt: ctx.clock.now() };
}

/** Persists stamped messages in one statement (a host batches concurrent sends this way). */
export async function insertChatMessages(db: Db, messages: readonly StampedChatMessage[]): Promise<void> {
  if (messages.length === 0) return;
  await db
    .insertInto('chat_messages')
    .values(
      messages.map((m) => ({
        id: m.id,
        channel_type: m.channel.kind,
        channel_id: m.channel.id,
        sender_id: m.senderId,
        recipient_id: m.recipientId ?? null,
        content: m.content,
        metadata: jsonb(isPlainObject(m.metadata) ? m.metadata : {}),
        sent_at: new Date(m.sentAt),
      })),
    )
    .execute();
}

export function chatPush(m: StampedChatMessage): ChatPush {
  return { channel_id: m.channel.id, sender_id: m.senderId, content: m.content, sent_at: m.sentAt };
}

/**
 * The newest `limit` messages of a channel (before the cursor) as `reader`
 * may see them, returned oldest first. In a channel the reader shares with
 * others, the lines of players in a block with the reader are left out; a
 * pair's own `dm:` history stays whole (it is theirs, and evidence).
 */
export async function channelHistory(db: Db, channel: Pick<Channel, 'id' | 'kind'>, reader: string, page: Page): Promise<Selectable<ChatMessagesTable>[]> {
  let query = db.selectFrom('chat_messages').selectAll().where('channel_id', '=', channel.id);
  if (channel.kind !== 'dm') query = query.where('sender_id', 'not in', blockPartnersQuery(db, reader));
  const rows = await newestFirst(query, page).execute();
  return rows.reverse();
}

export function chatMessageView(row: Selectable<ChatMessagesTable>): ChatMessageView {
  // `sent_at` is NOT NULL.
  return {
    id: row.id,
    channel_type: row.channel_type,
    channel_id: row.channel_id,
    sender_id: row.sender_id,
    content: row.content,
    metadata: row.metadata ?? {},
    sent_at: isoSeconds(row.sent_at)!,
  };
}
