// `npm run bench -- cluster [--seconds 5] [--sockets 1000] [--connections 64] [--matches 300] [--listeners 100]`:
// the same node as one process (no Redis, today's deployment) and as
// `workers: 2` (two processes on the one port, sharing state through Redis),
// in one run, over one PostgreSQL database of its own (a fresh database on
// the server at DATABASE_URL, default the local one, dropped at the end).
// Measured through the port (the load generators share the machine's cores
// with the targets, as they would on any one box):
//   - WebSocket round trips (`session.heartbeat`, each socket at most 50 a
//     second, under the gateway's 60 frames per second per socket), from the
//     ws benchmark's load generator in a process of its own (bench/_ws-load.ts);
//   - authenticated REST reads (`GET /players/me`, keep-alive connections,
//     autocannon as in the http benchmark);
// and, from this process:
//   - matches: one-player matches of a script that works on every tick, and
//     the share of their `match.state` frames (10 per second each) delivered;
//   - chat fan-out: one sender, listeners on every process, the time from
//     send to each delivery.
// Then the leaderboard store decision's figures (docs/decisions/0041): one
// submission to an in-memory board, the same as a Redis sorted-set write and
// rank read, and the replication cost of a submission on the bus.
// Needs Redis (REDIS_URL, default redis://127.0.0.1:6379) and PostgreSQL.
import http from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { WebSocket } from 'ws';
import autocannon from 'autocannon';
import { forkChild, startHost, svcImport, svcRevision, type Child } from './_children';
import { numberOption } from './_options';
import { progress, table } from './_report';

const SECONDS = numberOption('seconds', 5);
const SOCKETS = numberOption('sockets', 1000);
const CONNECTIONS = numberOption('connections', 64);
const MATCHES = numberOption('matches', 300);
const LISTENERS = numberOption('listeners', 100);
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const SERVER_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

interface Figures {
  wsPerSec: number;
  wsP99: number;
  restPerSec: number;
  restP99: number;
  matchStates: number;
  matchShare: number;
  chatP50: number;
  chatP99: number;
}

function quantile(values: number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

function call(base: string, method: string, p: string, token?: string, body?: unknown, agent: http.Agent | false = false): Promise<{ status: number; body: any }> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(`/api/v1${p}`, base), {
      method,
      agent,
      headers: {
        ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}),
        ...(token ? { authorization: `Bearer ${token}` } : {}),
      },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : null }));
    });
    req.on('error', reject);
    if (payload) req.write(payload);
    req.end();
  });
}

let cids = 0;

class Socket {
  readonly ws: WebSocket;
  onFrame: (f: any) => void = () => {};

  private constructor(ws: WebSocket) {
    this.ws = ws;
    ws.on('message', (d: Buffer) => this.onFrame(JSON.parse(d.toString())));
  }

  static async open(port: number, token: string): Promise<Socket> {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, { perMessageDeflate: false });
    await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
    const s = new Socket(ws);
    await s.request({ type: 'session.connect', payload: { token } });
    return s;
  }

  request(frame: Record<string, unknown>): Promise<any> {
    return new Promise((resolve, reject) => {
      const cid = `c${++cids}`;
      const before = this.onFrame;
      this.onFrame = (f) => {
        if (f.cid === cid) {
          this.onFrame = before;
          resolve(f);
        } else if (f.type === 'error' && f.cid === undefined) {
          reject(new Error(`refused: ${JSON.stringify(f.payload)}`));
        } else before(f);
      };
      this.ws.send(JSON.stringify({ ...frame, cid }));
    });
  }
}

async function measure(label: string, target: Child, load: Child, tokens: string[]): Promise<Figures> {
  const port = Number(new URL(target.url).port);
  const stopAt = () => performance.now() + SECONDS * 1000;

  progress(`${label}: WebSocket round trips`);
  // Several sockets per player: a player may hold many.
  const socketTokens = Array.from({ length: SOCKETS }, (_, i) => tokens[i % tokens.length]!);
  const ws = await load.request('heartbeat', { port, tokens: socketTokens, connections: SOCKETS, seconds: SECONDS, paceMs: 20 }, 120_000);
  if (ws.errors > 0) throw new Error(`${ws.errors} heartbeats refused`);

  progress(`${label}: authenticated REST reads`);
  const reads = await autocannon({ url: `${target.url}/api/v1/players/me`, headers: { authorization: `Bearer ${tokens[0]}` }, connections: CONNECTIONS, duration: SECONDS });
  if (reads.non2xx + reads.errors > 0) throw new Error(`${reads.non2xx + reads.errors} reads failed`);

  progress(`${label}: ${MATCHES} matches`);
  const players = await Promise.all(tokens.slice(0, MATCHES).map((t) => Socket.open(port, t)));
  let states = 0;
  for (const s of players) {
    const joined = await s.request({ type: 'match.find_or_create', payload: { mode: 'solo' } });
    if (joined.type !== 'match.joined') throw new Error(`match.find_or_create: ${JSON.stringify(joined)}`);
    s.onFrame = (f) => void (f.type === 'match.state' && states++);
  }
  await new Promise((r) => setTimeout(r, 1000));
  states = 0;
  const matchStarted = performance.now();
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  const matchSeconds = (performance.now() - matchStarted) / 1000;
  const matchStates = states / matchSeconds;
  for (const s of players) s.ws.close();

  progress(`${label}: chat fan-out to ${LISTENERS} listeners`);
  const listeners = await Promise.all(tokens.slice(0, LISTENERS).map((t) => Socket.open(port, t)));
  const sender = await Socket.open(port, tokens[LISTENERS]!);
  const chatLat: number[] = [];
  for (const l of [...listeners, sender]) await l.request({ type: 'chat.join', payload: { channel_id: 'global:bench' } });
  for (const l of listeners) {
    l.onFrame = (f) => {
      if (f.type === 'chat.message') chatLat.push(Date.now() - Number(f.payload.content));
    };
  }
  const until = stopAt();
  while (performance.now() < until) {
    sender.ws.send(JSON.stringify({ type: 'chat.send', payload: { channel_id: 'global:bench', content: String(Date.now()) } }));
    await new Promise((r) => setTimeout(r, 100));
  }
  await new Promise((r) => setTimeout(r, 500));
  for (const l of [...listeners, sender]) l.ws.close();

  return {
    wsPerSec: ws.rate,
    wsP99: ws.p99,
    restPerSec: reads.requests.average,
    restP99: reads.latency.p99,
    matchStates,
    matchShare: matchStates / (MATCHES * 10),
    chatP50: quantile(chatLat, 0.5),
    chatP99: quantile(chatLat, 0.99),
  };
}

/** The leaderboard store figures: a local board, Redis sorted sets, and replication over the bus. */
async function leaderboardFigures(): Promise<(string | number)[][]> {
  const { Leaderboards } = await svcImport<typeof import('../runtime/leaderboards/leaderboards')>('runtime/leaderboards/leaderboards.ts');
  const { parseSettings } = await svcImport<typeof import('../runtime/contracts/settings')>('runtime/contracts/settings.ts');
  const ids = Array.from({ length: 10_000 }, () => randomUUID());
  const boards = new Leaderboards(parseSettings({}).settings);
  const N = 50_000;
  let t = performance.now();
  for (let i = 0; i < N; i++) boards.submit('b', ids[i % ids.length]!, BigInt(i), 0n, i);
  const local = ((performance.now() - t) * 1000) / N;
  const redis = new Redis(REDIS_URL);
  const sub = new Redis(REDIS_URL);
  const key = `svc-bench-${process.pid}`;
  const M = 5000;
  t = performance.now();
  for (let i = 0; i < M; i++) await redis.multi().zadd(key, 'GT', i, ids[i % ids.length]!).zrevrank(key, ids[i % ids.length]!).exec();
  const zset = ((performance.now() - t) * 1000) / M;
  await redis.del(key);
  const replica = new Leaderboards(parseSettings({}).settings);
  let applied = 0;
  let done!: () => void;
  const all = new Promise<void>((resolve) => (done = resolve));
  await sub.subscribe(key);
  sub.on('message', (_c, text) => {
    const m = JSON.parse(text);
    replica.applyRemote('b', m.p, BigInt(m.v), 0n, m.t);
    if (++applied === M) done();
  });
  t = performance.now();
  for (let i = 0; i < M; i++) {
    boards.submit('b', ids[i % ids.length]!, BigInt(N + i), 0n, N + i);
    void redis.publish(key, JSON.stringify({ s: i + 1, b: 'b', p: ids[i % ids.length], v: String(N + i), u: '0', t: N + i }));
  }
  const publish = ((performance.now() - t) * 1000) / M;
  await all;
  const everywhere = ((performance.now() - t) * 1000) / M;
  redis.disconnect();
  sub.disconnect();
  return [
    ['in-memory board: submit and rank (µs, mean over 50,000)', local.toFixed(2)],
    ['Redis sorted set: ZADD GT + ZREVRANK, one round trip (µs, mean over 5,000)', zset.toFixed(1)],
    ['replicated board: submit and publish on the submitting node (µs)', publish.toFixed(2)],
    ['replicated board: until a second node applied all 5,000 (µs per submission)', everywhere.toFixed(2)],
  ];
}

async function main(): Promise<void> {
  const dbName = `svc_bench_cluster_${process.pid}`;
  const admin = new pg.Client({ connectionString: SERVER_URL });
  await admin.connect();
  await admin.query(`create database ${dbName}`);
  await admin.end();
  const dbUrl = Object.assign(new URL(SERVER_URL), { pathname: `/${dbName}` }).toString();
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-bench-cluster-'));
  writeFileSync(path.join(dir, 'config.lua'), 'return { solo = "solo.lua" }');
  writeFileSync(
    path.join(dir, 'solo.lua'),
    `match_size = 1
max_players = 1
quick_play = true
function init(config) return { tick = 0, acc = 0 } end
function join(player_id, state) return state end
function leave(player_id, state) return state end
function handle_input(player_id, input, state) return state end
function tick(state)
  state.tick = state.tick + 1
  local acc = 0
  for i = 1, 3000 do acc = acc + (i * state.tick) % 7 end
  state.acc = acc
  return state
end
function get_state(player_id, state) return { tick = state.tick, acc = state.acc } end
`,
  );
  const prefix = `svc-bench-${process.pid}:`;
  const base = { pbkdf2_iterations: 1000, rate_limits: { register: { limit: 100_000, window: 1000 }, api: { limit: 1_000_000, window: 1000 }, ws_connect: { limit: 100_000, window: 1000 } }, game_modes: { solo: { match_size: 1, max_players: 1, quick_play: true, chat_channels: ['bench'] } }, chat_send_rate: { limit: 100, window: 1000 }, match_max: 100_000 };
  const results: { label: string; f: Figures }[] = [];
  const load = await forkChild('_ws-load.ts');
  try {
    for (const [label, workers, redis] of [['1 process', 1, false], ['2 processes (workers: 2)', 2, true]] as const) {
      const config = path.join(dir, `w${workers}.json`);
      writeFileSync(config, JSON.stringify({ ...base, workers }));
      progress(`${label}: starting`);
      const target = await startHost({ DATABASE_URL: dbUrl, SVC_CONFIG: config, GAME_DIR: dir, ...(redis ? { REDIS_URL, REDIS_PREFIX: prefix } : {}) });
      try {
        await target.ready(120_000);
        while (workers > 1 && !target.events.has('workers_started')) await new Promise((r) => setTimeout(r, 100));
        const need = Math.max(CONNECTIONS, MATCHES, LISTENERS + 1);
        const tokens: string[] = [];
        for (let i = 0; i < need; i += 50) {
          const batch = await Promise.all(Array.from({ length: Math.min(50, need - i) }, (_, j) =>
            call(target.url, 'POST', '/auth/register', undefined, { username: `bench_${workers}_${i + j}_${process.pid}`, password: 'correct horse battery' }),
          ));
          tokens.push(...batch.map((r) => r.body.access_token as string));
        }
        results.push({ label, f: await measure(label, target, load, tokens) });
      } finally {
        await target.stop(15_000);
      }
    }
    const lb = await leaderboardFigures();
    const [one, two] = [results[0]!.f, results[1]!.f];
    const ratio = (a: number, b: number) => `${(b / a).toFixed(2)}×`;
    console.log(`\nsvc cluster benchmark: ${svcRevision()}; ${availableParallelism()} cores, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')} at the end; the load generator runs on the same cores`);
    table(
      `${SECONDS} s per workload; ${SOCKETS} sockets (each at most 50 round trips a second), ${CONNECTIONS} keep-alive connections, ${MATCHES} one-player matches (10 Hz), ${LISTENERS} chat listeners`,
      ['workload', ...results.map((r) => r.label), '2 / 1'],
      [
        ['ws round trips per s', one.wsPerSec.toFixed(0), two.wsPerSec.toFixed(0), ratio(one.wsPerSec, two.wsPerSec)],
        ['ws round trip p99 (ms)', one.wsP99.toFixed(1), two.wsP99.toFixed(1), ratio(one.wsP99, two.wsP99)],
        ['authenticated reads per s', one.restPerSec.toFixed(0), two.restPerSec.toFixed(0), ratio(one.restPerSec, two.restPerSec)],
        ['authenticated read p99 (ms)', one.restP99.toFixed(1), two.restP99.toFixed(1), ratio(one.restP99, two.restP99)],
        ['match.state frames per s', one.matchStates.toFixed(0), two.matchStates.toFixed(0), ratio(one.matchStates, two.matchStates)],
        ['match.state share delivered', `${(one.matchShare * 100).toFixed(1)} %`, `${(two.matchShare * 100).toFixed(1)} %`, ''],
        ['chat fan-out p50 (ms)', one.chatP50.toFixed(1), two.chatP50.toFixed(1), ratio(one.chatP50, two.chatP50)],
        ['chat fan-out p99 (ms)', one.chatP99.toFixed(1), two.chatP99.toFixed(1), ratio(one.chatP99, two.chatP99)],
      ],
    );
    table('leaderboard store (docs/decisions/0041)', ['operation', 'figure'], lb);
  } finally {
    await load.stop(5000);
    rmSync(dir, { recursive: true, force: true });
    const drop = new pg.Client({ connectionString: SERVER_URL });
    await drop.connect();
    await drop.query(`drop database if exists ${dbName} with (force)`);
    await drop.end();
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
