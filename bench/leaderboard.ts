// `npm run bench -- leaderboard [--entries 1000000] [--players 1000] [--seconds 8] [--paced 5000] [--read-rate 1000]`
//
// One board of a million entries in the node's memory (the node runs in a
// child process, this file with `target`, on the PostgreSQL server at
// DATABASE_URL, default the local test database, in a fresh schema):
// - submits per second through the service in-process (filling the board),
//   then over REST (`POST /api/v1/leaderboards/:id`) and from Lua
//   (`POST /api/v1/rpc/game.submit`, whose rpc.lua calls
//   game.leaderboard.submit) from `--players` concurrent players, one
//   connection each, every request a random player and score;
// - `GET …?limit=100` and `GET …/around/:player_id` from 100 connections
//   while the REST submit load runs: closed loop (saturation), then paced
//   (`--read-rate`, default 1,000/s, under `--paced` submits/s) for the p99;
// - heap bytes per entry (JavaScript heap plus array buffers, after a
//   forced collection, against the empty board);
// - the time to flush the whole board to PostgreSQL.
// Baseline in the same run, in the node: the same reads and a score change
// on a plain sorted array of the same entries.
import autocannon from 'autocannon';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { forkChild, serveParent, svcImport, svcRevision, type Child } from './_children';
import { progress, table } from './_report';
import { numberOption } from './_options';

const ENTRIES = numberOption('entries', 1_000_000);
const PLAYERS = numberOption('players', 1000);
const SECONDS = numberOption('seconds', 8);
const READERS = 100;
/** Submits per second, paced, while the reads are measured: a closed loop of every player would measure queueing, not the reads. */
const PACED = numberOption('paced', 5000);
/**
 * Reads per second across the 100 reading connections (ten a second each, a
 * client refreshing a leaderboard screen) for the latency target; the
 * closed-loop row beside it shows the saturation throughput.
 */
const READ_RATE = numberOption('read-rate', 1000);
const BOARD = 'bench';
const TARGET_SUBMITS = 20_000;
const TARGET_P99_MS = 5;
const TARGET_BYTES = 150;

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

if (process.argv[2] === 'target') await target(JSON.parse(process.argv[3]!) as { schema: string });
else await main();

/** The player id of filler entry i, the same on both sides of the database (`md5(i::text)::uuid`). */
function fillerId(i: number): string {
  const h = createHash('md5').update(String(i)).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function randomScore(): bigint {
  return BigInt(Math.floor(Math.random() * 1_000_000_000));
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

/** p50 and p99 in µs of `op` run `n` times. */
function timed(n: number, op: (i: number) => void): { p50: number; p99: number } {
  const us: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    op(i);
    us.push((performance.now() - t) * 1000);
  }
  us.sort((a, b) => a - b);
  return { p50: percentile(us, 50), p99: percentile(us, 99) };
}

function heapBytes(): number {
  globalThis.gc?.();
  globalThis.gc?.();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

async function target({ schema }: { schema: string }): Promise<void> {
  const { openPostgres } = await svcImport<typeof import('../host/infra/database')>('host/infra/database.ts');
  const { createHost } = await svcImport<typeof import('../host/host')>('host/host.ts');
  const { silentLogger } = await svcImport<typeof import('../runtime/platform/log')>('runtime/platform/log.ts');
  const { parseSettings } = await svcImport<typeof import('../runtime/contracts/settings')>('runtime/contracts/settings.ts');
  const { hashToken, newToken } = await svcImport<typeof import('../runtime/accounts/tokens')>('runtime/accounts/tokens.ts');
  const open = { limit: 1_000_000_000, window: 1000 };
  const { settings } = parseSettings({
    rate_limits: { api: open },
    allow_empty_game: true,
    log_level: 'error',
    leaderboard_client_submit: 'all',
    // Nothing flushes during the loads; the flush is measured on its own.
    leaderboard_flush_interval_ms: 3_600_000,
  });
  const gameDir = mkdtempSync(path.join(tmpdir(), 'svc-bench-leaderboard-'));
  writeFileSync(path.join(gameDir, 'rpc.lua'), 'rpc = {}\nfunction rpc.submit(player_id, params) return { ok = game.leaderboard.submit(params.board, player_id, params.score) } end\n');
  const database = openPostgres({ url, schema, poolSize: settings.db_pool_size, connectTimeoutMs: settings.db_connect_timeout_ms, statementTimeoutMs: 600_000 });
  const running = await createHost({ settings, database, log: silentLogger, gameDir });
  await running.ready;
  const { ctx } = running;
  serveParent(
    { port: running.port },
    {
      fill: async (m: { n: number }) => {
        const { sql } = await import('kysely');
        // The filler players exist, so the flush writes every entry.
        await sql`insert into players (id, username) select md5(i::text)::uuid, 'lb' || i from generate_series(1, ${m.n}::int) i`.execute(ctx.db);
        const before = heapBytes();
        let ms = 0;
        // Ids and scores made a chunk at a time, outside the timing, and collectable before the heap is read again.
        for (let from = 0; from < m.n; from += 10_000) {
          const chunk = Array.from({ length: Math.min(10_000, m.n - from) }, (_, i) => ({ id: fillerId(from + i + 1), score: randomScore() }));
          const started = performance.now();
          for (const e of chunk) ctx.leaderboards.submit(BOARD, e.id, e.score, 0n, Date.now());
          ms += performance.now() - started;
        }
        const bytes = heapBytes() - before;
        return { rate: m.n / (ms / 1000), bytesPerEntry: bytes / m.n };
      },
      provision: async (m: { n: number }) => {
        const players: { id: string; token: string }[] = [];
        const rows = [];
        const tokens = [];
        for (let i = 0; i < m.n; i++) {
          const id = ctx.ids.uuid();
          const token = newToken();
          players.push({ id, token });
          rows.push({ id, username: `submitter_${i}`, updated_at: new Date() });
          tokens.push({ id: ctx.ids.uuid(), user_id: id, token: await hashToken(token), context: 'access' as const, family_id: null, expires_at: new Date(Date.now() + 3_600_000) });
        }
        for (let i = 0; i < m.n; i += 500) {
          await ctx.db.insertInto('players').values(rows.slice(i, i + 500)).execute();
          await ctx.db.insertInto('player_tokens').values(tokens.slice(i, i + 500)).execute();
        }
        for (const p of players) ctx.leaderboards.submit(BOARD, p.id, randomScore(), 0n, Date.now());
        return { players };
      },
      baseline: async (m: { n: number }) => {
        // The same entries as a plain array kept sorted (score desc, id asc), found by binary search.
        const board = [...ctx.leaderboards.boards()].find((b) => b.id === BOARD)!;
        const sorted = [...board.entries()].map((e) => ({ id: e.playerId, score: e.score }));
        const before = (a: { id: string; score: bigint }, b: { id: string; score: bigint }) => a.score > b.score || (a.score === b.score && a.id < b.id);
        const position = (e: { id: string; score: bigint }) => {
          let lo = 0;
          let hi = sorted.length;
          while (lo < hi) {
            const mid = (lo + hi) >> 1;
            if (before(sorted[mid]!, e)) lo = mid + 1;
            else hi = mid;
          }
          return lo;
        };
        const scoreOf = new Map(sorted.map((e) => [e.id, e.score]));
        const someone = () => sorted[Math.floor(Math.random() * sorted.length)]!.id;
        const out: Record<string, { p50: number; p99: number }> = {};
        out['board top-100'] = timed(m.n, () => void ctx.leaderboards.top(BOARD, 100));
        out['sorted array top-100'] = timed(m.n, () => void sorted.slice(0, 100).map((e, i) => ({ ...e, rank: i + 1 })));
        out['board around ±5'] = timed(m.n, () => void ctx.leaderboards.around(BOARD, someone(), 5));
        out['sorted array around ±5'] = timed(m.n, () => {
          const id = someone();
          const at = position({ id, score: scoreOf.get(id)! });
          void sorted.slice(Math.max(0, at - 5), at + 6).map((e, i) => ({ ...e, rank: Math.max(0, at - 5) + i + 1 }));
        });
        out['board score change'] = timed(m.n, () => void ctx.leaderboards.submit(BOARD, someone(), randomScore(), 0n, Date.now()));
        out['sorted array score change'] = timed(m.n, () => {
          const id = someone();
          const old = { id, score: scoreOf.get(id)! };
          sorted.splice(position(old), 1);
          const next = { id, score: randomScore() };
          scoreOf.set(id, next.score);
          sorted.splice(position(next), 0, next);
        });
        return { ops: out };
      },
      flush: async () => {
        const started = performance.now();
        const outcome = await running.leaderboardFlush.flush();
        return { ms: performance.now() - started, ...outcome };
      },
      stop: async () => {
        await running.close();
        rmSync(gameDir, { recursive: true, force: true });
      },
    },
  );
}

interface Load {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  cpuUs: number;
}

/**
 * A load generator in a process of its own that sends `rate` requests per
 * second from `connections` connections, paced evenly, each by a random
 * player (bench/_paced-load.ts). Warmed when made; `run` times one window.
 */
async function pacedLoad(node: Child, opts: { rate: number; connections: number; request: (player: { id: string; token: string }) => { path: string; body?: unknown }; players: { id: string; token: string }[] }) {
  const generator = await forkChild('_paced-load.ts');
  // Several per player, so submits keep changing scores.
  const requests = [...opts.players, ...opts.players, ...opts.players, ...opts.players].map((p) => {
    const r = opts.request(p);
    return { path: r.path, headers: { authorization: `Bearer ${p.token}` }, ...(r.body !== undefined ? { body: JSON.stringify(r.body) } : {}) };
  });
  await generator.request('warm', { url: node.url, connections: opts.connections, requests }, 600_000);
  return {
    async run(): Promise<Load> {
      const before = node.cpuMs();
      const r = (await generator.request('paced', { rate: opts.rate, seconds: SECONDS }, 600_000)) as { rps: number; p50: number; p99: number; errors: number };
      return { ...r, p50: Number(r.p50.toFixed(1)), p99: Number(r.p99.toFixed(1)), cpuUs: ((node.cpuMs() - before) * 1000) / Math.max(1, r.rps * SECONDS) };
    },
    stop: () => generator.stop(),
  };
}

function load(node: Child, opts: { connections: number; seconds: number; rate?: number; request: (player: { id: string; token: string }) => { method: 'GET' | 'POST'; path: string; body?: unknown }; players: { id: string; token: string }[] }): Promise<Load> {
  const before = node.cpuMs();
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url: node.url,
        connections: opts.connections,
        duration: opts.seconds,
        ...(opts.rate ? { overallRate: opts.rate } : {}),
        requests: [
          {
            setupRequest: (req) => {
              const player = opts.players[Math.floor(Math.random() * opts.players.length)]!;
              const r = opts.request(player);
              return {
                ...req,
                method: r.method,
                path: r.path,
                headers: { authorization: `Bearer ${player.token}`, 'content-type': 'application/json' },
                ...(r.body !== undefined ? { body: JSON.stringify(r.body) } : {}),
              };
            },
          },
        ],
      },
      (err, r) => {
        if (err) return reject(err);
        const cpuUs = ((node.cpuMs() - before) * 1000) / Math.max(1, r.requests.total);
        resolve({ rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.non2xx, cpuUs });
      },
    );
  });
}

async function main(): Promise<void> {
  const schema = `lb_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`create schema ${schema}`);
  const loadBefore = loadavg()[0]!;
  let node: Child | null = null;
  try {
    progress('starting the node on PostgreSQL');
    node = await forkChild('leaderboard.ts', ['target', JSON.stringify({ schema })], { nodeFlags: ['--expose-gc', '--max-old-space-size=4096'] });
    progress(`filling one board with ${ENTRIES} entries in process`);
    const fill = (await node.request('fill', { n: ENTRIES }, 1_800_000)) as { rate: number; bytesPerEntry: number };
    // Written out before any load, as a node that has been running would
    // have: the loads then meet only the flushes of their own submits.
    progress('flushing the whole board to PostgreSQL');
    const flush = (await node.request('flush', {}, 1_800_000)) as { ms: number; written: number; dropped: number; failed: number };
    progress(`provisioning ${PLAYERS} players with tokens`);
    const { players } = (await node.request('provision', { n: PLAYERS })) as { players: { id: string; token: string }[] };
    const submitRest = (p: { id: string }) => ({ method: 'POST' as const, path: `/api/v1/leaderboards/${BOARD}`, body: { score: Math.floor(Math.random() * 1e9) } });
    const submitLua = () => ({ method: 'POST' as const, path: '/api/v1/rpc/game.submit', body: { params: { board: BOARD, score: Math.floor(Math.random() * 1e9) } } });
    progress('warm-up');
    await load(node, { connections: 100, seconds: 2, players, request: submitRest });
    progress(`REST submits, ${PLAYERS} connections`);
    const rest = await load(node, { connections: PLAYERS, seconds: SECONDS, players, request: submitRest });
    progress(`Lua submits, ${PLAYERS} connections`);
    await load(node, { connections: 100, seconds: 2, players, request: submitLua });
    const lua = await load(node, { connections: PLAYERS, seconds: SECONDS, players, request: submitLua });
    const readsUnder = async (request: Parameters<typeof load>[1]['request']) => {
      const [saturated] = await Promise.all([load(node!, { connections: READERS, seconds: SECONDS, players, request }), load(node!, { connections: PLAYERS, seconds: SECONDS, players, request: submitRest })]);
      const readers = await pacedLoad(node!, { rate: READ_RATE, connections: READERS, players, request });
      const submitters = await pacedLoad(node!, { rate: PACED, connections: PLAYERS, players, request: submitRest });
      try {
        const [reads, submits] = await Promise.all([readers.run(), submitters.run()]);
        return { saturated, paced: reads, submits };
      } finally {
        await Promise.all([readers.stop(), submitters.stop()]);
      }
    };
    progress(`top-100 reads at ${READERS} connections under REST submits (closed loop, then ${READ_RATE} reads/s under ${PACED} submits/s)`);
    const topUnder = await readsUnder(() => ({ method: 'GET', path: `/api/v1/leaderboards/${BOARD}?limit=100` }));
    progress(`around reads at ${READERS} connections under REST submits (closed loop, then ${READ_RATE} reads/s under ${PACED} submits/s)`);
    const aroundUnder = await readsUnder((p) => ({ method: 'GET', path: `/api/v1/leaderboards/${BOARD}/around/${p.id}?range=5` }));
    progress('baseline: the same operations on a plain sorted array, in the node');
    const { ops } = (await node.request('baseline', { n: 2000 }, 1_800_000)) as { ops: Record<string, { p50: number; p99: number }> };

    const loadAfter = loadavg()[0]!;
    table(
      `Leaderboard benchmark: one board of ${ENTRIES.toLocaleString('en')} entries, ${PLAYERS} submitting players, ${SECONDS} s per load; load average ${loadBefore.toFixed(1)} before, ${loadAfter.toFixed(1)} after; svc from ${svcRevision()}`,
      ['measure', 'rate /s', 'p50 ms', 'p99 ms', 'errors', 'node CPU µs/req', 'target'],
      [
        ['submits in process (filling the board)', Math.round(fill.rate), '', '', 0, '', `≥ ${TARGET_SUBMITS.toLocaleString('en')}/s: ${fill.rate >= TARGET_SUBMITS ? 'met' : 'NOT met'}`],
        [`REST submits, ${PLAYERS} connections`, Math.round(rest.rps), rest.p50, rest.p99, rest.errors, rest.cpuUs.toFixed(1), ''],
        [`Lua submits (rpc.lua), ${PLAYERS} connections`, Math.round(lua.rps), lua.p50, lua.p99, lua.errors, lua.cpuUs.toFixed(1), ''],
        ...([
          ['top-100', topUnder],
          ['around ±5', aroundUnder],
        ] as const).flatMap(([name, r]) => [
          [`GET ${name}, ${READERS} connections reading in a closed loop, under ${PLAYERS} closed-loop submitters`, Math.round(r.saturated.rps), r.saturated.p50, r.saturated.p99, r.saturated.errors, '', 'saturation: informational'],
          [`GET ${name}, ${READERS} connections reading ${READ_RATE}/s, under ${Math.round(r.submits.rps)} submits/s from ${PLAYERS} players`, Math.round(r.paced.rps), r.paced.p50, r.paced.p99, r.paced.errors, '', `p99 < ${TARGET_P99_MS} ms: ${r.paced.p99 < TARGET_P99_MS ? 'met' : 'NOT met'}`],
        ]),
        ...Object.entries(ops).map(([name, o]) => [`in process: ${name}`, '', (o.p50 / 1000).toFixed(4), (o.p99 / 1000).toFixed(4), 0, '', name.startsWith('sorted') ? 'baseline' : '']),
        ['heap bytes per entry', Math.round(fill.bytesPerEntry), '', '', 0, '', `< ${TARGET_BYTES}: ${fill.bytesPerEntry < TARGET_BYTES ? 'met' : 'NOT met'}`],
        [`flush of the whole board to PostgreSQL (${flush.written.toLocaleString('en')} rows, ${flush.failed} failed)`, Math.round(flush.written / (flush.ms / 1000)), (flush.ms).toFixed(0), '', flush.failed, '', 'informational'],
      ],
    );
  } finally {
    if (node) {
      await node.request('stop').catch(() => {});
      await node.stop();
    }
    await admin.query(`drop schema if exists ${schema} cascade`);
    await admin.end();
  }
}
