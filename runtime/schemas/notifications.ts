import { z } from 'zod';
import { BooleanFilter, idOf, IsoTime, JsonObject, pageQuery, Uuid } from './common';
import type { PushContract } from './frame-contract';

/** A stored notification, as REST lists it and `notification.new` pushes it. */
export const Notification = z.object({
  id: Uuid,
  player_id: Uuid,
  type: z.string().meta({ description: 'game-defined kind, e.g. friend_request, group_invite' }),
  subject: z.string(),
  content: JsonObject,
  read: z.boolean(),
  sent_at: IsoTime,
});
export type NotificationView = z.output<typeof Notification>;

export const NotificationList = z.object({ notifications: z.array(Notification) });

/** `read=false` lists the unread ones; any value but the literal `true` or `false` lists all. */
export const NotificationQuery = pageQuery().extend({ read: BooleanFilter });
export type NotificationQuery = z.output<typeof NotificationQuery>;

export const NotificationPath = z.object({ id: idOf('notification.not_found', 'notification') });

export const notificationPushes: PushContract[] = [
  { type: 'notification.new', summary: 'A notification was stored for this player (friend requests, group invitations, game scripts).', payload: Notification },
];
