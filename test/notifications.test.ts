import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../runtime/contracts/errors';
import { notify } from '../runtime/social/notifications';
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

const list = (p: TestPlayer, q = '') => s.call('GET', `/api/v1/notifications${q}`, { token: p.access_token });
const markRead = (p: TestPlayer, id: string) => s.call('PUT', `/api/v1/notifications/${id}/read`, { token: p.access_token });
const remove = (p: TestPlayer, id: string) => s.call('DELETE', `/api/v1/notifications/${id}`, { token: p.access_token });

async function online(p: TestPlayer): Promise<TestSocket> {
  const sock = await TestSocket.open(s);
  expect((await sock.request('session.connect', { token: p.access_token })).type).toBe('session.connected');
  return sock;
}

describe('notification round trip', () => {
  it('a friend request stores a notification and pushes it live with the same shape REST returns', async () => {
    const [a, b] = [await registerPlayer(s), await registerPlayer(s)];
    const sock = await online(b);
    await s.call('POST', '/api/v1/friends', { token: a.access_token, body: { friend_id: b.player_id } });
    const push = await sock.next('notification.new');
    expect(push.payload).toEqual({
      id: expect.any(String),
      player_id: b.player_id,
      type: 'friend_request',
      subject: expect.any(String),
      content: { requester_id: a.player_id, friendship_id: expect.any(String) },
      read: false,
      sent_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
    });
    expect((await list(b)).body).toEqual({ notifications: [push.payload] });

    const read = await markRead(b, push.payload.id);
    expect(read.body).toEqual({ ...push.payload, read: true });
    expect((await markRead(b, push.payload.id)).body.read).toBe(true);
    expect((await remove(b, push.payload.id)).body).toEqual({ success: true });
    expect((await list(b)).body.notifications).toEqual([]);
    expectError(await remove(b, push.payload.id), 404, 'notification.not_found');
    sock.close();
  });

  it('scripts and extensions go through notify(): stored, pushed, validated', async () => {
    const p = await registerPlayer(s);
    const sock = await online(p);
    const made = await notify(s.ctx, { playerId: p.player_id, type: 'reward', subject: 'Daily chest', content: { gold: 10 } });
    expect((await sock.next('notification.new')).payload).toEqual(made);
    await expect(notify(s.ctx, { playerId: p.player_id, type: '', subject: 'x' })).rejects.toMatchObject({ code: 'validation_failed' });
    await expect(notify(s.ctx, { playerId: p.player_id, type: 't', subject: 'x', content: [] as never })).rejects.toBeInstanceOf(ApiError);
    await expect(notify(s.ctx, { playerId: '0190c1f2-aaaa-7000-8000-000000000001', type: 't', subject: 'x' })).rejects.toMatchObject({ code: 'player.not_found' });
    expect((await list(p)).body.notifications).toHaveLength(1);
    sock.close();
  });
});

describe('listing and ownership', () => {
  /** A fresh player with notifications s0 to s4 (oldest first); those at `readAt` are marked read. */
  async function fiveNotifications(...readAt: number[]) {
    const p = await registerPlayer(s);
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await notify(s.ctx, { playerId: p.player_id, type: 'n', subject: `s${i}` }));
    for (const i of readAt) await markRead(p, made[i]!.id);
    return { p, made };
  }
  const subjects = (r: { status: number; body: any }) => {
    expect(r.status).toBe(200);
    return r.body.notifications.map((n: any) => n.subject);
  };

  it('lists newest first, filters read=true/false, pages with limit and before', async () => {
    const { p, made } = await fiveNotifications(1, 3);
    expect(subjects(await list(p))).toEqual(['s4', 's3', 's2', 's1', 's0']);
    expect(subjects(await list(p, '?read=false'))).toEqual(['s4', 's2', 's0']);
    expect(subjects(await list(p, '?read=true'))).toEqual(['s3', 's1']);
    expect(subjects(await list(p, '?read=maybe'))).toHaveLength(5);
    expect(subjects(await list(p, '?limit=2'))).toEqual(['s4', 's3']);
    expect(subjects(await list(p, `?limit=2&before=${made[3]!.id}`))).toEqual(['s2', 's1']);
    expect(subjects(await list(p, '?limit=-4'))).toEqual(['s4']);
  });

  it('reads a repeated query key as its first value and ignores a malformed before cursor', async () => {
    const { p, made } = await fiveNotifications(1);
    expect(subjects(await list(p, '?limit=1&limit=3'))).toEqual(['s4']);
    expect(subjects(await list(p, `?before=${made[3]!.id}&before=${made[1]!.id}`))).toEqual(['s2', 's1', 's0']);
    expect(subjects(await list(p, '?read=true&read=false'))).toEqual(['s1']);
    expect(subjects(await list(p, '?limit=2&before=not-an-id'))).toEqual(['s4', 's3']);
    expect(subjects(await list(p, `?before=${made[3]!.id.slice(0, -1)}`))).toHaveLength(5);
    expect(subjects(await list(p, '?before='))).toHaveLength(5);
  });

  it("answers someone else's notification 403 forbidden and changes nothing", async () => {
    const [owner, other] = [await registerPlayer(s), await registerPlayer(s)];
    const n = await notify(s.ctx, { playerId: owner.player_id, type: 'n', subject: 'mine' });
    expectError(await markRead(other, n.id), 403, 'forbidden');
    expectError(await remove(other, n.id), 403, 'forbidden');
    expectError(await markRead(other, '0190c1f6-3333-7000-8000-000000000006'), 404, 'notification.not_found');
    expectError(await markRead(other, 'not-an-id'), 404, 'notification.not_found');
    expect((await list(owner)).body.notifications).toMatchObject([{ id: n.id, read: false }]);
    expectError(await s.call('GET', '/api/v1/notifications'), 401, 'unauthenticated');
  });
});
