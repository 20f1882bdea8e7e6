import { deleteNotification, listNotifications, markNotificationRead } from '../runtime/notifications';
import { json, requirePlayer, type Route } from './http';
import { pageOf, queryParam } from './pagination';

/** Notifications: the caller's own only; anyone else's answers 403 `forbidden`. */
export const notificationRoutes: Route[] = [
  {
    method: 'GET',
    path: '/api/v1/notifications',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      const read = queryParam(request.query, 'read');
      const notifications = await listNotifications(ctx.db, playerId, {
        ...pageOf(request.query),
        // Only the literal `true` or `false` filters (anything else lists all): `read=false` lists the unread ones.
        ...(read === 'true' || read === 'false' ? { read: read === 'true' } : {}),
      });
      return json({ notifications });
    },
  },
  {
    method: 'PUT',
    path: '/api/v1/notifications/:id/read',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      return json(await markNotificationRead(ctx.db, playerId, request.params.id!));
    },
  },
  {
    method: 'DELETE',
    path: '/api/v1/notifications/:id',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      await deleteNotification(ctx.db, playerId, request.params.id!);
      return json({ success: true });
    },
  },
];
