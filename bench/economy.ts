// `npm run bench -- economy [--seconds 10] [--players 1000] [--concurrency 50]`
//
// Store purchases on the PostgreSQL server at DATABASE_URL (default the local
// test database): `POST /api/v1/store/purchase` through the whole node
// (bearer, rate limiter, router, the purchase transaction that locks the
// wallet, debits it, writes the ledger row and the inventory row), spread
// over many players and then all on one contended wallet, each beside a
// baseline measured in the same run: the same statements in the same
// transaction sent by a bare `pg` pool of the node's size, without the
// service. The node runs in a child process (this file with `target`); the
// load generator and the baseline run here. Afterwards every wallet's ledger
// must still sum to its balance.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { forkChild, serveParent, svcImport, svcRevision } from './_children';
import { progress, table } from './_report';
import { numberOption } from './_options';

const SECONDS = numberOption('seconds', 10);
const PLAYERS = numberOption('players', 1000);
const CONCURRENCY = numberOption('concurrency', 50);
/** The node's default `db_pool_size`; the baseline pool gets the same. */
const POOL = 10;
const TARGET_RATE = 1000;
const TARGET_P99_MS = 50;
const PRICE = 1;
/** Enough that no purchase of the run is refused for funds. */
const BALANCE = 1_000_000_000;

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

if (process.argv[2] === 'target') await target(JSON.parse(process.argv[3]!) as { schema: string });
else await main();

/** The node on PostgreSQL with a one-listing catalogue, and players with funded wallets. */
async function target({ schema }: { schema: string }): Promise<void> {
  const { openPostgres } = await svcImport<typeof import('../host/infra/database')>('host/infra/database.ts');
  const { createHost } = await svcImport<typeof import('../host/host')>('host/host.ts');
  const { jsonb } = await svcImport<typeof import('../runtime/platform/database')>('runtime/platform/database.ts');
  const { silentLogger } = await svcImport<typeof import('../runtime/platform/log')>('runtime/platform/log.ts');
  const { parseSettings } = await svcImport<typeof import('../runtime/contracts/settings')>('runtime/contracts/settings.ts');
  const { hashToken, newToken } = await svcImport<typeof import('../runtime/accounts/tokens')>('runtime/accounts/tokens.ts');
  const { grant } = await svcImport<typeof import('../runtime/economy/wallets')>('runtime/economy/wallets.ts');
  const open = { limit: 1_000_000_000, window: 1000 };
  const { settings } = parseSettings({ rate_limits: { api: open }, allow_empty_game: true, log_level: 'error', db_pool_size: POOL });
  const gameDir = mkdtempSync(path.join(tmpdir(), 'svc-bench-economy-'));
  writeFileSync(
    path.join(gameDir, 'catalogue.json'),
    JSON.stringify({
      currencies: [{ code: 'gold' }],
      items: [{ slug: 'potion', name: 'Potion', category: 'consumable' }],
      listings: [{ slug: 'potion_gold', item: 'potion', currency: 'gold', price: PRICE }],
    }),
  );
  const database = openPostgres({ url, schema, poolSize: settings.db_pool_size, connectTimeoutMs: settings.db_connect_timeout_ms, statementTimeoutMs: settings.db_statement_timeout_ms });
  const running = await createHost({ settings, database, log: silentLogger, gameDir });
  await running.ready;
  const listing = await running.ctx.db.selectFrom('store_listings').select('id').executeTakeFirstOrThrow();
  serveParent(
    { port: running.port, listingId: listing.id },
    {
      provision: async (m: { n: number }) => {
        // Players and tokens straight into the database; wallets through the
        // service, so each opens with a ledger row like any other.
        const db = running.ctx.db;
        const players: { id: string; token: string }[] = [];
        for (let done = 0; done < m.n; ) {
          const batch = Math.min(500, m.n - done);
          const rows = [];
          const tokens = [];
          for (let i = 0; i < batch; i++) {
            const id = running.ctx.ids.uuid();
            const token = newToken();
            players.push({ id, token });
            rows.push({ id, username: `buyer_${done + i}`, display_name: null, hashed_password: null, metadata: jsonb({}), updated_at: new Date() });
            tokens.push({ id: running.ctx.ids.uuid(), user_id: id, token: await hashToken(token), context: 'access' as const, family_id: null, expires_at: new Date(Date.now() + 3_600_000) });
          }
          await db.insertInto('players').values(rows).execute();
          await db.insertInto('player_tokens').values(tokens).execute();
          done += batch;
        }
        for (const p of players) await grant(running.ctx, { playerId: p.id, currency: 'gold', amount: BALANCE, reason: 'bench_credit' });
        return { players };
      },
      stop: async () => {
        await running.close();
        rmSync(gameDir, { recursive: true, force: true });
      },
    },
  );
}

interface Result {
  rate: number;
  p50: number;
  p99: number;
  errors: number;
  /** The node's CPU per purchase (svc rows only). */
  cpuUs?: number;
  /** This process's CPU per purchase: the HTTP client, or the bare pool's own work. */
  loadUs: number;
}

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

/**
 * The node under autocannon (the lightest HTTP client at hand, so the load
 * generator takes as little of the machine as it can): `CONCURRENCY`
 * keep-alive connections, each sending one purchase after another, for a
 * second of warm-up and then `seconds`; request i carries buyer i's token.
 */
async function overHttp(port: number, tokens: string[], body: string): Promise<Result> {
  let next = 0;
  const run = (duration: number) =>
    autocannon({
      url: `http://127.0.0.1:${port}`,
      connections: CONCURRENCY,
      duration,
      requests: [
        {
          method: 'POST',
          path: '/api/v1/store/purchase',
          setupRequest: (req) => ({ ...req, headers: { ...req.headers, 'content-type': 'application/json', authorization: `Bearer ${tokens[next++ % tokens.length]}` }, body }),
        },
      ],
    });
  await run(1);
  const cpuBefore = process.cpuUsage();
  const r = await run(SECONDS);
  const cpu = process.cpuUsage(cpuBefore);
  const done = Math.max(1, r.requests.total);
  return { rate: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.non2xx, loadUs: (cpu.user + cpu.system) / done };
}

/**
 * `concurrency` loops, each issuing one purchase after another for `seconds`
 * (after a warm-up of a second, not counted); buyer i takes player i modulo
 * the players given.
 */
async function drive(buyers: number, one: (buyer: number) => Promise<boolean>): Promise<Result> {
  const latencies: number[] = [];
  let errors = 0;
  let next = 0;
  const warmUntil = performance.now() + 1000;
  const end = warmUntil + SECONDS * 1000;
  const cpuBefore = process.cpuUsage();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let t = performance.now(); t < end; t = performance.now()) {
        const ok = await one(next++ % buyers);
        const done = performance.now();
        if (t < warmUntil) continue;
        if (ok) latencies.push(done - t);
        else errors++;
      }
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  latencies.sort((a, b) => a - b);
  const rate = latencies.length / SECONDS;
  // Warm-up included, as for the node's figure: an upper bound.
  return { rate, p50: percentile(latencies, 50), p99: percentile(latencies, 99), errors, loadUs: (cpu.user + cpu.system) / Math.max(1, rate * (SECONDS + 1)) };
}

async function main(): Promise<void> {
  const schema = `economy_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await admin.connect();
  } catch (err) {
    console.error(`bench economy needs a PostgreSQL server: ${url} is unreachable (${(err as Error).message}); set DATABASE_URL`);
    process.exit(1);
  }
  await admin.query(`create schema ${schema}`);
  const bare = new pg.Pool({ connectionString: url, max: POOL, options: `-c search_path=${schema}` });
  const rows: (string | number)[][] = [];
  const results: Record<string, Result> = {};
  const record = (label: string, players: number, r: Result) => {
    results[label] = r;
    rows.push([label, players, CONCURRENCY, Math.round(r.rate), r.p50.toFixed(1), r.p99.toFixed(1), r.cpuUs === undefined ? '—' : r.cpuUs.toFixed(0), r.loadUs.toFixed(0), r.errors]);
  };
  let ledgerHolds = false;
  try {
    const node = await forkChild('economy.ts', ['target', JSON.stringify({ schema })]);
    try {
      const listingId = node.info.listingId as string;
      progress(`provisioning ${PLAYERS} players with funded wallets`);
      const { players } = (await node.request('provision', { n: PLAYERS }, 600_000)) as { players: { id: string; token: string }[] };

      const purchaseUrl = `http://127.0.0.1:${node.port}/api/v1/store/purchase`;
      const body = JSON.stringify({ listing_id: listingId });
      const once = async (token: string) => {
        const res = await fetch(purchaseUrl, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`a purchase answered ${res.status}`);
      };
      // The statements the service sends for a purchase, in one transaction, without the service.
      const direct = (ids: string[]) => async (buyer: number) => {
        const client = await bare.connect();
        try {
          await client.query('begin');
          const row = (
            await client.query(
              'select l.id as l_id, l.item_def_id as l_item_def_id, l.price as l_price, l.active as l_active, l.valid_from as l_valid_from, l.valid_until as l_valid_until, w.* from store_listings l join wallets w on w.currency = l.currency and w.player_id = $1 where l.id = $2 for update of w',
              [ids[buyer], listingId],
            )
          ).rows[0];
          const now = new Date();
          await client.query(
            `with changed as (update wallets set balance = $1, updated_at = $2 where id = $3),
              ledger as (insert into transactions (id, wallet_id, amount, balance_after, reason, reference_type, reference_id, metadata, inserted_at) values ($4, $3, $5, $1, 'purchase', 'store_listing', $6, '{}'::jsonb, $2))
              insert into player_items (id, item_def_id, player_id, quantity, metadata, acquired_at, updated_at) values ($7, $8, $9, 1, '{}'::jsonb, $2, $2) returning *`,
            [row.balance - row.l_price, now, row.id, crypto.randomUUID(), -row.l_price, row.l_id, crypto.randomUUID(), row.l_item_def_id, ids[buyer]],
          );
          await client.query('commit');
          return true;
        } catch {
          await client.query('rollback').catch(() => {});
          return false;
        } finally {
          client.release();
        }
      };

      // CPU the node spent over the whole drive (warm-up included) per purchase measured after it: an upper bound.
      const withCpu = async (run: () => Promise<Result>): Promise<Result> => {
        const before = node.cpuMs();
        const r = await run();
        return { ...r, cpuUs: ((node.cpuMs() - before) * 1000) / Math.max(1, r.rate * (SECONDS + 1)) };
      };
      const tokens = players.map((p) => p.token);
      const ids = players.map((p) => p.id);
      // Every token resolves once before anything is measured (the node caches them).
      progress('warming the token cache');
      for (let i = 0; i < players.length; i += CONCURRENCY) await Promise.all(tokens.slice(i, i + CONCURRENCY).map(once));

      progress(`bare pg pool, ${PLAYERS} wallets, ${CONCURRENCY} in flight`);
      record(`bare pg pool (${POOL} connections), same transaction (baseline)`, PLAYERS, await drive(PLAYERS, direct(ids)));
      progress(`svc POST /store/purchase, ${PLAYERS} players, ${CONCURRENCY} in flight`);
      record('svc POST /store/purchase', PLAYERS, await withCpu(() => overHttp(node.port, tokens, body)));
      progress(`bare pg pool, one wallet, ${CONCURRENCY} in flight`);
      record(`bare pg pool (${POOL} connections), one contended wallet (baseline)`, 1, await drive(1, direct(ids)));
      progress(`svc POST /store/purchase, one player, ${CONCURRENCY} in flight`);
      record('svc POST /store/purchase, one contended wallet', 1, await withCpu(() => overHttp(node.port, tokens.slice(0, 1), body)));
      await node.request('stop', {}, 60_000);
    } finally {
      await node.stop();
    }
    const mismatched = await bare.query(
      'select count(*)::int as n from (select w.id from wallets w left join transactions t on t.wallet_id = w.id group by w.id, w.balance having w.balance <> coalesce(sum(t.amount), 0)) m',
    );
    ledgerHolds = mismatched.rows[0].n === 0;
  } finally {
    await bare.end();
    await admin.query(`drop schema if exists ${schema} cascade`);
    await admin.end();
  }

  table(
    `Store purchases on PostgreSQL (${url.replace(/\/\/([^:@/]+):[^@]*@/, '//$1:***@')}), ${SECONDS} s per measurement after 1 s of warm-up, loopback; svc from ${svcRevision()}`,
    ['target', 'players', 'in flight', 'purchases/s', 'p50 ms', 'p99 ms', 'node CPU µs/purchase', 'load generator CPU µs/purchase', 'errors'],
    rows,
  );
  const svc = results['svc POST /store/purchase']!;
  const met = svc.rate >= TARGET_RATE && svc.p99 < TARGET_P99_MS;
  console.log(`\nsvc across ${PLAYERS} players: ${Math.round(svc.rate)} purchases/s, p99 ${svc.p99.toFixed(1)} ms (target ≥ ${TARGET_RATE}/s with p99 < ${TARGET_P99_MS} ms) — ${met ? 'met' : 'NOT met'}`);
  console.log(`every wallet's ledger sums to its balance after the run: ${ledgerHolds ? 'yes' : 'NO'}`);
  if (!ledgerHolds) process.exitCode = 1;
}
