import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, registerPlayer, type TestPlayer } from './support/accounts';
import { startTestServer, type TestServer } from './support/server';
import { TestSocket } from './support/ws-client';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ rate_limits: { ws_connect: { limit: 1000, window: 1000 } } });
});
afterAll(async () => {
  await s.close();
});

const create = (p: TestPlayer, body: unknown) => s.call('POST', '/api/v1/groups', { token: p.access_token, body });
const join = (p: TestPlayer, id: string) => s.call('POST', `/api/v1/groups/${id}/join`, { token: p.access_token });
const askToJoin = (p: TestPlayer, id: string) => s.call('POST', `/api/v1/groups/${id}/requests`, { token: p.access_token });
const leave = (p: TestPlayer, id: string) => s.call('POST', `/api/v1/groups/${id}/leave`, { token: p.access_token });
const members = (p: TestPlayer, id: string, q = '') => s.call('GET', `/api/v1/groups/${id}/members${q}`, { token: p.access_token });
const setRole = (p: TestPlayer, id: string, target: string, role: unknown) =>
  s.call('PUT', `/api/v1/groups/${id}/members/${target}/role`, { token: p.access_token, body: role === undefined ? {} : { role } });
const kick = (p: TestPlayer, id: string, target: string) => s.call('DELETE', `/api/v1/groups/${id}/members/${target}`, { token: p.access_token });
const roleOf = async (id: string, p: TestPlayer) => (await members(p, id)).body.members.find((m: any) => m.player_id === p.player_id)?.role;

/** A group with one player in each role. */
async function staffed(): Promise<{ id: string; owner: TestPlayer; admin: TestPlayer; moderator: TestPlayer; member: TestPlayer; outsider: TestPlayer }> {
  const [owner, admin, moderator, member, outsider] = await Promise.all([1, 2, 3, 4, 5].map(() => registerPlayer(s)));
  const g = await create(owner!, { name: 'Staffed', open: true });
  const id = g.body.id;
  for (const p of [admin!, moderator!, member!]) expect((await join(p, id)).status).toBe(200);
  expect((await setRole(owner!, id, admin!.player_id, 'admin')).status).toBe(200);
  expect((await setRole(owner!, id, moderator!.player_id, 'moderator')).status).toBe(200);
  return { id, owner: owner!, admin: admin!, moderator: moderator!, member: member!, outsider: outsider! };
}

describe('create, get, update', () => {
  it('creates a group whose creator is its owner', async () => {
    const p = await registerPlayer(s);
    const res = await create(p, { name: 'Raiders', description: 'we raid', max_members: 10, open: true, metadata: { x: 1 } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ name: 'Raiders', description: 'we raid', max_members: 10, open: true, creator_id: p.player_id, metadata: {} });
    expect((await members(p, res.body.id)).body.members).toMatchObject([{ player_id: p.player_id, role: 'owner', group_id: res.body.id }]);
    const got = await s.call('GET', `/api/v1/groups/${res.body.id}`, { token: (await registerPlayer(s)).access_token });
    expect(got.body).toEqual(res.body);
  });

  it('validates the fields', async () => {
    const p = await registerPlayer(s);
    expectError(await create(p, {}), 400, 'missing_field');
    const short = await create(p, { name: 'x' });
    expectError(short, 422, 'validation_failed');
    expect(short.body.errors.name).toBeDefined();
    expectError(await create(p, { name: 'ok name', open: 'yes' }), 422, 'validation_failed');
    expectError(await create(p, { name: 'ok name', max_members: 0 }), 422, 'validation_failed');
    expectError(await s.call('GET', '/api/v1/groups/nope', { token: p.access_token }), 404, 'social.group_not_found');
    expectError(await s.call('GET', '/api/v1/groups/0190c1f2-aaaa-7000-8000-000000000001', { token: p.access_token }), 404, 'social.group_not_found');
  });

  it('lets admins and the owner update; others get 403', async () => {
    const g = await staffed();
    const put = (p: TestPlayer, body: unknown) => s.call('PUT', `/api/v1/groups/${g.id}`, { token: p.access_token, body });
    expect((await put(g.owner, { name: 'Renamed' })).body.name).toBe('Renamed');
    expect((await put(g.admin, { description: null, open: false })).body).toMatchObject({ name: 'Renamed', description: null, open: false });
    expectError(await put(g.moderator, { name: 'Nope' }), 403, 'forbidden');
    expectError(await put(g.member, { name: 'Nope' }), 403, 'forbidden');
    expectError(await put(g.outsider, { name: 'Nope' }), 403, 'forbidden');
    expectError(await put(g.owner, { name: 'N' }), 422, 'validation_failed');
  });
});

describe('max_members', () => {
  it('cannot be set below the current member count, and the group stays as it was', async () => {
    const [owner, a, b] = [await registerPlayer(s), await registerPlayer(s), await registerPlayer(s)];
    const id = (await create(owner, { name: 'Trio', open: true, max_members: 5 })).body.id;
    for (const p of [a, b]) expect((await join(p, id)).status).toBe(200);
    const put = (max: number) => s.call('PUT', `/api/v1/groups/${id}`, { token: owner.access_token, body: { max_members: max, name: 'Renamed' } });
    const refused = await put(2);
    expectError(refused, 422, 'validation_failed');
    expect(refused.body.errors.max_members).toHaveLength(1);
    expect(refused.body.error.details.errors.max_members).toEqual(refused.body.errors.max_members);
    expect((await s.call('GET', `/api/v1/groups/${id}`, { token: owner.access_token })).body).toMatchObject({ name: 'Trio', max_members: 5 });
    // Exactly the current size is allowed: the group is then full.
    expect((await put(3)).body).toMatchObject({ name: 'Renamed', max_members: 3 });
    expectError(await join(await registerPlayer(s), id), 409, 'social.group_full');
  });
});

describe('search', () => {
  it('finds groups by part of the name in any case, newest first, with the open filter and paging', async () => {
    const p = await registerPlayer(s);
    const tag = `Zq${Date.now().toString(36)}`;
    const older = (await create(p, { name: `${tag} Wolves`, open: true })).body;
    const newer = (await create(p, { name: `The ${tag.toUpperCase()} Pack` })).body;
    await create(p, { name: `${tag.slice(0, 3)}_other 100%` });
    const search = (q: string) => s.call('GET', `/api/v1/groups?${q}`, { token: p.access_token });
    const found = await search(`q=${tag.toLowerCase()}`);
    expect(found.status).toBe(200);
    expect(found.body.groups.map((g: any) => g.id)).toEqual([newer.id, older.id]);
    expect(found.body.groups[0]).toEqual(newer);
    expect((await search(`q=${tag}&open=true`)).body.groups.map((g: any) => g.id)).toEqual([older.id]);
    expect((await search(`q=${tag}&open=false`)).body.groups.map((g: any) => g.id)).toEqual([newer.id]);
    expect((await search(`q=${tag}&limit=1`)).body.groups.map((g: any) => g.id)).toEqual([newer.id]);
    expect((await search(`q=${tag}&before=${newer.id}`)).body.groups.map((g: any) => g.id)).toEqual([older.id]);
    // Wildcards are literal text.
    expect((await search('q=%25')).body.groups.every((g: any) => g.name.includes('%'))).toBe(true);
    expect((await search(`q=${tag.slice(0, 2)}_`)).body.groups.every((g: any) => g.name.includes('_'))).toBe(true);
    expect((await search('q=nothing-is-called-this')).body).toEqual({ groups: [] });
    expectError(await search(`q=${'x'.repeat(65)}`), 422, 'validation_failed');
    expectError(await s.call('GET', '/api/v1/groups?q=a'), 401, 'unauthenticated');
  });
});

describe('member lists', () => {
  it('are readable without membership, closed groups included, while room chat history is not', async () => {
    const [owner, outsider] = [await registerPlayer(s), await registerPlayer(s)];
    const id = (await create(owner, { name: 'Closed doors' })).body.id;
    expect((await s.call('GET', `/api/v1/groups/${id}`, { token: owner.access_token })).body.open).toBe(false);
    const listed = await members(outsider, id);
    expect(listed.status).toBe(200);
    expect(listed.body.members).toMatchObject([{ player_id: owner.player_id, role: 'owner' }]);
    const history = await s.call('GET', `/api/v1/chat/${encodeURIComponent(`room:${id}`)}/history`, { token: outsider.access_token });
    expect(history.status).toBe(403);
  });
});

describe('joining and leaving', () => {
  it('joins an open group at once, refuses a second join and a full group', async () => {
    const [owner, a, b] = [await registerPlayer(s), await registerPlayer(s), await registerPlayer(s)];
    const id = (await create(owner, { name: 'Tiny', open: true, max_members: 2 })).body.id;
    const res = await join(a, id);
    expect(res.body).toEqual({ success: true, group_id: id, status: 'joined' });
    expectError(await join(a, id), 409, 'social.already_member');
    expectError(await join(b, id), 409, 'social.group_full');
    expectError(await join(b, '0190c1f2-aaaa-7000-8000-000000000001'), 404, 'social.group_not_found');
  });

  it('refuses a join of a closed group, files a join request that an admin accepts, with notifications both ways', async () => {
    const [owner, a, stranger] = [await registerPlayer(s), await registerPlayer(s), await registerPlayer(s)];
    const id = (await create(owner, { name: 'Closed club' })).body.id;
    const ownerSock = await TestSocket.open(s);
    await ownerSock.request('session.connect', { token: owner.access_token });
    expectError(await join(a, id), 403, 'social.group_closed');
    expect((await askToJoin(a, id)).body).toEqual({ success: true, group_id: id, status: 'requested' });
    const note = await ownerSock.next('notification.new');
    expect(note.payload).toMatchObject({ type: 'group_join_request', content: { group_id: id, player_id: a.player_id } });
    expect((await askToJoin(a, id)).body.status).toBe('requested');
    expectError(await join(a, id), 403, 'social.group_closed');
    expect(await roleOf(id, a)).toBeUndefined();

    const requests = await s.call('GET', `/api/v1/groups/${id}/requests`, { token: owner.access_token });
    expect(requests.body.requests).toMatchObject([{ player_id: a.player_id, kind: 'request' }]);
    expectError(await s.call('GET', `/api/v1/groups/${id}/requests`, { token: a.access_token }), 403, 'forbidden');
    expectError(await s.call('POST', `/api/v1/groups/${id}/requests/${a.player_id}/accept`, { token: a.access_token }), 403, 'forbidden');
    const none = await s.call('POST', `/api/v1/groups/${id}/requests/${stranger.player_id}/accept`, { token: owner.access_token });
    expectError(none, 404, 'social.member_not_found');
    expect(none.body.error.details.reason).toBe('no_request');

    const accepted = await s.call('POST', `/api/v1/groups/${id}/requests/${a.player_id}/accept`, { token: owner.access_token });
    expect(accepted.body).toMatchObject({ group_id: id, player_id: a.player_id, role: 'member' });
    expect(await roleOf(id, a)).toBe('member');
    const mine = await s.call('GET', '/api/v1/notifications', { token: a.access_token });
    expect(mine.body.notifications[0]).toMatchObject({ type: 'group_join_accepted', content: { group_id: id } });
    ownerSock.close();
  });

  it('lets an invited player join a closed group directly; an admin can reject a request', async () => {
    const [owner, invited, asker] = [await registerPlayer(s), await registerPlayer(s), await registerPlayer(s)];
    const id = (await create(owner, { name: 'Invite only' })).body.id;
    const inv = await s.call('POST', `/api/v1/groups/${id}/invites`, { token: owner.access_token, body: { player_id: invited.player_id } });
    expect(inv.body).toMatchObject({ kind: 'invite', player_id: invited.player_id, invited_by: owner.player_id });
    expect((await s.call('GET', '/api/v1/notifications', { token: invited.access_token })).body.notifications[0].type).toBe('group_invite');
    expectError(await s.call('POST', `/api/v1/groups/${id}/invites`, { token: invited.access_token, body: { player_id: asker.player_id } }), 403, 'forbidden');
    expect((await join(invited, id)).body.status).toBe('joined');
    expectError(await s.call('POST', `/api/v1/groups/${id}/invites`, { token: owner.access_token, body: { player_id: invited.player_id } }), 409, 'social.already_member');

    await askToJoin(asker, id);
    expect((await s.call('DELETE', `/api/v1/groups/${id}/requests/${asker.player_id}`, { token: owner.access_token })).body).toEqual({ success: true });
    expectError(await s.call('DELETE', `/api/v1/groups/${id}/requests/${asker.player_id}`, { token: owner.access_token }), 404, 'social.member_not_found');
    expect(await roleOf(id, asker)).toBeUndefined();
  });

  it('lets members leave, answers success for non-members, and lets the owner leave too (the group stays)', async () => {
    const g = await staffed();
    expect((await leave(g.member, g.id)).body).toEqual({ success: true });
    expect((await leave(g.outsider, g.id)).body).toEqual({ success: true });
    expect((await leave(g.outsider, 'nope')).body).toEqual({ success: true });
    const transfer = await setRole(g.owner, g.id, g.admin.player_id, 'owner');
    expect(transfer.body).toMatchObject({ player_id: g.admin.player_id, role: 'owner' });
    expect(await roleOf(g.id, g.owner)).toBe('admin');
    expect((await leave(g.owner, g.id)).status).toBe(200);
    expect(await roleOf(g.id, g.admin)).toBe('owner');
    // The last owner leaves without handing over: no transfer, and the group stays.
    expect((await leave(g.admin, g.id)).body).toEqual({ success: true });
    expect(await roleOf(g.id, g.moderator)).toBe('moderator');
    expect((await s.call('GET', `/api/v1/groups/${g.id}`, { token: g.moderator.access_token })).status).toBe(200);
  });

  it('answers social.member_not_found for a role change or kick in an unknown group', async () => {
    const p = await registerPlayer(s);
    const unknown = '0190c1f2-aaaa-7000-8000-000000000002';
    expectError(await kick(p, unknown, p.player_id), 404, 'social.member_not_found');
    expectError(await setRole(p, unknown, p.player_id, 'admin'), 404, 'social.member_not_found');
    expectError(await kick(p, 'not-a-uuid', p.player_id), 404, 'social.member_not_found');
  });
});

describe('roles and kicks', () => {
  it('applies the role matrix: only downward, never to a role at or above your own', async () => {
    const g = await staffed();
    // Admin promotes a member to moderator, demotes a moderator; cannot touch the owner or make admins.
    expect((await setRole(g.admin, g.id, g.member.player_id, 'moderator')).body.role).toBe('moderator');
    expect((await setRole(g.admin, g.id, g.member.player_id, 'member')).body.role).toBe('member');
    expectError(await setRole(g.admin, g.id, g.member.player_id, 'admin'), 403, 'forbidden');
    expectError(await setRole(g.admin, g.id, g.owner.player_id, 'member'), 403, 'forbidden');
    expectError(await setRole(g.admin, g.id, g.admin.player_id, 'member'), 403, 'forbidden');
    expectError(await setRole(g.admin, g.id, g.member.player_id, 'owner'), 403, 'forbidden');
    // Moderators and members change no roles.
    expectError(await setRole(g.moderator, g.id, g.member.player_id, 'member'), 403, 'forbidden');
    expectError(await setRole(g.member, g.id, g.member.player_id, 'moderator'), 403, 'forbidden');
    // The owner makes admins, cannot transfer to itself.
    expect((await setRole(g.owner, g.id, g.moderator.player_id, 'admin')).body.role).toBe('admin');
    expectError(await setRole(g.owner, g.id, g.owner.player_id, 'owner'), 403, 'forbidden');
    // Input errors.
    expectError(await setRole(g.owner, g.id, g.member.player_id, 'emperor'), 400, 'social.invalid_role');
    expectError(await setRole(g.owner, g.id, g.member.player_id, undefined), 400, 'missing_field');
    expectError(await setRole(g.owner, g.id, g.outsider.player_id, 'member'), 404, 'social.member_not_found');
    expectError(await setRole(g.outsider, g.id, g.member.player_id, 'member'), 404, 'social.member_not_found');
  });

  it('kicks only members ranked below the actor, from moderator up', async () => {
    const g = await staffed();
    expectError(await kick(g.member, g.id, g.moderator.player_id), 403, 'forbidden');
    expectError(await kick(g.moderator, g.id, g.admin.player_id), 403, 'forbidden');
    expectError(await kick(g.admin, g.id, g.admin.player_id), 403, 'forbidden');
    expectError(await kick(g.admin, g.id, g.owner.player_id), 403, 'forbidden');
    expect((await kick(g.moderator, g.id, g.member.player_id)).body).toEqual({ success: true });
    expectError(await kick(g.moderator, g.id, g.member.player_id), 404, 'social.member_not_found');
    expect((await kick(g.owner, g.id, g.admin.player_id)).status).toBe(200);
    expectError(await kick(g.outsider, g.id, g.moderator.player_id), 404, 'social.member_not_found');
    const left = (await members(g.owner, g.id)).body.members.map((m: any) => m.player_id).sort();
    expect(left).toEqual([g.owner.player_id, g.moderator.player_id].sort());
  });

  it('lists members newest first with limit and before; an unknown group lists nobody', async () => {
    const g = await staffed();
    const all = (await members(g.outsider, g.id)).body.members;
    expect(all.map((m: any) => m.player_id)).toEqual([g.member, g.moderator, g.admin, g.owner].map((p) => p.player_id));
    const page1 = (await members(g.outsider, g.id, '?limit=2')).body.members;
    const page2 = (await members(g.outsider, g.id, `?limit=2&before=${page1[1].id}`)).body.members;
    expect([...page1, ...page2]).toEqual(all);
    expect((await members(g.outsider, '0190c1f2-aaaa-7000-8000-000000000001')).body).toEqual({ members: [] });
  });
});
