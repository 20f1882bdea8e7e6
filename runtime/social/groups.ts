import type { Selectable, Transaction } from 'kysely';
import { sql } from 'kysely';
import type { Ctx } from '../contracts/context';
import { isoSeconds, isUniqueViolation, jsonb, type Db } from '../platform/database';
import { registerErasable } from '../changes/erasure';
import { ApiError, validationFailed } from '../contracts/errors';
import { createNotification, deliverNotification, type NotificationView } from './notifications';
import { blockPartnersQuery, eitherBlocked } from './blocks';
import { newestFirst, type Page } from '../platform/pages';
import type { Database, GroupMembersTable, GroupRequestsTable, GroupsTable } from '../contracts/tables';
import { afterCommit } from '../changes/effects';
import type { GroupCreate, GroupMemberView, GroupRequestView, GroupRole, GroupSearch, GroupUpdate, GroupView, JoinOutcome } from '../schemas/social';

/**
 * Groups (where we depart from the first build, see
 * docs/decisions/0019-groups-and-friends-as-the-clients-expect.md).
 *
 * Roles rank owner (100) > admin (75) > moderator (50) > member (0). An actor
 * changes the role of, or kicks, only members ranked strictly below itself,
 * and never to a role at or above its own; ownership moves only by an explicit
 * transfer (the owner sets someone's role to `owner` and becomes admin). The
 * last owner cannot leave without handing over. Open groups admit a join at
 * once; a join to a closed group files a request that an admin accepts, and an
 * admin's invitation lets the invited player join a closed group directly.
 * The group's chat channel is `room:<group_id>`.
 *
 * A group id given as null is one the client sent that could name no group;
 * each operation answers it as it answers any group that does not exist.
 */

registerErasable(
  { table: 'group_members', column: 'player_id', mode: 'delete' },
  { table: 'group_requests', column: 'player_id', mode: 'delete' },
  { table: 'group_requests', column: 'invited_by', mode: 'nullify' },
  { table: 'groups', column: 'creator_id', mode: 'nullify' },
);

export const ROLE_RANK: Readonly<Record<GroupRole, number>> = { owner: 100, admin: 75, moderator: 50, member: 0 };

type Conn = Db | Transaction<Database>;

// Timestamps below are NOT NULL columns.
function groupView(row: Selectable<GroupsTable>): GroupView {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    max_members: row.max_members,
    open: row.open,
    creator_id: row.creator_id,
    metadata: row.metadata ?? {},
    inserted_at: isoSeconds(row.inserted_at)!,
    updated_at: isoSeconds(row.updated_at)!,
  };
}

function memberView(row: Selectable<GroupMembersTable>): GroupMemberView {
  return { id: row.id, group_id: row.group_id, player_id: row.player_id, role: row.role, joined_at: isoSeconds(row.joined_at)! };
}

function requestView(row: Selectable<GroupRequestsTable>): GroupRequestView {
  return {
    id: row.id,
    group_id: row.group_id,
    player_id: row.player_id,
    kind: row.kind,
    invited_by: row.invited_by,
    inserted_at: isoSeconds(row.inserted_at)!,
  };
}

const groupNotFound = () => new ApiError('social.group_not_found', 'No such group.');
const memberNotFound = () => new ApiError('social.member_not_found', 'That player is not a member of the group.');

/** `POST /groups`: the creator becomes the owner in the same transaction. */
export async function createGroup(ctx: Ctx, caller: string, fields: GroupCreate): Promise<GroupView> {
  const now = new Date(ctx.clock.now());
  return ctx.db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('groups')
      .values({
        id: ctx.ids.uuid(),
        name: fields.name,
        description: fields.description,
        max_members: fields.max_members,
        open: fields.open,
        creator_id: caller,
        metadata: jsonb({}),
        inserted_at: now,
        updated_at: now,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await trx.insertInto('group_members').values({ id: ctx.ids.uuid(), group_id: row.id, player_id: caller, role: 'owner', joined_at: now }).execute();
    return groupView(row);
  });
}

/**
 * `GET /groups?q=`: groups whose name contains `q`, newest first. Our
 * addition (docs/decisions/0015) so a player finds a group by name.
 */
export async function searchGroups(db: Db, search: GroupSearch): Promise<GroupView[]> {
  let query = db.selectFrom('groups').selectAll();
  if (search.q !== undefined && search.q !== '') {
    // The text is matched literally: % and _ are not wildcards here.
    const literal = search.q.replace(/[\\%_]/g, (c) => `\\${c}`);
    query = query.where('name', 'ilike', `%${literal}%`);
  }
  if (search.open !== null) query = query.where('open', '=', search.open);
  const rows = await newestFirst(query, search).execute();
  return rows.map(groupView);
}

export async function getGroup(db: Conn, id: string): Promise<GroupView> {
  const row = await db.selectFrom('groups').selectAll().where('id', '=', id).executeTakeFirst();
  if (!row) throw groupNotFound();
  return groupView(row);
}

async function memberRow(db: Conn, groupId: string, playerId: string, lock = false) {
  let q = db.selectFrom('group_members').selectAll().where('group_id', '=', groupId).where('player_id', '=', playerId);
  if (lock) q = q.forUpdate();
  return q.executeTakeFirst();
}

export async function isGroupMember(db: Conn, groupId: string, playerId: string): Promise<boolean> {
  return (await memberRow(db, groupId, playerId)) !== undefined;
}

/** Locks the group row so membership counts and role changes serialise per group. */
async function lockGroup(trx: Transaction<Database>, id: string) {
  const row = await trx.selectFrom('groups').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
  if (!row) throw groupNotFound();
  return row;
}

async function memberCount(trx: Transaction<Database>, groupId: string): Promise<number> {
  const r = await trx
    .selectFrom('group_members')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('group_id', '=', groupId)
    .executeTakeFirstOrThrow();
  return r.n;
}

/** An acting member of at least `minRank`; a non-member (or an unknown group) is `forbidden`. */
async function requireActor(trx: Transaction<Database>, groupId: string | null, caller: string, minRank: number) {
  const actor = groupId === null ? undefined : await memberRow(trx, groupId, caller);
  if (!actor || ROLE_RANK[actor.role] < minRank) throw new ApiError('forbidden', 'Your role in this group does not allow that.');
  return actor;
}

/** `PUT /groups/:id`: admins and the owner. */
export async function updateGroup(ctx: Ctx, caller: string, groupId: string | null, fields: GroupUpdate): Promise<GroupView> {
  return ctx.db.transaction().execute(async (trx) => {
    const id = (await requireActor(trx, groupId, caller, ROLE_RANK.admin)).group_id;
    await lockGroup(trx, id);
    // Under the group lock, so no join can slip in between the count and the update.
    if (fields.max_members !== undefined) {
      const members = await memberCount(trx, id);
      if (fields.max_members < members) {
        throw validationFailed('errors', { max_members: [`must be at least the current member count (${members})`] });
      }
    }
    const row = await trx
      .updateTable('groups')
      .set({ ...fields, updated_at: new Date(ctx.clock.now()) })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return groupView(row);
  });
}

/**
 * `POST /groups/:id/join`. An open group, or a closed one whose admins
 * invited the caller: member at once. Any other closed group refuses with
 * `social.group_closed`; asking to join is `requestToJoin`.
 */
export async function joinGroup(ctx: Ctx, caller: string, id: string): Promise<JoinOutcome> {
  const now = new Date(ctx.clock.now());
  try {
    return await ctx.db.transaction().execute(async (trx) => {
      const group = await lockGroup(trx, id);
      if (await memberRow(trx, id, caller)) throw new ApiError('social.already_member', 'You are already a member.');
      const pending = await trx.selectFrom('group_requests').selectAll().where('group_id', '=', id).where('player_id', '=', caller).executeTakeFirst();
      if (!group.open && pending?.kind !== 'invite') throw new ApiError('social.group_closed', 'This group is closed; ask to join instead.');
      if ((await memberCount(trx, id)) >= group.max_members) throw new ApiError('social.group_full', 'The group is full.');
      if (pending) await trx.deleteFrom('group_requests').where('id', '=', pending.id).execute();
      await trx.insertInto('group_members').values({ id: ctx.ids.uuid(), group_id: id, player_id: caller, role: 'member', joined_at: now }).execute();
      return { success: true as const, group_id: id, status: 'joined' as const };
    });
  } catch (err) {
    // Two concurrent joins of one player: the second sees the first's row.
    if (isUniqueViolation(err)) throw new ApiError('social.already_member', 'You are already a member.');
    throw err;
  }
}

/**
 * `POST /groups/:id/requests`: asks to join a closed group, notifying its
 * admins and owner; repeating it is harmless. An open group, or a waiting
 * invitation, joins at once instead, as `join` would.
 */
export async function requestToJoin(ctx: Ctx, caller: string, id: string): Promise<JoinOutcome> {
  const now = new Date(ctx.clock.now());
  const notes: NotificationView[] = [];
  let outcome: JoinOutcome | null;
  try {
    outcome = await ctx.db.transaction().execute(async (trx) => {
      const group = await lockGroup(trx, id);
      if (await memberRow(trx, id, caller)) throw new ApiError('social.already_member', 'You are already a member.');
      const pending = await trx.selectFrom('group_requests').selectAll().where('group_id', '=', id).where('player_id', '=', caller).executeTakeFirst();
      if (group.open || pending?.kind === 'invite') return null;
      if (pending) return { success: true as const, group_id: id, status: 'requested' as const };
      const request = await trx
        .insertInto('group_requests')
        .values({ id: ctx.ids.uuid(), group_id: id, player_id: caller, kind: 'request', invited_by: null, inserted_at: now })
        .returningAll()
        .executeTakeFirstOrThrow();
      // A manager in a block with the requester is not told; the others decide, and the request is listed for all.
      const managers = await trx
        .selectFrom('group_members')
        .select('player_id')
        .where('group_id', '=', id)
        .where('role', 'in', ['owner', 'admin'])
        .where('player_id', 'not in', blockPartnersQuery(trx, caller))
        .execute();
      for (const m of managers) {
        notes.push(
          await createNotification(trx, ctx, {
            playerId: m.player_id,
            type: 'group_join_request',
            subject: `Join request for ${group.name}`,
            content: { group_id: id, player_id: caller, request_id: request.id },
          }),
        );
      }
      return { success: true as const, group_id: id, status: 'requested' as const };
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new ApiError('social.already_member', 'You are already a member or have a request waiting.');
    throw err;
  }
  if (outcome === null) return joinGroup(ctx, caller, id);
  for (const n of notes) deliverNotification(ctx, n);
  return outcome;
}

/**
 * `POST /groups/:id/leave`: always succeeds, even for a non-member or an
 * unknown group. An owner may leave too, as the established clients expect:
 * there is no automatic transfer, and the group stays (its admins still run
 * it; with none left it keeps its members and its chat room).
 */
/** The group's chat channel. */
function groupRoom(groupId: string): string {
  return `room:${groupId}`;
}

export async function leaveGroup(ctx: Ctx, caller: string, id: string | null): Promise<void> {
  if (id === null) return;
  const left = await ctx.db.transaction().execute(async (trx) => {
    const group = await trx.selectFrom('groups').select('id').where('id', '=', id).forUpdate().executeTakeFirst();
    if (!group) return false;
    const me = await memberRow(trx, id, caller);
    if (!me) {
      // Withdraws a pending request or declines an invitation.
      await trx.deleteFrom('group_requests').where('group_id', '=', id).where('player_id', '=', caller).execute();
      return false;
    }
    await trx.deleteFrom('group_members').where('id', '=', me.id).execute();
    return true;
  });
  if (left) await afterCommit(ctx, { kind: 'membership_ended', playerId: caller, channelId: groupRoom(id) });
}

/** `GET /groups/:id/members`: open to any player; an unknown group lists nobody. Newest members first. */
export async function listMembers(db: Db, id: string | null, page: Page): Promise<GroupMemberView[]> {
  if (id === null) return [];
  const rows = await newestFirst(db.selectFrom('group_members').selectAll().where('group_id', '=', id), page).execute();
  return rows.map(memberView);
}

/** Locks the group, then both memberships; an unknown group or either membership missing is `social.member_not_found`. */
async function actorAndSubject(trx: Transaction<Database>, id: string, caller: string, target: string) {
  // An unknown group has no members: the answer is the same as for a stranger.
  const group = await trx.selectFrom('groups').select('id').where('id', '=', id).forUpdate().executeTakeFirst();
  if (!group) throw memberNotFound();
  const actor = await memberRow(trx, id, caller);
  if (!actor) throw memberNotFound();
  const subject = await memberRow(trx, id, target);
  if (!subject) throw memberNotFound();
  return { actor, subject };
}

/** `PUT /groups/:id/members/:player_id/role`: returns the updated member. */
export async function changeRole(ctx: Ctx, caller: string, id: string, target: string, role: GroupRole): Promise<GroupMemberView> {
  return ctx.db.transaction().execute(async (trx) => {
    const { actor, subject } = await actorAndSubject(trx, id, caller, target);
    const actorRank = ROLE_RANK[actor.role];

    if (role === 'owner') {
      // Transfer: only an owner hands over, to someone else, and steps down to admin.
      if (actor.role !== 'owner' || subject.id === actor.id) throw new ApiError('forbidden', 'Only the owner can transfer ownership, to another member.');
      await trx.updateTable('group_members').set({ role: 'admin' }).where('id', '=', actor.id).execute();
    } else {
      if (actorRank < ROLE_RANK.admin) throw new ApiError('forbidden', 'Only admins and the owner change roles.');
      if (ROLE_RANK[subject.role] >= actorRank) throw new ApiError('forbidden', 'You can only change the role of members ranked below you.');
      if (ROLE_RANK[role] >= actorRank) throw new ApiError('forbidden', 'You can only grant roles ranked below your own.');
    }
    const row = await trx.updateTable('group_members').set({ role }).where('id', '=', subject.id).returningAll().executeTakeFirstOrThrow();
    return memberView(row);
  });
}

/** `DELETE /groups/:id/members/:player_id`: moderators and up, only downward. */
export async function kickMember(ctx: Ctx, caller: string, id: string, target: string): Promise<void> {
  await ctx.db.transaction().execute(async (trx) => {
    const { actor, subject } = await actorAndSubject(trx, id, caller, target);
    const actorRank = ROLE_RANK[actor.role];
    if (actorRank < ROLE_RANK.moderator || ROLE_RANK[subject.role] >= actorRank) {
      throw new ApiError('forbidden', 'You can only remove members ranked below you.');
    }
    await trx.deleteFrom('group_members').where('id', '=', subject.id).execute();
  });
  await afterCommit(ctx, { kind: 'membership_ended', playerId: target, channelId: groupRoom(id) });
}

/** `POST /groups/:id/invites` (admins and the owner): the invited player may then join a closed group. */
export async function invitePlayer(ctx: Ctx, caller: string, groupId: string | null, invited: string | null): Promise<GroupRequestView> {
  const now = new Date(ctx.clock.now());
  let note: NotificationView | null = null;
  let result: GroupRequestView;
  try {
    result = await ctx.db.transaction().execute(async (trx) => {
      const id = (await requireActor(trx, groupId, caller, ROLE_RANK.admin)).group_id;
      const group = await lockGroup(trx, id);
      const player = invited === null ? undefined : await trx.selectFrom('players').select('id').where('id', '=', invited).executeTakeFirst();
      if (!player) throw new ApiError('player.not_found', 'No such player.');
      const playerId = player.id;
      // The invitation shows the group's name, which its officers chose: their words, kept from a blocked pair like any message.
      if (await eitherBlocked(trx, caller, playerId)) throw new ApiError('forbidden', 'Invitations between you and this player are blocked.', { reason: 'blocked' });
      if (await memberRow(trx, id, playerId)) throw new ApiError('social.already_member', 'That player is already a member.');
      const existing = await trx.selectFrom('group_requests').selectAll().where('group_id', '=', id).where('player_id', '=', playerId).executeTakeFirst();
      let row: Selectable<GroupRequestsTable>;
      if (existing?.kind === 'invite') return requestView(existing);
      if (existing) {
        // The player already asked: the invitation is the answer.
        row = await trx
          .updateTable('group_requests')
          .set({ kind: 'invite', invited_by: caller })
          .where('id', '=', existing.id)
          .returningAll()
          .executeTakeFirstOrThrow();
      } else {
        row = await trx
          .insertInto('group_requests')
          .values({ id: ctx.ids.uuid(), group_id: id, player_id: playerId, kind: 'invite', invited_by: caller, inserted_at: now })
          .returningAll()
          .executeTakeFirstOrThrow();
      }
      note = await createNotification(trx, ctx, {
        playerId,
        type: 'group_invite',
        subject: `Invitation to ${group.name}`,
        content: { group_id: id, invited_by: caller, request_id: row.id },
      });
      return requestView(row);
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new ApiError('social.already_member', 'That player already has a request or invitation waiting.');
    throw err;
  }
  if (note) deliverNotification(ctx, note);
  return result;
}

/** `GET /groups/:id/requests` (admins and the owner): pending join requests and invitations, newest first. */
export async function listRequests(ctx: Ctx, caller: string, groupId: string | null, page: Page): Promise<GroupRequestView[]> {
  return ctx.db.transaction().execute(async (trx) => {
    const id = (await requireActor(trx, groupId, caller, ROLE_RANK.admin)).group_id;
    const rows = await newestFirst(trx.selectFrom('group_requests').selectAll().where('group_id', '=', id), page).execute();
    return rows.map(requestView);
  });
}

/** `POST /groups/:id/requests/:player_id/accept` (admins and the owner); a null player has no request. */
export async function acceptRequest(ctx: Ctx, caller: string, groupId: string | null, playerId: string | null): Promise<GroupMemberView> {
  const now = new Date(ctx.clock.now());
  let note: NotificationView | null = null;
  const member = await ctx.db.transaction().execute(async (trx) => {
    const id = (await requireActor(trx, groupId, caller, ROLE_RANK.admin)).group_id;
    const group = await lockGroup(trx, id);
    const request = playerId !== null
      ? await trx.selectFrom('group_requests').selectAll().where('group_id', '=', id).where('player_id', '=', playerId).where('kind', '=', 'request').executeTakeFirst()
      : undefined;
    if (!request) throw new ApiError('social.member_not_found', 'That player has no join request waiting.', { reason: 'no_request' });
    if ((await memberCount(trx, id)) >= group.max_members) throw new ApiError('social.group_full', 'The group is full.');
    await trx.deleteFrom('group_requests').where('id', '=', request.id).execute();
    const row = await trx
      .insertInto('group_members')
      .values({ id: ctx.ids.uuid(), group_id: id, player_id: request.player_id, role: 'member', joined_at: now })
      .returningAll()
      .executeTakeFirstOrThrow();
    note = await createNotification(trx, ctx, {
      playerId: request.player_id,
      type: 'group_join_accepted',
      subject: `You joined ${group.name}`,
      content: { group_id: id, accepted_by: caller },
    });
    return memberView(row);
  });
  if (note) deliverNotification(ctx, note);
  return member;
}

/** `DELETE /groups/:id/requests/:player_id`: an admin rejects a request or withdraws an invitation. */
export async function dropRequest(ctx: Ctx, caller: string, groupId: string | null, playerId: string | null): Promise<void> {
  await ctx.db.transaction().execute(async (trx) => {
    const id = (await requireActor(trx, groupId, caller, ROLE_RANK.admin)).group_id;
    const gone = playerId !== null
      ? await trx.deleteFrom('group_requests').where('group_id', '=', id).where('player_id', '=', playerId).executeTakeFirst()
      : { numDeletedRows: 0n };
    if (Number(gone.numDeletedRows) === 0) throw new ApiError('social.member_not_found', 'No request or invitation for that player.', { reason: 'no_request' });
  });
}
