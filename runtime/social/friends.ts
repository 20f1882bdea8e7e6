import type { Selectable, Transaction } from 'kysely';
import type { Ctx } from '../contracts/context';
import { isoSeconds, isUniqueViolation, type Db } from '../platform/database';
import { registerErasable } from '../changes/erasure';
import { ApiError } from '../contracts/errors';
import { afterCommit } from '../changes/effects';
import { betweenPair } from './blocks';
import { dmChannelId } from './chat';
import { createNotification, deliverNotification, type NotificationView } from './notifications';
import { newestFirst } from '../platform/pages';
import type { Presence } from '../schemas/presence';
import type { Database, FriendshipsTable } from '../contracts/tables';
import type { FriendAnswer, FriendListing, FriendQuery, FriendRequest, FriendshipView } from '../schemas/social';

/**
 * Friends (where we depart from the first build, see
 * docs/decisions/0019-groups-and-friends-as-the-clients-expect.md).
 *
 * One directed row per relation: `player_id` asked `friend_id` (`pending`,
 * then `accepted` on the same row), or `player_id` blocked `friend_id`
 * (`blocked`). The transitions a player expects:
 *
 * - request: to someone who already asked you it becomes the friendship at
 *   once; repeating a request returns the existing row.
 * - accept / reject (`PUT`): only the recipient answers; reject deletes the row.
 * - block (`PUT` `blocked`): on anyone; it replaces the relation between the
 *   pair. A block stops requests, invitations and direct messages (on any
 *   path: runtime/social/messages.ts) both ways, takes both players off
 *   their live `dm:` channel, and hides the blocker from the blocked player's
 *   listing.
 * - remove (`DELETE`): either side ends a friendship, cancels its own request,
 *   declines an incoming one, or lifts its own block.
 */

registerErasable(
  { table: 'friendships', column: 'player_id', mode: 'delete' },
  { table: 'friendships', column: 'friend_id', mode: 'delete' },
);

type Row = Selectable<FriendshipsTable>;

function view(row: Row, status: FriendshipView['status'] = row.status): FriendshipView {
  // Both timestamps are NOT NULL.
  return {
    id: row.id,
    player_id: row.player_id,
    friend_id: row.friend_id,
    status,
    inserted_at: isoSeconds(row.inserted_at)!,
    updated_at: isoSeconds(row.updated_at)!,
  };
}

async function pairRows(db: Db | Transaction<Database>, a: string, b: string): Promise<{ mine?: Row; theirs?: Row }> {
  const rows = await db.selectFrom('friendships').selectAll().where(betweenPair(a, b)).execute();
  return { mine: rows.find((r) => r.player_id === a), theirs: rows.find((r) => r.player_id === b) };
}

/** `other` is null when the client's id could name no player; yourself comes first, as the more useful answer. */
async function requireOtherPlayer(db: Db | Transaction<Database>, caller: string, other: string | null): Promise<string> {
  if (other === caller) throw new ApiError('social.cannot_friend_self', 'You cannot befriend yourself.');
  if (other === null) throw new ApiError('social.friend_not_found', 'No such player.');
  const found = await db.selectFrom('players').select('id').where('id', '=', other).executeTakeFirst();
  if (!found) throw new ApiError('social.friend_not_found', 'No such player.');
  return other;
}

/** Turns a pending request into the friendship and tells the requester (push after commit). */
async function accept(trx: Transaction<Database>, ctx: Ctx, request: Row, now: Date): Promise<{ row: Row; note: NotificationView }> {
  const row = await trx
    .updateTable('friendships')
    .set({ status: 'accepted', updated_at: now })
    .where('id', '=', request.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const note = await createNotification(trx, ctx, {
    playerId: request.player_id,
    type: 'friend_accepted',
    subject: 'Your friend request was accepted',
    content: { friend_id: request.friend_id, friendship_id: row.id },
  });
  return { row, note };
}

/** `POST /friends`. */
export async function requestFriend(ctx: Ctx, caller: string, { friend_id: other }: FriendRequest): Promise<FriendshipView> {
  const now = new Date(ctx.clock.now());
  let note: NotificationView | null = null;
  let result: FriendshipView;
  try {
    result = await ctx.db.transaction().execute(async (trx) => {
      const friendId = await requireOtherPlayer(trx, caller, other);
      const { mine, theirs } = await pairRows(trx, caller, friendId);
      if (mine?.status === 'blocked') throw new ApiError('forbidden', 'You have blocked this player; remove the block first.', { reason: 'blocked' });
      // The blocker stays hidden from the player it blocked.
      if (theirs?.status === 'blocked') throw new ApiError('social.friend_not_found', 'No such player.');
      if (mine) return view(mine);
      if (theirs?.status === 'accepted') return view(theirs);
      if (theirs?.status === 'pending') {
        const accepted = await accept(trx, ctx, theirs, now);
        note = accepted.note;
        return view(accepted.row);
      }
      const row = await trx
        .insertInto('friendships')
        .values({ id: ctx.ids.uuid(), player_id: caller, friend_id: friendId, status: 'pending', inserted_at: now, updated_at: now })
        .returningAll()
        .executeTakeFirstOrThrow();
      note = await createNotification(trx, ctx, {
        playerId: friendId,
        type: 'friend_request',
        subject: 'New friend request',
        content: { requester_id: caller, friendship_id: row.id },
      });
      return view(row);
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new ApiError('social.already_friend', 'A request between you already exists.');
    throw err;
  }
  if (note) deliverNotification(ctx, note);
  return result;
}

/**
 * `PUT /friends/:friend_id` with `status`: `accepted`, `rejected`, `blocked` (or `pending`, a no-op on a pending request).
 * `friendId` is null when the client's id could name no player.
 */
export async function answerFriend(ctx: Ctx, caller: string, friendId: string | null, { status }: FriendAnswer): Promise<FriendshipView> {
  if (status === 'blocked') return block(ctx, caller, friendId);
  const notFound = () => new ApiError('social.friendship_not_found', 'No request from that player.');
  if (friendId === null) throw notFound();
  const now = new Date(ctx.clock.now());
  let note: NotificationView | null = null;
  const result = await ctx.db.transaction().execute(async (trx) => {
    // Only the recipient answers: the row in which the caller is the target.
    const incoming = await trx
      .selectFrom('friendships')
      .selectAll()
      .where('player_id', '=', friendId)
      .where('friend_id', '=', caller)
      .forUpdate()
      .executeTakeFirst();
    if (!incoming || incoming.status === 'blocked') throw notFound();
    if (status === 'rejected') {
      if (incoming.status !== 'pending') throw notFound();
      await trx.deleteFrom('friendships').where('id', '=', incoming.id).execute();
      return view(incoming, 'rejected');
    }
    if (status === 'pending') {
      if (incoming.status !== 'pending') throw notFound();
      return view(incoming);
    }
    if (incoming.status === 'accepted') return view(incoming);
    const accepted = await accept(trx, ctx, incoming, now);
    note = accepted.note;
    return view(accepted.row);
  });
  if (note) deliverNotification(ctx, note);
  return result;
}

async function block(ctx: Ctx, caller: string, other: string | null): Promise<FriendshipView> {
  const now = new Date(ctx.clock.now());
  const blocked = await ctx.db.transaction().execute(async (trx) => {
    const target = await requireOtherPlayer(trx, caller, other);
    const { mine, theirs } = await pairRows(trx, caller, target);
    // The other side's own block is theirs to lift; anything else between the pair ends here.
    if (theirs && theirs.status !== 'blocked') await trx.deleteFrom('friendships').where('id', '=', theirs.id).execute();
    if (mine) {
      const row = await trx
        .updateTable('friendships')
        .set({ status: 'blocked', updated_at: now })
        .where('id', '=', mine.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      return view(row);
    }
    const row = await trx
      .insertInto('friendships')
      .values({ id: ctx.ids.uuid(), player_id: caller, friend_id: target, status: 'blocked', inserted_at: now, updated_at: now })
      .returningAll()
      .executeTakeFirstOrThrow();
    return view(row);
  });
  // Sends there are refused from now on; leaving the sockets joined would let the channel resume by itself once the block is lifted.
  const channelId = dmChannelId(caller, blocked.friend_id);
  await afterCommit(ctx, { kind: 'membership_ended', playerId: caller, channelId }, { kind: 'membership_ended', playerId: blocked.friend_id, channelId });
  return blocked;
}

/** `DELETE /friends/:friend_id`. */
export async function removeFriend(ctx: Ctx, caller: string, friendId: string): Promise<void> {
  const removed = await ctx.db
    .deleteFrom('friendships')
    .where((eb) =>
      eb.or([
        eb.and([eb('player_id', '=', caller), eb('friend_id', '=', friendId)]),
        // Someone else's block on the caller is not the caller's to remove.
        eb.and([eb('player_id', '=', friendId), eb('friend_id', '=', caller), eb('status', '!=', 'blocked')]),
      ]),
    )
    .executeTakeFirst();
  if (Number(removed.numDeletedRows) === 0) throw new ApiError('social.friendship_not_found', 'No relation with that player.');
}

/**
 * The caller's relations, newest first: by default the rows it started (as
 * the established clients expect); with `incoming` the rows pointing at it,
 * or with `all` both, except blocks pointing at it (hidden). `presenceOf`
 * adds the live status of accepted friends.
 */
export async function listFriends(
  db: Db,
  caller: string,
  q: FriendQuery,
  presenceOf: (playerId: string) => Presence | null,
): Promise<FriendListing[]> {
  let query = db
    .selectFrom('friendships')
    .selectAll()
    .where((eb) => {
      const outgoing = eb('player_id', '=', caller);
      const incoming = eb.and([eb('friend_id', '=', caller), eb('status', '!=', 'blocked')]);
      return q.direction === 'outgoing' ? outgoing : q.direction === 'incoming' ? incoming : eb.or([outgoing, incoming]);
    });
  if (q.status !== undefined) query = query.where('status', '=', q.status as FriendshipsTable['status']);
  const rows = await newestFirst(query, q).execute();
  return rows.map((row) => {
    const outgoing = row.player_id === caller;
    const other = outgoing ? row.friend_id : row.player_id;
    const presence = row.status === 'accepted' ? presenceOf(other) : null;
    return { ...view(row), direction: outgoing ? 'outgoing' : 'incoming', online: presence !== null, presence };
  });
}

/** Accepted friends of a player, either direction (presence pushes). */
export async function acceptedFriendIds(db: Db, playerId: string): Promise<string[]> {
  return (await acceptedFriendsOf(db, [playerId])).get(playerId) ?? [];
}

/** Accepted friends of each of several players, either direction, in one read. */
export async function acceptedFriendsOf(db: Db, playerIds: readonly string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>(playerIds.map((id) => [id, []]));
  if (playerIds.length === 0) return out;
  const rows = await db
    .selectFrom('friendships')
    .select(['player_id', 'friend_id'])
    .where('status', '=', 'accepted')
    .where((eb) => eb.or([eb('player_id', 'in', playerIds), eb('friend_id', 'in', playerIds)]))
    .execute();
  for (const r of rows) {
    out.get(r.player_id)?.push(r.friend_id);
    out.get(r.friend_id)?.push(r.player_id);
  }
  return out;
}
