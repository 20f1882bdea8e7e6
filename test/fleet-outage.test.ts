import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OpenDatabase } from '../host/infra/database';
import { freshDatabase } from './support/database';
import { gameDir, matchScript } from './support/game-dir';
import { OwnRedis, redisServerMissing } from './support/redis';
import { startTestServer, type TestServer } from './support/server';
import { TestSocket, expectErrorFrame } from './support/ws-client';

// Two nodes in this process over one database (embedded, or DATABASE_URL's
// server) and a Redis of this file's own, which the tests stop and start
// again on the same port: revocations made while the fleet's bus is cut must
// still reach the other node through the database, and a socket's frames must
// not wait for a Redis that does not answer. The figures are the issue's
// (31 §2 and §3); each test prints what it measured.

const skipReason = redisServerMissing();

const game = gameDir({
  'config.lua': 'return { default = "match.lua" }',
  'match.lua': matchScript('match_size = 1\nmin_players = 1\nmax_players = 2\nquick_play = true'),
});

const PASSWORD = 'correct-horse-battery';
const NOBODYS = '00000000-0000-4000-8000-000000000000';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Milliseconds from now until `probe` holds (polled every `everyMs`); throws past `withinMs`. */
async function msUntil(what: string, probe: () => Promise<boolean>, withinMs: number, everyMs = 10): Promise<number> {
  const started = performance.now();
  for (;;) {
    if (await probe()) return performance.now() - started;
    if (performance.now() - started > withinMs) throw new Error(`${what}: not within ${withinMs} ms`);
    await sleep(everyMs);
  }
}

describe.skipIf(skipReason !== null)('revocation and frames through a Redis outage', () => {
  let redis: OwnRedis;
  let database: OpenDatabase & { close(): Promise<void> };
  let a: TestServer;
  let b: TestServer;
  const prefix = `svc-test-outage-${process.pid}-${Date.now().toString(36)}:`;
  const sockets: TestSocket[] = [];

  beforeAll(async () => {
    redis = await OwnRedis.start();
    database = await freshDatabase();
    const shared = { ...database, close: async () => {} };
    const settings = { match_workers: 0, rate_limits: { erase: { limit: 1000, window: 1000 } } };
    a = await startTestServer(settings, { database: shared, gameDir: game.dir, redis: { url: redis.url, prefix, nodeId: 'out-a' } });
    b = await startTestServer(settings, { database: shared, gameDir: game.dir, redis: { url: redis.url, prefix, nodeId: 'out-b' } });
  });

  afterAll(async () => {
    for (const s of sockets) s.close();
    await redis?.resume();
    await a?.close();
    await b?.close();
    await database?.close();
    await redis?.stop();
    game.remove();
  });

  let counter = 0;
  /** A player with a socket on node b, whose token node b has cached. */
  async function onB(): Promise<{ playerId: string; token: string; refresh: string; socket: TestSocket }> {
    const username = `out_${process.pid}_${++counter}`;
    const reg = await a.call('POST', '/api/v1/auth/register', { body: { username, password: PASSWORD } });
    expect(reg.status).toBe(200);
    const socket = await TestSocket.open(b);
    sockets.push(socket);
    expect((await socket.request('session.connect', { token: reg.body.access_token })).type).toBe('session.connected');
    expect((await b.call('GET', '/api/v1/players/me', { token: reg.body.access_token })).status).toBe(200);
    return { playerId: reg.body.player_id, token: reg.body.access_token, refresh: reg.body.refresh_token, socket };
  }

  const refusedOnB = (token: string) => async () => (await b.call('GET', '/api/v1/players/me', { token })).status === 401;
  const closedWithin = (socket: TestSocket, ms: number) =>
    Promise.race([socket.closed.then(() => performance.now()), sleep(ms).then(() => Number.NaN)]);

  /** Both nodes back on the bus after `resume` (they log it), so the next test starts from a joined fleet. */
  async function relinked(since: number): Promise<void> {
    const back = (s: TestServer) => s.logs.slice(since).some((l) => l.event === 'fleet_relinked');
    await msUntil('both nodes relinked', async () => back(a) && back(b), 15_000);
  }

  it('with Redis up, a logout on node a is refused on node b and closes its socket there at once (100 ms)', async () => {
    const p = await onB();
    const closed = closedWithin(p.socket, 1000);
    const out = await a.call('POST', '/api/v1/auth/logout', { token: p.token, body: { refresh_token: p.refresh } });
    expect(out.status).toBe(200);
    const answered = performance.now();
    const refusedMs = await msUntil('refused on b', refusedOnB(p.token), 1000);
    const closedMs = (await closed) - answered;
    console.log(`redis up: after the logout answered, refused on the other node within ${refusedMs.toFixed(0)} ms, socket closed after ${closedMs.toFixed(0)} ms`);
    // The figure is 100 ms (printed above, typically 15-80 ms); the rest is slack for a
    // loaded two-core machine, where the embedded database shares the test's event loop.
    expect(refusedMs).toBeLessThan(250);
    expect(closedMs).toBeLessThan(250);
  });

  /**
   * A logout and an erasure on node a while `cut` holds, of players whose sockets and cached
   * tokens are on node b: node b refuses both tokens within 2 s of the answer and closes both
   * sockets within 5 s, and keeps a session nobody revoked (its socket is returned).
   */
  async function revokedWhileCut(what: string, cut: () => Promise<void> | void, restore: () => Promise<void> | void): Promise<TestSocket> {
    const out = await onB();
    const erased = await onB();
    const bystander = await onB();
    await cut();
    try {
      const closes = [closedWithin(out.socket, 8000), closedWithin(erased.socket, 8000)];
      /** Runs the revocation; answers how long after its answer node b refused the token. */
      const revoke = async (call: () => Promise<{ status: number }>, token: string): Promise<{ answered: number; refusedMs: number }> => {
        expect((await call()).status).toBe(200);
        const answered = performance.now();
        return { answered, refusedMs: await msUntil('refused on b', refusedOnB(token), 4000) };
      };
      const loggedOut = await revoke(() => a.call('POST', '/api/v1/auth/logout', { token: out.token, body: { refresh_token: out.refresh } }), out.token);
      const erasure = await revoke(() => a.call('POST', '/api/v1/players/me/erase', { token: erased.token, body: { password: PASSWORD } }), erased.token);
      const refused = [loggedOut.refusedMs, erasure.refusedMs];
      const closedAt = await Promise.all(closes);
      const closed = [closedAt[0]! - loggedOut.answered, closedAt[1]! - erasure.answered];
      console.log(
        `${what}: after the revocation answered, refused on the other node within ${refused.map((t) => t.toFixed(0)).join(' / ')} ms (logout / erasure), sockets closed after ${closed.map((t) => t.toFixed(0)).join(' / ')} ms`,
      );
      for (const t of refused) expect(t).toBeLessThan(2000);
      for (const t of closed) expect(t).toBeLessThan(5000);
      // The database is the truth: a session nobody revoked keeps its socket and its token.
      expect((await bystander.socket.request('session.heartbeat')).type).toBe('session.heartbeat');
      expect((await b.call('GET', '/api/v1/players/me', { token: bystander.token })).status).toBe(200);
    } finally {
      await restore();
    }
    return bystander.socket;
  }

  it('while Redis is down, a logout and an erasure on node a are refused on node b within 2 s and close its sockets within 5 s; the rest stay up', async () => {
    const logs = [a.logs.length, b.logs.length];
    const bystander = await revokedWhileCut('redis down', () => redis.stop(), () => redis.resume());
    await relinked(Math.min(...logs));
    expect((await bystander.request('session.heartbeat')).type).toBe('session.heartbeat');
  });

  it('while Redis hangs (its connections open, no answers), the same holds: the missing heartbeat says the link is cut', async () => {
    const bystander = await revokedWhileCut('redis hung', () => redis.pause(), () => redis.unpause());
    expect((await bystander.request('session.heartbeat')).type).toBe('session.heartbeat');
  });

  it('while Redis is down, a match.join for a match this node does not run answers fleet_unavailable at once and the socket’s later frames do not wait', async () => {
    const p = await onB();
    const logs = [a.logs.length, b.logs.length];
    await redis.stop();
    try {
      const { joinMs, beatMs } = await joinThenHeartbeat(p.socket);
      const world = await p.socket.request('world.join', { world_id: NOBODYS });
      expectErrorFrame(world, 'fleet_unavailable', 'fleet_unavailable');
      console.log(`redis down: the match.join answered after ${joinMs.toFixed(0)} ms, a heartbeat sent after it waited ${beatMs.toFixed(0)} ms`);
      expect(beatMs).toBeLessThan(750);
    } finally {
      await redis.resume();
    }
    await relinked(Math.min(...logs));
    await directoryAnswers(p.socket);
  });

  /**
   * A match.join for an id nobody runs, and a heartbeat right behind it on the
   * same socket: the join answers fleet_unavailable, and the heartbeat waits
   * for it at most the 500 ms deadline (the tests allow 750: slack for a
   * loaded two-core machine).
   */
  async function joinThenHeartbeat(socket: TestSocket): Promise<{ joinMs: number; beatMs: number }> {
    const started = performance.now();
    socket.send({ type: 'match.join', cid: 'join', payload: { match_id: NOBODYS } });
    const beat = await socket.request('session.heartbeat');
    const beatMs = performance.now() - started;
    expect(beat.type).toBe('session.heartbeat');
    const join = await socket.next((f) => f.cid === 'join', 1000);
    const joinMs = performance.now() - started;
    expectErrorFrame(join, 'fleet_unavailable', 'fleet_unavailable');
    return { joinMs, beatMs };
  }

  /**
   * With the directory back (its connection reconnects on its own schedule), an id nobody runs
   * is a plain miss again. Polled at 10 frames a second: faster would meet the socket's frame limit.
   */
  async function directoryAnswers(socket: TestSocket): Promise<void> {
    await msUntil('the directory answers', async () => (await socket.request('match.join', { match_id: NOBODYS })).payload.reason === 'match_not_found', 10_000, 100);
  }

  it('while Redis hangs (the server stopped, its connections open), a join answers fleet_unavailable within the 500 ms deadline', async () => {
    const p = await onB();
    await directoryAnswers(p.socket);
    redis.pause();
    try {
      const { joinMs, beatMs } = await joinThenHeartbeat(p.socket);
      console.log(`redis hung: the match.join answered after ${joinMs.toFixed(0)} ms, a heartbeat sent after it waited ${beatMs.toFixed(0)} ms`);
      expect(beatMs).toBeLessThan(750);
    } finally {
      redis.unpause();
    }
  });
});

if (skipReason !== null) {
  describe('revocation and frames through a Redis outage', () => {
    it.skip(`skipped: ${skipReason}`, () => {});
  });
}
