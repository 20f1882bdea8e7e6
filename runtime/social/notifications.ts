import type { Kysely, Selectable } from 'kysely';
import type { Ctx } from '../contracts/context';
import { isoSeconds, jsonb, type Db } from '../platform/database';
import { registerErasable } from '../changes/erasure';
import { ApiError, validationFailed } from '../contracts/errors';
import { byteLength, isPlainObject } from '../contracts/frame-envelope';
import { isUuid } from '../platform/ids';
import { newestFirst } from '../platform/pages';
import type { Database, NotificationsTable } from '../contracts/tables';
import type { NotificationQuery, NotificationView } from '../schemas/notifications';

export type { NotificationView } from '../schemas/notifications';

/**
 * Notifications. Server
 * code creates them — friend requests, group invitations and join requests,
 * game scripts, extensions — always through `notify` (or, inside a caller's
 * transaction, `createNotification` then `deliverNotification` after commit),
 * so every stored notification is also pushed live as `notification.new`.
 */

registerErasable({ table: 'notifications', column: 'player_id', mode: 'delete' });

export interface NewNotification {
  playerId: string;
  /** Game-defined kind, 1-64 bytes (`friend_request`, `group_invite`, ...). */
  type: string;
  subject: string;
  content?: Record<string, unknown>;
}

const TYPE_MAX_BYTES = 64;
const SUBJECT_MAX_CHARS = 255;
const CONTENT_MAX_BYTES = 16_384;

export function notificationView(row: Selectable<NotificationsTable>): NotificationView {
  // `sent_at` is NOT NULL.
  return {
    id: row.id,
    player_id: row.player_id,
    type: row.type,
    subject: row.subject,
    content: row.content ?? {},
    read: row.read,
    sent_at: isoSeconds(row.sent_at)!,
  };
}

/** Scripts and extensions pass whatever they were given: check it before it reaches a column. */
function checkNew(n: NewNotification): Record<string, unknown> {
  const problems: Record<string, string[]> = {};
  if (!isUuid(n.playerId)) problems.player_id = ['must be a player id'];
  if (typeof n.type !== 'string' || n.type === '' || byteLength(n.type) > TYPE_MAX_BYTES) problems.type = [`must be a string of 1-${TYPE_MAX_BYTES} bytes`];
  if (typeof n.subject !== 'string' || n.subject.length > SUBJECT_MAX_CHARS) problems.subject = [`must be a string of at most ${SUBJECT_MAX_CHARS} characters`];
  const content = n.content ?? {};
  if (!isPlainObject(content)) problems.content = ['must be an object'];
  else if (byteLength(JSON.stringify(content)) > CONTENT_MAX_BYTES) problems.content = [`must encode to at most ${CONTENT_MAX_BYTES} bytes`];
  if (Object.keys(problems).length) throw validationFailed('errors', problems);
  return content;
}

/**
 * Stores a notification with the caller's connection (a transaction when the
 * notification belongs to a larger change). Push it with `deliverNotification`
 * once that transaction has committed.
 */
export async function createNotification(db: Kysely<Database>, ctx: Pick<Ctx, 'ids' | 'clock'>, n: NewNotification): Promise<NotificationView> {
  const content = checkNew(n);
  return insertNotification(db, { id: ctx.ids.uuid(), playerId: n.playerId, type: n.type, subject: n.subject, content, sentAt: new Date(ctx.clock.now()) });
}

interface CheckedNotification {
  id: string;
  playerId: string;
  type: string;
  subject: string;
  content: Record<string, unknown>;
  sentAt: Date;
}

async function insertNotification(db: Kysely<Database>, n: CheckedNotification): Promise<NotificationView> {
  const row = await db
    .insertInto('notifications')
    .values({ id: n.id, player_id: n.playerId, type: n.type, subject: n.subject, content: jsonb(n.content), sent_at: n.sentAt })
    .returningAll()
    .executeTakeFirstOrThrow();
  return notificationView(row);
}

/**
 * For callers that must answer at once (a game script's `game.notify`, which
 * runs inside a synchronous Lua call): checks the notification now (throwing
 * `validation_failed` as `notify` does) and returns it as it will be stored;
 * the recipient check, the insert and the live push follow in the background.
 * A recipient that does not exist is logged and nothing is stored.
 */
export function notifyInBackground(ctx: Ctx, n: NewNotification): NotificationView {
  const content = checkNew(n);
  const checked: CheckedNotification = { id: ctx.ids.uuid(), playerId: n.playerId, type: n.type, subject: n.subject, content, sentAt: new Date(ctx.clock.now()) };
  storeAndDeliver(ctx, checked).then(
    (stored) => void (stored ?? ctx.log.warn('notification_dropped', { player_id: n.playerId, type: n.type, reason: 'player_not_found' })),
    (err) => ctx.log.error('notification_failed', { player_id: n.playerId, type: n.type, error: err }),
  );
  return { id: checked.id, player_id: n.playerId, type: n.type, subject: n.subject, content, read: false, sent_at: isoSeconds(checked.sentAt)! };
}

/** Pushes `notification.new` to every live socket of the recipient; offline players read it later. */
export function deliverNotification(ctx: Pick<Ctx, 'live'>, n: NotificationView): void {
  ctx.live.push(n.player_id, { type: 'notification.new', payload: { ...n } });
}

/**
 * The one entry point for scripts, extensions and services outside a
 * transaction. Throws `validation_failed` on bad input and `player.not_found`
 * when the recipient does not exist.
 */
export async function notify(ctx: Ctx, n: NewNotification): Promise<NotificationView> {
  const content = checkNew(n);
  const stored = await storeAndDeliver(ctx, { id: ctx.ids.uuid(), playerId: n.playerId, type: n.type, subject: n.subject, content, sentAt: new Date(ctx.clock.now()) });
  if (!stored) throw new ApiError('player.not_found', 'No such player.');
  return stored;
}

/** Stores a checked notification and pushes it; null (nothing stored) when the recipient does not exist. */
async function storeAndDeliver(ctx: Ctx, n: CheckedNotification): Promise<NotificationView | null> {
  const exists = await ctx.db.selectFrom('players').select('id').where('id', '=', n.playerId).executeTakeFirst();
  if (!exists) return null;
  const stored = await insertNotification(ctx.db, n);
  deliverNotification(ctx, stored);
  return stored;
}

/** The caller's notifications, newest first. */
export async function listNotifications(db: Db, playerId: string, q: NotificationQuery): Promise<NotificationView[]> {
  let query = db.selectFrom('notifications').selectAll().where('player_id', '=', playerId);
  if (q.read !== null) query = query.where('read', '=', q.read);
  const rows = await newestFirst(query, q).execute();
  return rows.map(notificationView);
}

/** After a write matched nothing: someone else's notification is 403 `forbidden`, a missing one 404. */
async function refusal(db: Db, id: string): Promise<ApiError> {
  const other = await db.selectFrom('notifications').select('id').where('id', '=', id).executeTakeFirst();
  return other ? new ApiError('forbidden', 'That notification belongs to another player.') : new ApiError('notification.not_found', 'No such notification.');
}

export async function markNotificationRead(db: Db, playerId: string, id: string): Promise<NotificationView> {
  const row = await db
    .updateTable('notifications')
    .set({ read: true })
    .where('id', '=', id)
    .where('player_id', '=', playerId)
    .returningAll()
    .executeTakeFirst();
  if (!row) throw await refusal(db, id);
  return notificationView(row);
}

export async function deleteNotification(db: Db, playerId: string, id: string): Promise<void> {
  const gone = await db.deleteFrom('notifications').where('id', '=', id).where('player_id', '=', playerId).executeTakeFirst();
  if (Number(gone.numDeletedRows) === 0) throw await refusal(db, id);
}
