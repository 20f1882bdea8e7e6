import { z } from 'zod';
import { byteLength } from '../contracts/frame-envelope';
import { CONTENT_MAX_BYTES, EpochMs, idOf, Text } from './common';
import { clientFrame, type PushContract } from './frame-contract';
import { coded } from './rules';

/** Message text: checked before the recipient, as the wire order has it. */
export const MessageContent = z
  .string()
  .refine((s) => s !== '', coded('dm.content_empty', 'A message needs some content.'))
  .refine((s) => byteLength(s) <= CONTENT_MAX_BYTES, coded('dm.content_too_large', `A message is at most ${CONTENT_MAX_BYTES} bytes.`, { limit: CONTENT_MAX_BYTES }))
  .meta({ description: `1-${CONTENT_MAX_BYTES} bytes` });

/** `POST /dm` and `dm.send`. */
export const DmSend = z.object({
  content: MessageContent,
  recipient_id: idOf('player.not_found', 'player'),
});
export type DmSend = z.output<typeof DmSend>;

export const DmSent = z.object({ success: z.literal(true), channel_id: z.string() });

export const DmMessage = z.object({ id: z.string(), sender_id: z.string(), content: Text, sent_at: EpochMs });
export const DmHistory = z.object({ messages: z.array(DmMessage), channel_id: z.string() });

/** What a DM push carries (to the recipient as `dm.message`). */
export const DmPush = z.object({ channel_id: z.string(), sender_id: z.string(), content: z.string(), sent_at: EpochMs });

export const dmSend = clientFrame({
  type: 'dm.send',
  summary: 'Send a direct message; stored before the reply.',
  auth: true,
  payload: DmSend,
  absent: 'unknown_type',
  missing: 'invalid_payload',
  invalid: 'invalid_input',
  reply: { type: 'dm.sent', payload: z.object({ channel_id: z.string() }) },
});

export const dmFrames = [dmSend];

export const dmPushes: PushContract[] = [{ type: 'dm.message', summary: 'A direct message to this player.', payload: DmPush }];
