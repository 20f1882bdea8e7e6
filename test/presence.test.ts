import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, TestSocket, type Frame } from './support/ws-client';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ rate_limits: { ws_connect: { limit: 1000, window: 1000 } } });
});
afterAll(async () => {
  await s.close();
});

type Player = Awaited<ReturnType<typeof connectPlayer>>;

async function befriend(a: Player, b: Player): Promise<void> {
  await s.call('POST', '/api/v1/friends', { token: a.token, body: { friend_id: b.playerId } });
  await s.call('PUT', `/api/v1/friends/${a.playerId}`, { token: b.token, body: { status: 'accepted' } });
}

const isPresence = (f: Frame) => f.type === 'presence.updated' && f.cid === undefined;

describe('presence.update', () => {
  it('answers presence.updated and pushes the change to online friends only', async () => {
    const [a, friend, stranger, pending] = [await connectPlayer(s), await connectPlayer(s), await connectPlayer(s), await connectPlayer(s)];
    await befriend(a, friend);
    await s.call('POST', '/api/v1/friends', { token: pending.token, body: { friend_id: a.playerId } });
    const reply = await a.socket.request('presence.update', { status: 'in_lobby', metadata: { map: 'dust' } });
    expect(reply).toEqual({ type: 'presence.updated', cid: expect.any(String), payload: { status: 'in_lobby', metadata: { map: 'dust' } } });
    const pushed = await friend.socket.next(isPresence);
    expect(pushed.payload).toEqual({ player_id: a.playerId, status: 'in_lobby', metadata: { map: 'dust' } });
    expect(await stranger.socket.quiet(isPresence, 200)).toBe(true);
    expect(await pending.socket.quiet(isPresence, 50)).toBe(true);

    // Friend listings show it.
    const listing = await s.call('GET', '/api/v1/friends', { token: friend.token });
    expect(listing.body.friends[0]).toMatchObject({ online: true, presence: { status: 'in_lobby', metadata: { map: 'dust' } } });
    // Absent fields mean online with no metadata.
    expect((await a.socket.request('presence.update', {})).payload).toEqual({ status: 'online', metadata: {} });
    for (const p of [a, friend, stranger, pending]) p.socket.close();
  });

  it('validates status and metadata', async () => {
    const a = await connectPlayer(s);
    for (const payload of ['x', { status: 5 }, { status: '' }, { status: 'x'.repeat(65) }, { metadata: [] }, { metadata: { blob: 'x'.repeat(1100) } }]) {
      const f = await a.socket.request('presence.update', payload);
      expect(f.type).toBe('error');
      expect(f.payload.error.code).toBe('invalid_payload');
    }
    a.socket.close();
  });

  it('is cleared when the last socket closes; friends see offline and the online count drops', async () => {
    const [a, friend] = [await connectPlayer(s), await connectPlayer(s)];
    await befriend(a, friend);
    const second = await TestSocket.open(s);
    await second.request('session.connect', { token: a.token });
    await a.socket.request('presence.update', { status: 'busy' });
    await friend.socket.next(isPresence);
    const countBefore = s.ctx.live.presence.onlineCount();
    expect(countBefore).toBeGreaterThanOrEqual(2);

    a.socket.close();
    await a.socket.closed;
    // One socket left: still online, status kept.
    expect(await friend.socket.quiet(isPresence, 200)).toBe(true);
    expect(s.ctx.live.presence.get(a.playerId)).toEqual({ status: 'busy', metadata: {} });

    second.close();
    const offline = await friend.socket.next(isPresence);
    expect(offline.payload).toEqual({ player_id: a.playerId, status: 'offline', metadata: {} });
    expect(s.ctx.live.presence.get(a.playerId)).toBeNull();
    expect(s.ctx.live.presence.onlineCount()).toBe(countBefore - 1);
    const listing = await s.call('GET', '/api/v1/friends', { token: friend.token });
    expect(listing.body.friends[0]).toMatchObject({ online: false, presence: null });
    friend.socket.close();
  });

  it('is not served before session.connect', async () => {
    const sock = await TestSocket.open(s);
    const f = await sock.request('presence.update', { status: 'x' });
    expect(f.payload.reason).toBe('unknown_type');
    sock.close();
  });
});
