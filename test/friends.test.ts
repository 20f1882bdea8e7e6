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

const request = (from: TestPlayer, to: unknown) => s.call('POST', '/api/v1/friends', { token: from.access_token, body: { friend_id: to } });
const answer = (by: TestPlayer, requester: string, status: unknown) =>
  s.call('PUT', `/api/v1/friends/${requester}`, { token: by.access_token, body: status === undefined ? {} : { status } });
const remove = (by: TestPlayer, other: string) => s.call('DELETE', `/api/v1/friends/${other}`, { token: by.access_token });
const list = (p: TestPlayer, query = '') => s.call('GET', `/api/v1/friends${query}`, { token: p.access_token });

describe('friend requests', () => {
  it('creates a pending request from the caller to the target, idempotently', async () => {
    const [a, b] = [await registerPlayer(s), await registerPlayer(s)];
    const res = await request(a, b.player_id);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ player_id: a.player_id, friend_id: b.player_id, status: 'pending' });
    expect(res.body.inserted_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const again = await request(a, b.player_id);
    expect(again.body.id).toBe(res.body.id);
    expect(again.body.status).toBe('pending');
  });

  it('refuses self, unknown players and bad input with the documented codes', async () => {
    const a = await registerPlayer(s);
    expectError(await request(a, a.player_id), 400, 'social.cannot_friend_self');
    expectError(await request(a, '0190c1f2-aaaa-7000-8000-000000000001'), 404, 'social.friend_not_found');
    expectError(await request(a, 'not-a-uuid'), 404, 'social.friend_not_found');
    // A required body field absent or not a string is 400 missing_field with details.field.
    const wrongType = await request(a, 42);
    expectError(wrongType, 400, 'missing_field');
    expect(wrongType.body.error.details.field).toBe('friend_id');
    expectError(await s.call('POST', '/api/v1/friends', { token: a.access_token, body: {} }), 400, 'missing_field');
    expectError(await s.call('POST', '/api/v1/friends', { body: { friend_id: a.player_id } }), 401, 'unauthenticated');
  });

  it('turns a request to someone who already asked you into the friendship', async () => {
    const [a, b] = [await registerPlayer(s), await registerPlayer(s)];
    const first = await request(a, b.player_id);
    const back = await request(b, a.player_id);
    expect(back.status).toBe(200);
    expect(back.body).toMatchObject({ id: first.body.id, player_id: a.player_id, friend_id: b.player_id, status: 'accepted' });
    const rows = await s.ctx.db.selectFrom('friendships').selectAll().where('player_id', 'in', [a.player_id, b.player_id]).execute();
    expect(rows).toHaveLength(1);
  });
});

describe('answering a request', () => {
  it('lets only the recipient accept; the requester is notified live', async () => {
    const [a, b] = [await registerPlayer(s), await registerPlayer(s)];
    await request(a, b.player_id);
    expectError(await answer(a, b.player_id, 'accepted'), 404, 'social.friendship_not_found');
    const sock = await TestSocket.open(s);
    await sock.request('session.connect', { token: a.access_token });
    const res = await answer(b, a.player_id, 'accepted');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ player_id: a.player_id, friend_id: b.player_id, status: 'accepted' });
    const push = await sock.next('notification.new');
    expect(push.payload).toMatchObject({ player_id: a.player_id, type: 'friend_accepted', read: false, content: { friend_id: b.player_id } });
    sock.close();
    // Accepting again is harmless.
    expect((await answer(b, a.player_id, 'accepted')).body.status).toBe('accepted');
  });

  it('rejects by deleting the incoming row and answering status rejected', async () => {
    const [a, b] = [await registerPlayer(s), await registerPlayer(s)];
    const req = await request(a, b.player_id);
    const res = await answer(b, a.player_id, 'rejected');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: req.body.id, status: 'rejected' });
    expect((await list(a)).body.friends).toEqual([]);
    expectError(await answer(b, a.player_id, 'rejected'), 404, 'social.friendship_not_found');
    // A fresh request is possible afterwards.
    expect((await request(a, b.player_id)).body.status).toBe('pending');
  });

  it('answers a missing status 400 and an unknown one 422', async () => {
    const [a, b] = [await registerPlayer(s), await registerPlayer(s)];
    await request(a, b.player_id);
    expectError(await answer(b, a.player_id, undefined), 400, 'missing_field');
    const bad = await answer(b, a.player_id, 'best_friends');
    expectError(bad, 422, 'validation_failed');
    expect(bad.body.errors.status).toBeDefined();
    expectError(await answer(b, '0190c1f2-aaaa-7000-8000-000000000001', 'accepted'), 404, 'social.friendship_not_found');
  });
});

describe('blocking', () => {
  it('replaces any relation, stops requests both ways and hides the blocker', async () => {
    const [a, b] = [await registerPlayer(s), await registerPlayer(s)];
    await request(a, b.player_id);
    await answer(b, a.player_id, 'accepted');
    const blocked = await answer(b, a.player_id, 'blocked');
    expect(blocked.status).toBe(200);
    expect(blocked.body).toMatchObject({ player_id: b.player_id, friend_id: a.player_id, status: 'blocked' });
    // The friendship is gone; the blocked player sees nothing of the block.
    expect((await list(a)).body.friends).toEqual([]);
    expect((await list(b)).body.friends.map((f: any) => f.status)).toEqual(['blocked']);
    expectError(await request(a, b.player_id), 404, 'social.friend_not_found');
    const own = await request(b, a.player_id);
    expectError(own, 403, 'forbidden');
    expect(own.body.error.details.reason).toBe('blocked');
    // The blocked player cannot lift someone else's block.
    expectError(await remove(a, b.player_id), 404, 'social.friendship_not_found');
    // The blocker lifts it with DELETE; requests work again.
    expect((await remove(b, a.player_id)).body).toEqual({ success: true });
    expect((await request(a, b.player_id)).body.status).toBe('pending');
  });

  it('blocks a stranger too, and keeps the other side\'s own block', async () => {
    const [a, b] = [await registerPlayer(s), await registerPlayer(s)];
    expect((await answer(a, b.player_id, 'blocked')).body.status).toBe('blocked');
    expect((await answer(b, a.player_id, 'blocked')).body.status).toBe('blocked');
    const rows = await s.ctx.db.selectFrom('friendships').select(['player_id', 'status']).where('player_id', 'in', [a.player_id, b.player_id]).execute();
    expect(rows.map((r) => r.status)).toEqual(['blocked', 'blocked']);
    expectError(await answer(a, a.player_id, 'blocked'), 400, 'social.cannot_friend_self');
  });
});

describe('removing', () => {
  it('lets either side end a friendship, cancel or decline a request', async () => {
    const [a, b, c] = [await registerPlayer(s), await registerPlayer(s), await registerPlayer(s)];
    await request(a, b.player_id);
    await answer(b, a.player_id, 'accepted');
    expect((await remove(b, a.player_id)).status).toBe(200);
    expect((await list(a)).body.friends).toEqual([]);
    await request(a, c.player_id);
    expect((await remove(c, a.player_id)).status).toBe(200); // decline
    await request(a, c.player_id);
    expect((await remove(a, c.player_id)).status).toBe(200); // cancel
    expectError(await remove(a, c.player_id), 404, 'social.friendship_not_found');
    expectError(await remove(a, 'nope'), 404, 'social.friendship_not_found');
  });
});

describe('listing', () => {
  it('lists the rows the caller started by default, as established clients expect; incoming and all on request', async () => {
    const me = await registerPlayer(s);
    const [out, inc] = [await registerPlayer(s), await registerPlayer(s)];
    await request(me, out.player_id);
    await request(inc, me.player_id);
    const mine = (await list(me)).body.friends;
    expect(mine.map((f: any) => [f.player_id, f.friend_id, f.direction])).toEqual([[me.player_id, out.player_id, 'outgoing']]);
    expect((await list(me, '?direction=outgoing')).body.friends).toEqual(mine);
    expect((await list(me, '?direction=sideways')).body.friends).toEqual(mine);
    const incoming = (await list(me, '?direction=incoming')).body.friends;
    expect(incoming.map((f: any) => [f.player_id, f.friend_id, f.direction])).toEqual([[inc.player_id, me.player_id, 'incoming']]);
    expect((await list(me, '?direction=all')).body.friends.map((f: any) => f.direction)).toEqual(['incoming', 'outgoing']);
  });

  it('lists both directions with a status filter, newest first, paginated by limit and before', async () => {
    const me = await registerPlayer(s);
    const others: TestPlayer[] = [];
    for (let i = 0; i < 4; i++) others.push(await registerPlayer(s));
    await request(me, others[0]!.player_id);
    await request(me, others[1]!.player_id);
    await request(others[2]!, me.player_id);
    await request(others[3]!, me.player_id);
    await answer(me, others[3]!.player_id, 'accepted');

    const all = (await list(me, '?direction=all')).body.friends;
    expect(all).toHaveLength(4);
    expect(all.map((f: any) => f.direction)).toEqual(['incoming', 'incoming', 'outgoing', 'outgoing']);
    expect((await list(me, '?direction=all&status=accepted')).body.friends.map((f: any) => f.player_id)).toEqual([others[3]!.player_id]);
    expect((await list(me, '?direction=all&status=pending')).body.friends).toHaveLength(3);
    expect((await list(me, '?direction=all&status=weird')).body.friends).toEqual([]);

    const first = (await list(me, '?direction=all&limit=2')).body.friends;
    expect(first).toHaveLength(2);
    const second = (await list(me, `?direction=all&limit=2&before=${first[1].id}`)).body.friends;
    expect(second.map((f: any) => f.id)).toEqual(all.slice(2).map((f: any) => f.id));
    expect((await list(me, '?direction=all&limit=0')).body.friends).toHaveLength(1);
  });

  it('shows whether accepted friends are online, and nothing for others', async () => {
    const [a, b, c] = [await registerPlayer(s), await registerPlayer(s), await registerPlayer(s)];
    await request(a, b.player_id);
    await answer(b, a.player_id, 'accepted');
    await request(a, c.player_id);
    const offline = (await list(a)).body.friends;
    expect(offline.every((f: any) => f.online === false && f.presence === null)).toBe(true);

    const sb = await TestSocket.open(s);
    await sb.request('session.connect', { token: b.access_token });
    const sc = await TestSocket.open(s);
    await sc.request('session.connect', { token: c.access_token });
    const online = (await list(a)).body.friends;
    const byOther = Object.fromEntries(online.map((f: any) => [f.friend_id, f]));
    expect(byOther[b.player_id]).toMatchObject({ online: true, presence: { status: 'online', metadata: {} } });
    // A pending request reveals no presence.
    expect(byOther[c.player_id]).toMatchObject({ online: false, presence: null });
    sb.close();
    sc.close();
  });
});
