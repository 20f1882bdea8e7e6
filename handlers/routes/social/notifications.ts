import { deleteNotification, listNotifications, markNotificationRead } from '../../../runtime/social/notifications';
import { Success } from '../../../runtime/schemas/common';
import { Notification, NotificationList, NotificationPath, NotificationQuery } from '../../../runtime/schemas/notifications';
import { route, type Route } from '../../contract';

/** Notifications: the caller's own only; anyone else's answers 403 `forbidden`. */
export const notificationRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/notifications',
    summary: "The caller's notifications, newest first",
    tag: 'social',
    auth: 'player',
    rate: 'api',
    query: NotificationQuery,
    response: NotificationList,
    errors: [],
    handle: async ({ ctx, player, query }) => ({ notifications: await listNotifications(ctx.db, player.playerId, query) }),
  }),
  route({
    method: 'PUT',
    path: '/api/v1/notifications/:id/read',
    summary: 'Mark a notification read',
    tag: 'social',
    auth: 'player',
    rate: 'api',
    params: NotificationPath,
    response: Notification,
    errors: ['notification.not_found', 'forbidden'],
    handle: ({ ctx, player, params }) => markNotificationRead(ctx.db, player.playerId, params.id),
  }),
  route({
    method: 'DELETE',
    path: '/api/v1/notifications/:id',
    summary: 'Delete a notification',
    tag: 'social',
    auth: 'player',
    rate: 'api',
    params: NotificationPath,
    response: Success,
    errors: ['notification.not_found', 'forbidden'],
    handle: async ({ ctx, player, params }) => {
      await deleteNotification(ctx.db, player.playerId, params.id);
      return { success: true as const };
    },
  }),
];
