import { sql, type KyselyPlugin } from 'kysely';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { route } from '../handlers/contract';
import { openPostgres } from '../host/infra/database';
import { migrations } from '../migrations/index';
import { migrateToLatest } from '../runtime/platform/migrate';
import { freshDatabase } from './support/database';
import { startTestServer } from './support/server';

/** Test-only routes mounted beside the real ones. */
const probe = { method: 'GET', summary: 'test probe', tag: 'test', auth: 'none', rate: 'api', errors: [] } as const;

describe('migrations', () => {
  it('bring a fresh database to the newest step, and running them again changes nothing', async () => {
    const db = await freshDatabase();
    try {
      const rows = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db.db);
      expect(rows.rows.map((r) => r.name)).toEqual(Object.keys(migrations).sort());
      expect(await migrateToLatest(db.db)).toEqual([]);
      const tables = await sql<{ table_name: string }>`
        select table_name from information_schema.tables where table_schema = current_schema()`.execute(db.db);
      const names = tables.rows.map((r) => r.table_name);
      for (const t of ['players', 'player_identities', 'player_tokens', 'player_stats', 'ops_audit_entries']) expect(names).toContain(t);
    } finally {
      await db.close();
    }
  });

  it.runIf(process.env.DATABASE_URL)('run while other schemas on the server are created and dropped', async () => {
    // Parallel test files, or another application, drop their schemas while we migrate:
    // the bookkeeping must look at our schema only.
    const db = await freshDatabase();
    const churn = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await churn.connect();
    let running = true;
    const churning = (async () => {
      for (let i = 0; running; i++) {
        const name = `churn_${process.pid}_${i}`;
        await churn.query(`create schema ${name}; create table ${name}.t (id serial primary key, v text); create table ${name}.kysely_migration (name text)`);
        await churn.query(`drop schema ${name} cascade`);
      }
    })();
    try {
      for (let i = 0; i < 40; i++) expect(await migrateToLatest(db.db)).toEqual([]);
    } finally {
      running = false;
      await churning;
      await churn.end();
      await db.close();
    }
  }, 60_000);

  it('are listed in order and named NNNN_name', () => {
    const names = Object.keys(migrations);
    expect(names).toEqual([...names].sort());
    for (const n of names) expect(n).toMatch(/^\d{4}_[a-z0-9_]+$/);
  });

  it('hold every API route at 503 not_ready until they finish', async () => {
    let finish!: () => void;
    const gate = new Promise<void>((resolve) => (finish = resolve));
    const s = await startTestServer({}, { waitReady: false, migrate: async (db) => { await gate; return migrateToLatest(db); } });
    try {
      // Liveness answers, here and at the root: the process is healthy, only not ready yet.
      expect((await s.call('GET', '/api/v1/health')).status).toBe(200);
      expect(await s.call('GET', '/health')).toMatchObject({ status: 200, body: { status: 'ok' } });
      for (const path of ['/api/v1/health/ready', '/ready', '/api/v1/no-such-route', '/api/v1/players/me/erase']) {
        const res = await s.call('GET', path);
        expect(res.status).toBe(503);
        expect(res.body.error).toMatchObject({ code: 'not_ready', details: {} });
      }
      finish();
      await s.ready;
      expect((await s.call('GET', '/api/v1/health/ready')).status).toBe(200);
      // The asobi family's recipes and CLI probe the root: the same answers.
      expect(await s.call('GET', '/ready')).toMatchObject({ status: 200, body: { status: 'ok', database: 'ok' } });
      expect(await s.call('GET', '/health')).toMatchObject({ status: 200, body: { status: 'ok' } });
    } finally {
      await s.close();
    }
  });
});

describe('database outage', () => {
  it('answers the error object, not a crash, when the database is unreachable', async () => {
    // Port 1 on loopback: nothing listens, so every query fails to connect.
    const dead = openPostgres({ url: 'postgres://postgres@127.0.0.1:1/test', poolSize: 1, connectTimeoutMs: 1000, statementTimeoutMs: 1000 });
    // The boot waits for the database (its catalogue and boards live there), answering meanwhile.
    const s = await startTestServer({}, { database: dead, migrate: async () => [], waitReady: false });
    try {
      await expect.poll(async () => (await s.call('GET', '/api/v1/health/ready')).body.error?.details?.reason, { timeout: 10_000 }).toBe('database_unavailable');
      const res = await s.call('GET', '/api/v1/health/ready');
      expect(res.status).toBe(503);
      expect(res.body.error).toMatchObject({ code: 'not_ready', details: { reason: 'database_unavailable' } });
      expect(await s.call('GET', '/ready')).toMatchObject({ status: 503, body: { error: { code: 'not_ready', details: { reason: 'database_unavailable' } } } });
      expect((await s.call('GET', '/api/v1/health')).status).toBe(200);
      expect((await s.call('GET', '/health')).status).toBe(200);
    } finally {
      await s.close();
    }
  });
});

describe('a database that drops out during the boot', () => {
  it('is waited for after the migrations too: the boards reload once it is back, then the node is ready', async () => {
    const database = await freshDatabase();
    // The first two reads of the boards fail as a refused connection does.
    let refusals = 2;
    const flaky: KyselyPlugin = {
      transformQuery(args) {
        if (refusals > 0 && /from leaderboard_entries/.test(JSON.stringify(args.node, (_, v) => (typeof v === 'bigint' ? String(v) : v)))) {
          refusals--;
          throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
        }
        return args.node;
      },
      transformResult: async (args) => args.result,
    };
    const s = await startTestServer({}, { database: { ...database, db: database.db.withPlugin(flaky) } });
    try {
      expect(refusals).toBe(0);
      expect(s.logs.filter((l) => l.event === 'migrations_waiting')).toHaveLength(2);
      expect((await s.call('GET', '/api/v1/health/ready')).status).toBe(200);
    } finally {
      await s.close();
    }
  });
});

describe('graceful shutdown', () => {
  it('finishes an in-flight request, refuses new connections, then closes the database', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const slow = route({
      ...probe,
      path: '/api/v1/test/slow',
      response: z.object({ finished: z.boolean() }),
      handle: async ({ ctx }) => {
        entered();
        await held;
        // Still able to use the database while draining.
        await sql`select 1`.execute(ctx.db);
        return { finished: true };
      },
    });
    const s = await startTestServer({}, { extraRoutes: [slow] });
    const inflight = fetch(`${s.url}/api/v1/test/slow`).then(async (r) => ({ status: r.status, body: await r.json() }));
    await inside;

    let closed = false;
    const closing = s.close().then(() => (closed = true));
    await new Promise((r) => setTimeout(r, 100));
    expect(closed).toBe(false);
    await expect(fetch(`${s.url}/api/v1/health`)).rejects.toThrow();

    release();
    expect(await inflight).toEqual({ status: 200, body: { finished: true } });
    await closing;
    expect(closed).toBe(true);
    expect(s.logs.some((l) => l.event === 'shutdown_complete')).toBe(true);
  });

  it('gives up on a request that outlives the grace period', async () => {
    const stuck = route({ ...probe, path: '/api/v1/test/stuck', response: z.object({}), handle: () => new Promise<never>(() => {}) });
    const s = await startTestServer({ shutdown_grace_ms: 200 }, { extraRoutes: [stuck] });
    const pending = fetch(`${s.url}/api/v1/test/stuck`).catch((e) => e);
    await new Promise((r) => setTimeout(r, 50));
    const started = Date.now();
    await s.close();
    expect(Date.now() - started).toBeLessThan(5000);
    expect(await pending).toBeInstanceOf(Error);
  });
});
