import { Redis } from 'ioredis';
import { REDIS_URL, redisDown } from './support/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { afterCommit } from '../runtime/changes/effects';
import type { OpenDatabase } from '../host/infra/database';
import { freshDatabase } from './support/database';
import { startTestServer, type TestServer } from './support/server';
import { registerPlayer, TestSocket } from './support/ws-client';

// Two nodes in this process over one database (so it runs on the embedded
// database too) and one real Redis: what the three-process test cannot
// reach from outside, because the service has no route for it.

const skipReason = await redisDown();

describe.skipIf(skipReason !== null)('two nodes in one process', () => {
  let database: OpenDatabase & { close(): Promise<void> };
  let a: TestServer;
  let b: TestServer;
  const prefix = `svc-test-nodes-${process.pid}-${Date.now().toString(36)}:`;

  beforeAll(async () => {
    database = await freshDatabase();
    // Each node's shutdown would close the database; neither owns it.
    const shared = { ...database, close: async () => {} };
    a = await startTestServer({}, { database: shared, redis: { url: REDIS_URL, prefix, nodeId: 'in-a' } });
    b = await startTestServer({}, { database: shared, redis: { url: REDIS_URL, prefix, nodeId: 'in-b' } });
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await database?.close();
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  it('a ban made on one node (banned_at written, then the sessions ended) closes sockets and evicts tokens on the other', async () => {
    const player = await registerPlayer(a);
    const socket = await TestSocket.open(b);
    expect((await socket.request('session.connect', { token: player.token })).type).toBe('session.connected');
    // Node b has the token cached.
    expect((await b.call('GET', '/api/v1/players/me', { token: player.token })).status).toBe(200);

    await a.ctx.db.updateTable('players').set({ banned_at: new Date() }).where('id', '=', player.playerId).execute();
    await afterCommit(a.ctx, { kind: 'player_sessions_ended', playerId: player.playerId });

    expect(await socket.closed).toMatchObject({ code: 1000 });
    expect((await b.call('GET', '/api/v1/players/me', { token: player.token })).status).toBe(401);
  });

  it('a profile change made on one node evicts the cached copy on the other', async () => {
    const player = await registerPlayer(a);
    const read = () => b.call('GET', `/api/v1/players/${player.playerId}`, { token: player.token });
    expect((await read()).body.display_name).toBe(player.username);
    const updated = await a.call('PUT', `/api/v1/players/${player.playerId}`, { token: player.token, body: { display_name: 'Renamed' } });
    expect(updated.status).toBe(200);
    // Node b cached the old profile for profile_cache_ttl_ms (10 s); the eviction arrives over the bus.
    let seen = (await read()).body.display_name;
    for (let i = 0; i < 50 && seen !== 'Renamed'; i++) {
      await new Promise((r) => setTimeout(r, 20));
      seen = (await read()).body.display_name;
    }
    expect(seen).toBe('Renamed');
  });

  it('joins the fleet under the node id it was given', async () => {
    expect(a.fleet.bus.nodeId).toBe('in-a');
    expect(a.logs.find((l) => l.event === 'fleet_joined')).toMatchObject({ node: 'in-a', prefix });
  });

  it('without REDIS_URL a node stands alone: no Redis, the same answers', async () => {
    const alone = await startTestServer({}, { database: { ...database, close: async () => {} } });
    try {
      expect(alone.fleet.clustered).toBe(false);
      expect(alone.logs.some((l) => l.event === 'fleet_joined')).toBe(false);
      const p = await registerPlayer(alone);
      const socket = await TestSocket.open(alone);
      await socket.request('session.connect', { token: p.token });
      const stats = await alone.call('GET', '/api/v1/players/me', { token: p.token });
      expect(stats.status).toBe(200);
      expect(alone.ctx.live.presence.onlineCount()).toBe(1);
      socket.close();
    } finally {
      await alone.close();
    }
  });

  it('refuses to boot when Redis does not answer, naming REDIS_URL and hiding the password', async () => {
    const refused = await startTestServer({}, { database: { ...database, close: async () => {} }, redis: { url: 'redis://user:secret@127.0.0.1:1', prefix, waitMs: 1500 } }).then(
      async (up) => (await up.close(), null),
      (err: Error) => err,
    );
    expect(refused?.message).toContain('cannot reach Redis at redis://user:***@127.0.0.1:1 within 1500 ms');
    expect(refused?.message).toContain('ECONNREFUSED');
    expect(refused?.message).toContain('REDIS_URL');
    expect(refused?.message).not.toContain('secret');
  });
});

if (skipReason !== null) {
  describe('two nodes in one process', () => {
    it.skip(`skipped: ${skipReason}`, () => {});
  });
}
