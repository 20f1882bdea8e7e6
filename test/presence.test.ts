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
  it('answers presence.updated and pushes the change, with player_id, to online accepted friends only', async () => {
    const [a, friend, stranger, pending] = [await connectPlayer(s), await connectPlayer(s), await connectPlayer(s), await connectPlayer(s)];
    await befriend(a, friend);
    await s.call('POST', '/api/v1/friends', { token: pending.token, body: { friend_id: a.playerId } });
    const reply = await a.socket.request('presence.update', { status: 'in_lobby', metadata: { map: 'dust' } });
    // The sender's reply echoes its cid and names nobody; a friend's push has no cid and names the player.
    expect(reply).toEqual({ type: 'presence.updated', cid: expect.any(String), payload: { status: 'in_lobby', metadata: { map: 'dust' } } });
    const pushed = await friend.socket.next(isPresence);
    expect(pushed.payload).toEqual({ player_id: a.playerId, status: 'in_lobby', metadata: { map: 'dust' } });
    expect(await stranger.socket.quiet(isPresence, 200)).toBe(true);
    expect(await pending.socket.quiet(isPresence, 50)).toBe(true);

    // Friend listings show it too.
    const listing = await s.call('GET', '/api/v1/friends?direction=all', { token: friend.token });
    expect(listing.body.friends[0]).toMatchObject({ online: true, presence: { status: 'in_lobby', metadata: { map: 'dust' } } });
    // An absent status means online.
    expect((await a.socket.request('presence.update', {})).payload).toEqual({ status: 'online', metadata: {} });
    for (const p of [a, friend, stranger, pending]) p.socket.close();
  });

  it('stores any status value unvalidated; checks only the payload and metadata shapes', async () => {
    const a = await connectPlayer(s);
    for (const status of [5, '', 'x'.repeat(65), { mood: 'happy' }, null, ['a']]) {
      expect((await a.socket.request('presence.update', { status })).payload).toEqual({ status, metadata: {} });
    }
    for (const payload of ['x', [1], { metadata: [] }, { metadata: { blob: 'x'.repeat(1100) } }]) {
      const f = await a.socket.request('presence.update', payload);
      expect(f.type).toBe('error');
      expect(f.payload.error.code).toBe('invalid_payload');
    }
    // Only session.heartbeat, match.leave, world.leave and rpc.call work without a payload.
    const bare = await a.socket.request('presence.update');
    expect([bare.type, bare.payload.reason, bare.payload.error.code]).toEqual(['error', 'unknown_type', 'unknown_type']);
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
    const listing = await s.call('GET', '/api/v1/friends?direction=all', { token: friend.token });
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
