// A benchmark target in its own process: `bare` is a plain `ws` echo server,
// `svc` is the real node (in-memory embedded database, the demo game). The
// parent drives it over IPC: `provision` players and tokens, `memory`
// snapshots (after a forced GC), tick `lateness` of the match loop.
import { createServer } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { WebSocketServer } from 'ws';
import { openEmbedded } from '../host/database';
import { loadGameDirectory } from '../host/game';
import type { LiveHost } from '../host/live';
import { startServer } from '../host/server';
import { jsonb } from '../runtime/database';
import { silentLogger } from '../runtime/log';
import { parseSettings } from '../runtime/settings';
import { hashToken, newToken } from '../runtime/tokens';

const here = path.dirname(fileURLToPath(import.meta.url));
const kind = process.argv[2];
/** Optional JSON: `{settings, gameDir}` overriding the defaults below (bench/matches.ts, bench/hostile.ts). */
const overrides = JSON.parse(process.argv[3] ?? '{}') as { settings?: Record<string, unknown>; gameDir?: string };
const send = (m: unknown) => process.send!(m);

function memory() {
  (globalThis as { gc?: () => void }).gc?.();
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  const cpu = process.cpuUsage();
  return { rss: m.rss, heap: m.heapUsed, external: m.external + m.arrayBuffers, cpuMs: (cpu.user + cpu.system) / 1000 };
}

if (kind === 'bare') {
  const server = createServer();
  const wss = new WebSocketServer({ server, perMessageDeflate: false });
  wss.on('connection', (ws) => ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary })));
  server.listen(0, '127.0.0.1', () => send({ port: (server.address() as { port: number }).port }));
  process.on('message', (m: { op: string }) => {
    if (m.op === 'exit') process.exit(0);
    if (m.op === 'memory') send({ op: 'memory', ...memory() });
    if (m.op === 'cpu') send({ op: 'cpu', cpuMs: (process.cpuUsage().user + process.cpuUsage().system) / 1000 });
  });
} else {
  const { settings } = parseSettings({
    pbkdf2_iterations: 1000,
    rate_limits: { ws_connect: { limit: 1_000_000, window: 1000 }, join: { limit: 1_000_000, window: 1000 }, api: { limit: 1_000_000, window: 1000 } },
    ws_idle_timeout_ms: 3_600_000,
    ws_idle_auth_timeout_ms: 600_000,
    match_max: 100_000,
    matchmaker_max_queue: 1_000_000,
    log_level: 'error',
    ...overrides.settings,
  });
  const database = await openEmbedded({});
  const game = loadGameDirectory(overrides.gameDir ?? path.join(here, '../examples/demo-game'), {}, silentLogger);
  const running = await startServer({ settings, database, log: silentLogger, live: { game } });
  await running.ready;
  const live = running.ctx.live as LiveHost;
  send({ port: running.port });

  let provisioned = 0;
  process.on('message', async (m: { op: string; n?: number }) => {
    // A clean exit lets --cpu-prof write its profile.
    if (m.op === 'exit') process.exit(0);
    if (m.op === 'cpu') send({ op: 'cpu', cpuMs: (process.cpuUsage().user + process.cpuUsage().system) / 1000 });
    if (m.op === 'memory') send({ op: 'memory', ...memory(), sessions: live.gateway.sessions.size, matches: live.matches.size });
    if (m.op === 'lateness-reset') {
      live.matches.resetLateness();
      send({ op: 'lateness-reset' });
    }
    if (m.op === 'lateness') {
      send({ op: 'lateness', ...live.matches.lateness(), matches: live.matches.size });
    }
    if (m.op === 'provision') {
      // Players and access tokens straight into the database, in batches: the
      // benchmark measures the gateway, not password hashing.
      const tokens: string[] = [];
      const db = running.ctx.db;
      const now = Date.now();
      for (let done = 0; done < m.n!; ) {
        const batch = Math.min(500, m.n! - done);
        const players = [];
        const rows = [];
        for (let i = 0; i < batch; i++) {
          const id = running.ctx.ids.uuid();
          const token = newToken();
          tokens.push(token);
          players.push({ id, username: `bench_${provisioned++}`, display_name: null, hashed_password: null, metadata: jsonb({}), updated_at: new Date(now) });
          rows.push({ id: running.ctx.ids.uuid(), user_id: id, token: await hashToken(token), context: 'access' as const, family_id: null, expires_at: new Date(now + 3_600_000) });
        }
        await db.insertInto('players').values(players).execute();
        await db.insertInto('player_tokens').values(rows).execute();
        done += batch;
      }
      send({ op: 'provision', tokens });
    }
  });
}
