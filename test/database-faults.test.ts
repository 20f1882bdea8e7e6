import { afterEach, describe, expect, it } from 'vitest';
import pg from 'pg';
import { freshDatabase, type ServerConnection } from './support/database';
import { startTestServer, type TestServer } from './support/server';
import { registerPlayer, type TestPlayer } from './support/accounts';
import { TcpProxy } from '../tools/faults/tcp-proxy';
import { connectPlayer, expectErrorFrame } from './support/ws-client';
import { auditAcked, startWriters, type WriterStats } from '../tools/faults/writers';

// Outages of a database server: an embedded database lives in the node's own
// process and has no connection to lose, so these run against the server only.
const url = process.env.DATABASE_URL;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Node {
  s: TestServer;
  schema: string;
  a: TestPlayer;
  b: TestPlayer;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function node(connection: ServerConnection): Promise<Node> {
  const database = await freshDatabase(connection);
  // Ten writers answered 503 at once during an outage can outrun the test
  // bucket of one player; outages, not rate limits, are what is measured.
  const s = await startTestServer({ rate_limits: { api: { limit: 1_000_000, window: 1000 } } }, { database });
  cleanups.push(() => s.close());
  const [a, b] = [await registerPlayer(s), await registerPlayer(s)];
  return { s, schema: database.schema!, a: a!, b: b! };
}

async function admin(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  cleanups.push(() => c.end());
  return c;
}

/** Polls readiness until it answers `status`; returns how long that took. Each probe itself must answer within 1 s. */
async function readinessBecomes(s: TestServer, status: number, withinMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    const t = Date.now();
    const res = await fetch(`${s.url}/api/v1/health/ready`, { signal: AbortSignal.timeout(5000) });
    const body = await res.json();
    expect(Date.now() - t, 'a readiness probe waited on the database').toBeLessThan(1000);
    if (res.status === status) {
      if (status === 503) expect(body.error).toMatchObject({ code: 'not_ready', details: { reason: expect.stringMatching(/^database_/) } });
      return Date.now() - started;
    }
    if (Date.now() - started > withinMs) throw new Error(`readiness still ${res.status} after ${withinMs} ms`);
    await sleep(25);
  }
}

/** Every answer was a success or the outage's 503, every acknowledged write is stored exactly once. */
async function expectNothingLost(n: Node, stats: WriterStats): Promise<void> {
  expect([...stats.byStatus.keys()].filter((k) => k !== 200 && k !== 503), JSON.stringify([...stats.errors])).toEqual([]);
  for (const key of stats.errors.keys()) expect(key).toMatch(/^503 not_ready\/database_(unavailable|timeout)$/);
  expect(stats.unanswered).toBe(0);
  expect(stats.acked.length).toBeGreaterThan(0);
  const audit = await auditAcked(url!, n.schema, stats.acked);
  expect(audit).toEqual({ lost: [], duplicated: [] });
}

describe.skipIf(!url)('database outages (PostgreSQL server)', () => {
  it('survives its backends being terminated under write load, twice in a row', async () => {
    const app = `svc_fault_${Math.random().toString(36).slice(2, 10)}`;
    const n = await node({ applicationName: app });
    const pgAdmin = await admin();
    const writers = startWriters({ url: n.s.url, tokens: [n.a.access_token], recipientId: n.b.player_id, writers: 10, tag: app });
    const kill = async () => {
      const { rows } = await pgAdmin.query('select pg_terminate_backend(pid) as done from pg_stat_activity where application_name = $1', [app]);
      return rows.length;
    };
    await sleep(300);
    expect(await kill()).toBeGreaterThan(0);
    await sleep(150);
    expect(await kill()).toBeGreaterThan(0);
    await sleep(500);
    const acksBefore = writers.stats.acked.length;
    await readinessBecomes(n.s, 200, 2000);
    await sleep(300);
    const stats = await writers.stop();
    expect(stats.acked.length, 'writes go through again without a restart').toBeGreaterThan(acksBefore);
    await expectNothingLost(n, stats);
  });

  it('answers 503 while the network to the server is cut, and recovers without a restart', async () => {
    const proxy = await TcpProxy.start({ host: '127.0.0.1', port: Number(new URL(url!).port || 5432) });
    cleanups.push(() => proxy.close());
    const n = await node({ url: proxy.rewrite(url!), connectTimeoutMs: 1000, statementTimeoutMs: 1000 });
    const writers = startWriters({ url: n.s.url, tokens: [n.a.access_token], recipientId: n.b.player_id, writers: 10, tag: `cut${Date.now()}`, pauseMs: 20 });
    await sleep(300);

    proxy.reset();
    expect(await readinessBecomes(n.s, 503, 1000)).toBeLessThanOrEqual(1000);
    const before = writers.stats.byStatus.get(503) ?? 0;
    await sleep(10_000);
    expect(writers.stats.byStatus.get(503) ?? 0, 'requests during the outage answer 503').toBeGreaterThan(before);
    const cutAcks = writers.stats.acked.length;

    proxy.restore();
    expect(await readinessBecomes(n.s, 200, 2000)).toBeLessThanOrEqual(2000);
    await sleep(500);
    const stats = await writers.stop();
    expect(stats.acked.length).toBeGreaterThan(cutAcks);
    expect(stats.longestMs, 'no request waits out the outage').toBeLessThan(5000);
    await expectNothingLost(n, stats);
  }, 40_000);

  it('bounds every request and the readiness probe when the network goes silent', async () => {
    const proxy = await TcpProxy.start({ host: '127.0.0.1', port: Number(new URL(url!).port || 5432) });
    cleanups.push(() => proxy.close());
    const n = await node({ url: proxy.rewrite(url!), connectTimeoutMs: 1000, statementTimeoutMs: 1000 });
    const writers = startWriters({ url: n.s.url, tokens: [n.a.access_token], recipientId: n.b.player_id, writers: 5, tag: `hole${Date.now()}`, pauseMs: 20 });
    await sleep(300);

    proxy.blackhole();
    expect(await readinessBecomes(n.s, 503, 1500)).toBeLessThanOrEqual(1500);
    // A read that needs the database: answered 503 within the deadlines (1 s connect or 1 s + 1 s statement), never held.
    const started = Date.now();
    const res = await n.s.call('GET', `/api/v1/players/${n.b.player_id}`, { token: n.a.access_token });
    expect(res.status).toBe(503);
    expect(res.body.error).toMatchObject({ code: 'not_ready', details: { reason: expect.stringMatching(/^database_/) } });
    expect(Date.now() - started).toBeLessThan(4000);
    await sleep(3000);

    proxy.restore();
    await readinessBecomes(n.s, 200, 2000);
    await sleep(500);
    const stats = await writers.stop();
    expect(stats.longestMs).toBeLessThan(4000);
    await expectNothingLost(n, stats);
  }, 40_000);

  it('answers messages queued behind a timed-out store within one deadline, not two', async () => {
    const n = await node({ statementTimeoutMs: 800 });
    // Three senders: one socket answers its frames in order, so queueing takes separate sockets.
    const senders = await Promise.all([connectPlayer(n.s), connectPlayer(n.s), connectPlayer(n.s)]);
    cleanups.push(async () => senders.forEach((p) => p.socket.close()));
    const locker = await admin();
    await locker.query('begin');
    await locker.query(`lock table ${n.schema}.chat_messages in access exclusive mode`);
    const send = async (sender: (typeof senders)[number], content: string) => {
      const started = Date.now();
      const frame = await sender.socket.request('dm.send', { recipient_id: n.b.player_id, content });
      return { frame, ms: Date.now() - started };
    };
    try {
      // The first message's store waits on the lock; the next two queue behind it.
      const first = send(senders[0]!, 'first');
      await sleep(300);
      const queued = await Promise.all([send(senders[1]!, 'second'), send(senders[2]!, 'third')]);
      expectErrorFrame((await first).frame, 'database_timeout', 'ws.request_failed');
      for (const q of queued) {
        expectErrorFrame(q.frame, 'database_timeout', 'ws.request_failed');
        // Sent 300 ms into the first store's 800 ms: answered when it fails, where a second
        // batch would have held them a further 800 ms against the lock.
        expect(q.ms, 'a queued message waited out a second deadline').toBeLessThan(1100);
      }
    } finally {
      await locker.query('rollback');
    }
    const after = await send(senders[1]!, 'after');
    expect(after.frame.type, JSON.stringify(after.frame)).toBe('dm.sent');
    for (const [i, sender] of senders.entries()) {
      const stored = await n.s.call('GET', `/api/v1/dm/${n.b.player_id}/history`, { token: sender.token });
      expect(stored.body.messages.map((m: { content: string }) => m.content)).toEqual(i === 1 ? ['after'] : []);
    }
  });

  it('answers 503 database_timeout when a lock holds a read past the statement timeout, and stays ready', async () => {
    const n = await node({ statementTimeoutMs: 800 });
    const ws = await connectPlayer(n.s);
    cleanups.push(async () => ws.socket.close());
    const locker = await admin();
    await locker.query('begin');
    await locker.query(`lock table ${n.schema}.players in access exclusive mode`);
    try {
      const started = Date.now();
      const res = await n.s.call('GET', `/api/v1/players/${n.b.player_id}`, { token: n.a.access_token });
      expect(res.status, JSON.stringify(res.body)).toBe(503);
      expect(res.body.error).toMatchObject({ code: 'not_ready', details: { reason: 'database_timeout' } });
      expect(Date.now() - started).toBeLessThan(3000);
      // The socket path says the same, as an error frame (the socket stays open).
      const frame = await ws.socket.request('dm.send', { recipient_id: n.b.player_id, content: 'held' });
      expectErrorFrame(frame, 'database_timeout', 'ws.request_failed');
      expect(frame.payload.error.details).toMatchObject({ reason: 'database_timeout' });
      // A lock on one table is not an outage: the node stays ready.
      expect((await n.s.call('GET', '/api/v1/health/ready')).status).toBe(200);
    } finally {
      await locker.query('rollback');
    }
    expect((await n.s.call('GET', `/api/v1/players/${n.b.player_id}`, { token: n.a.access_token })).status).toBe(200);
  });
});
