import { z } from 'zod';
import { charLength } from '../platform/text';
import { isUuid } from '../platform/ids';
import { coded } from './rules';
import { BooleanFilter, idOf, IsoTime, JsonObject, pageQuery, Text, Uuid } from './common';
import { PresenceState } from './presence';

/**
 * Friends and groups over REST. Ids come in two kinds: a lookup (`idOf`)
 * whose miss is a plain not-found, and a `MaybeId` whose miss the service
 * answers, because the answer depends on who asks (a non-admin is refused
 * before anything is looked up), on the request (leaving a group that does
 * not exist succeeds), or on checks that come first (befriending yourself).
 * A `MaybeId` in a body is still required: absent, or not a string, it is
 * `missing_field` like any other required field.
 */

/** An id that is not a UUID names nothing: it reads as null, and the service answers as for a miss. */
const MaybeId = z
  .string()
  .transform((s) => s.toLowerCase())
  .transform((s) => (isUuid(s) ? s : null))
  .meta({ format: 'uuid' });

// ---- friends

export const Friendship = z.object({
  id: Uuid,
  /** The requester, or on a `blocked` row the blocker. */
  player_id: Uuid,
  friend_id: Uuid,
  /** `rejected` only in the answer to a rejection (the row is gone). */
  status: z.enum(['pending', 'accepted', 'blocked', 'rejected']),
  inserted_at: IsoTime,
  updated_at: IsoTime,
});
export type FriendshipView = z.output<typeof Friendship>;

export const FriendListing = Friendship.extend({
  direction: z.enum(['outgoing', 'incoming']),
  /** Accepted friends only; every other row reads offline. */
  online: z.boolean(),
  presence: PresenceState.nullable(),
});
export type FriendListing = z.output<typeof FriendListing>;

export const FriendList = z.object({ friends: z.array(FriendListing) });

/** Like every filter, an unrecognised `direction` means the default, the rows the caller started. */
export const FriendQuery = pageQuery().extend({
  status: Text.optional().meta({ description: 'pending, accepted or blocked; another value lists nothing' }),
  direction: Text.optional()
    .transform((d) => (d === 'incoming' || d === 'all' ? d : 'outgoing'))
    .meta({ description: '`outgoing` (default), `incoming` or `all`' }),
});
export type FriendQuery = z.output<typeof FriendQuery>;

export const FriendRequest = z.object({ friend_id: MaybeId });
export type FriendRequest = z.output<typeof FriendRequest>;

/** `pending` leaves a pending request as it is. */
export const FriendAnswer = z.object({
  status: z.string().pipe(z.enum(['accepted', 'rejected', 'blocked', 'pending'], { error: 'must be one of accepted, rejected, blocked, pending' })),
});
export type FriendAnswer = z.output<typeof FriendAnswer>;

/** Answering: which miss an unknown player is depends on the answer (blocking a stranger is allowed). */
export const FriendAnswerPath = z.object({ friend_id: MaybeId });
export const FriendPath = z.object({ friend_id: idOf('social.friendship_not_found', 'relation') });

// ---- groups

export const GroupRole = z.enum(['owner', 'admin', 'moderator', 'member']);
export type GroupRole = z.output<typeof GroupRole>;

export const Group = z.object({
  id: Uuid,
  name: z.string(),
  description: z.string().nullable(),
  max_members: z.number().int(),
  open: z.boolean(),
  /** Null once the creator erased their account. */
  creator_id: Uuid.nullable(),
  metadata: JsonObject,
  inserted_at: IsoTime,
  updated_at: IsoTime,
});
export type GroupView = z.output<typeof Group>;

export const GroupMember = z.object({ id: Uuid, group_id: Uuid, player_id: Uuid, role: GroupRole, joined_at: IsoTime });
export type GroupMemberView = z.output<typeof GroupMember>;

export const GroupRequest = z.object({
  id: Uuid,
  group_id: Uuid,
  player_id: Uuid,
  /** `request`: the player asked to join; `invite`: an admin invited the player. */
  kind: z.enum(['request', 'invite']),
  invited_by: Uuid.nullable(),
  inserted_at: IsoTime,
});
export type GroupRequestView = z.output<typeof GroupRequest>;

export const JoinOutcome = z.object({ success: z.literal(true), group_id: Uuid, status: z.enum(['joined', 'requested']) });
export type JoinOutcome = z.output<typeof JoinOutcome>;

export const GroupList = z.object({ groups: z.array(Group) });
export const MemberList = z.object({ members: z.array(GroupMember) });
export const RequestList = z.object({ requests: z.array(GroupRequest) });

const NAME = 'must be a string of 2-64 characters';
const DESCRIPTION = 'must be a string of at most 1024 characters or null';
const MAX_MEMBERS = 'must be an integer from 1 to 100000';

const GroupName = z.string().refine((n) => charLength(n.trim()) >= 2 && charLength(n) <= 64, NAME);
const Description = z.string().refine((d) => charLength(d) <= 1024, DESCRIPTION).nullable();
const MaxMembers = z.number({ error: MAX_MEMBERS }).int(MAX_MEMBERS).min(1, MAX_MEMBERS).max(100_000, MAX_MEMBERS);
const Open = z.boolean({ error: 'must be a boolean' });

/** `POST /groups`; a group's metadata is not the client's to set. */
export const GroupCreate = z.object({
  name: GroupName,
  description: Description.default(null),
  max_members: MaxMembers.default(50),
  open: Open.default(false),
});
export type GroupCreate = z.output<typeof GroupCreate>;

/** `PUT /groups/:id`: only the keys sent change. */
export const GroupUpdate = z.object({
  name: GroupName.optional(),
  description: Description.optional(),
  max_members: MaxMembers.optional(),
  open: Open.optional(),
});
export type GroupUpdate = z.output<typeof GroupUpdate>;

/** A group name is at most 64 characters, so a longer search can match nothing. */
export const GroupSearch = pageQuery().extend({
  q: Text.refine((q) => charLength(q) <= 64, 'must be at most 64 characters')
    .optional()
    .meta({ description: 'part of the name, any case, matched literally' }),
  open: BooleanFilter,
});
export type GroupSearch = z.output<typeof GroupSearch>;

export const RoleChange = z.object({
  role: z.string().transform((role, ctx) => {
    const known = GroupRole.safeParse(role);
    if (known.success) return known.data;
    ctx.addIssue({ code: 'custom', input: role, ...coded('social.invalid_role', 'role must be owner, admin, moderator or member.', { role }) });
    return z.NEVER;
  }).meta({ description: '`owner` (hands ownership over), `admin`, `moderator` or `member`' }),
});

/** Only an admin learns whether the invited player exists. */
export const Invite = z.object({ player_id: MaybeId });
export type Invite = z.output<typeof Invite>;

/** Routes anyone signed in may call: an unknown group is a plain not-found. */
export const GroupPath = z.object({ id: idOf('social.group_not_found', 'group') });
/** Routes of admins, and leave and member lists, which answer an unknown group their own way. */
export const ManagedGroupPath = z.object({ id: MaybeId });
/** A member of a group: an unknown group, or either player not in it, is `social.member_not_found`. */
export const MemberPath = z.object({ id: idOf('social.member_not_found', 'member'), player_id: idOf('social.member_not_found', 'member') });
/** A pending request or invitation: the admin check comes first, then the missing request. */
export const GroupRequestPath = z.object({ id: MaybeId, player_id: MaybeId });
