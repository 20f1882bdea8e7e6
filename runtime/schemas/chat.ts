import { z } from 'zod';
import { byteLength } from '../contracts/frame-envelope';
import type { Channel } from '../contracts/live';
import { CONTENT_MAX_BYTES, IsoTime, JsonObject, pageQuery, Text, Uuid } from './common';
import { DmPush } from './dm';
import { clientFrame, type PushContract } from './frame-contract';

export const CHANNEL_ID_MAX_BYTES = 256;

const UUID_LOWER = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const GLOBAL_RE = /^global:([A-Za-z0-9_.-]{1,64})$/;
const DM_RE = new RegExp(`^dm:(${UUID_LOWER}):(${UUID_LOWER})$`);
const WORLD_RE = new RegExp(`^world:(${UUID_LOWER})$`);
const CELL_RE = new RegExp(`^(zone|prox):(${UUID_LOWER}):(-?\\d{1,10}),(-?\\d{1,10})$`);
const ROOM_RE = new RegExp(`^room:(${UUID_LOWER})$`);

/** A well-formed channel id, or null (wrong length, unknown prefix, malformed rest). */
export function parseChannel(id: string): Channel | null {
  if (id === '' || byteLength(id) > CHANNEL_ID_MAX_BYTES) return null;
  let m: RegExpExecArray | null;
  if ((m = GLOBAL_RE.exec(id))) return { id, kind: 'global', name: m[1]! };
  if ((m = DM_RE.exec(id))) return m[1]! < m[2]! ? { id, kind: 'dm', players: [m[1]!, m[2]!] } : null;
  if ((m = WORLD_RE.exec(id))) return { id, kind: 'world', worldId: m[1]! };
  if ((m = CELL_RE.exec(id))) return { id, kind: m[1] as 'zone' | 'prox', worldId: m[2]! };
  if ((m = ROOM_RE.exec(id))) return { id, kind: 'room', groupId: m[1]! };
  return null;
}

/** A channel id as the client spells it; whether it names a channel the caller may use is asked later. */
const ChannelText = z.string().meta({
  description: '1-256 bytes: global:<name>, dm:<a>:<b>, world:<world_id>, zone:<world_id>:<x>,<y>, prox:<world_id>:<x>,<y>, room:<group_id>',
});

/** Joining names a channel exactly, so a malformed id is refused as such. */
const KnownChannel = ChannelText.transform((id, ctx) => {
  const channel = parseChannel(id);
  if (channel) return channel;
  ctx.addIssue({ code: 'custom', input: id, message: 'must be 1-256 bytes with a known prefix' });
  return z.NEVER;
});

/** Channel text; unlike a direct message, empty content is broadcast. */
export const ChatContent = Text.refine((s) => byteLength(s) <= CONTENT_MAX_BYTES, `must be at most ${CONTENT_MAX_BYTES} bytes`)
  .meta({ description: `0-${CONTENT_MAX_BYTES} bytes` });

export const ChatSend = z.object({ channel_id: ChannelText, content: ChatContent });
export type ChatSend = z.output<typeof ChatSend>;

const ChannelRef = z.object({ channel_id: z.string() });

export const chatJoin = clientFrame({
  type: 'chat.join',
  summary: 'Join a channel this player may use; at most 32 per connection.',
  auth: true,
  payload: z.object({ channel_id: KnownChannel }),
  absent: 'unknown_type',
  missing: 'invalid_channel_id',
  invalid: 'invalid_channel_id',
  reply: { type: 'chat.joined', payload: ChannelRef },
});

/** Leaving a channel never joined is harmless; only a frame without a channel id is not understood. */
export const chatLeave = clientFrame({
  type: 'chat.leave',
  summary: 'Leave a channel; answers chat.left whether or not it was joined.',
  auth: true,
  payload: ChannelRef,
  absent: 'unknown_type',
  missing: 'unknown_type',
  invalid: 'unknown_type',
  reply: { type: 'chat.left', payload: ChannelRef },
});

export const chatSend = clientFrame({
  type: 'chat.send',
  summary: 'Send to a channel this player may use (joined or not); stored, then pushed to its members as chat.message. No reply on success.',
  auth: true,
  payload: ChatSend,
  absent: 'unknown_type',
  missing: 'invalid_payload',
  reply: null,
});

export const chatFrames = [chatJoin, chatLeave, chatSend];

/** A direct message is a chat message on its `dm:` channel, so both pushes carry one shape. */
export const chatPushes: PushContract[] = [{ type: 'chat.message', summary: 'A message on a channel this connection joined.', payload: DmPush }];

/** `GET /chat/:channel_id/history`: a malformed id names no channel (null), which nobody may read. */
export const ChatHistoryPath = z.object({ channel_id: ChannelText.transform(parseChannel) });
export const ChatHistoryQuery = pageQuery();

/** A stored message as REST history returns it (`sent_at` ISO, unlike the push). */
export const ChatMessage = z.object({
  id: Uuid,
  channel_type: z.string(),
  channel_id: z.string(),
  sender_id: Uuid,
  content: z.string(),
  metadata: JsonObject,
  sent_at: IsoTime,
});
export type ChatMessageView = z.output<typeof ChatMessage>;

export const ChatHistory = z.object({ messages: z.array(ChatMessage) });
