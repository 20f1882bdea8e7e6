// A benchmark target in its own process: `bare` is a plain `ws` echo server
// (`bare-json` one that parses each frame and answers in JSON),
// `bare-game` a plain `ws` server doing the least a game backend must (see
// below), `svc` is the real node (in-memory embedded database unless told otherwise, the demo game). The
// parent drives it over IPC: `provision` players and tokens, `memory`
// snapshots (after a forced GC), tick `lateness` of the match loop. CPU time
// the parent reads from outside (bench/_children.ts).
import { randomBytes, randomUUID } from 'node:crypto';
import { openSync, writeSync } from 'node:fs';
import { createServer } from 'node:http';
import path from 'node:path';
import { WebSocketServer, type WebSocket } from 'ws';
import type { LiveHost } from '../host/realtime/live';
import { serveParent, svcImport, svcRoot } from './_children';

const kind = process.argv[2];
/**
 * Optional JSON: `{settings, gameDir, postgres}` overriding the defaults below
 * (bench/matches.ts, bench/hostile.ts); `postgres` puts the node on that
 * server, in a schema the caller created (bench/connect-storm.ts).
 */
/**
 * `productionLog` gives the node the production JSON logger at the settings'
 * level, writing each line synchronously to /dev/null (as to a piped stdout)
 * instead of the silent one. `stateBytes` is the `match.state` frame size
 * `bare-game` sends (bench/side-by-side.ts copies svc's).
 */
const overrides = JSON.parse(process.argv[3] ?? '{}') as {
  settings?: Record<string, unknown>;
  gameDir?: string;
  postgres?: { url: string; schema: string };
  productionLog?: boolean;
  stateBytes?: number;
};

function memory() {
  (globalThis as { gc?: () => void }).gc?.();
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed, external: m.external + m.arrayBuffers };
}

if (kind === 'bare' || kind === 'bare-json') {
  // `bare-json` answers like svc's heartbeat, parsing each frame and writing a reply: the floor of any JSON protocol.
  const json = kind === 'bare-json';
  const server = createServer();
  const wss = new WebSocketServer({ server, perMessageDeflate: false });
  wss.on('connection', (ws) =>
    ws.on('message', (data, isBinary) => {
      if (!json) return ws.send(data, { binary: isBinary });
      const frame = JSON.parse(data.toString()) as { type: string; cid?: unknown };
      ws.send(JSON.stringify({ type: frame.type, cid: frame.cid, payload: { ts: Date.now() } }));
    }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  serveParent({ port: (server.address() as { port: number }).port }, { memory });
} else if (kind === 'bare-game') {
  // The floor for the service's figures: what any backend must do for the
  // same frames, and nothing else. A token is one Map lookup, an
  // authenticated socket one Map entry, a match a 10 Hz timer sending one
  // state frame to both players, every frame one JSON.parse.
  const tokens = new Map<string, string>();
  const sessions = new Map<WebSocket, { player: string; match: BareMatch | null }>();
  interface BareMatch {
    tick: number;
    players: { id: string; x: number; y: number; ws: WebSocket }[];
    timer: ReturnType<typeof setInterval>;
  }
  let waiting: { id: string; ws: WebSocket } | null = null;
  const stateBytes = overrides.stateBytes ?? 200;
  const startMatch = (a: { id: string; ws: WebSocket }, b: { id: string; ws: WebSocket }) => {
    const id = randomUUID();
    const players = [a, b].map((p) => ({ ...p, x: 0, y: 0 }));
    const matched = `{"type":"match.matched","payload":{"match_id":"${id}","mode":"arena","players":["${a.id}","${b.id}"]}}`;
    let filler = '';
    const match: BareMatch = {
      tick: 0,
      players,
      timer: setInterval(() => {
        match.tick++;
        const state = { tick: match.tick, players: players.map((p) => ({ id: p.id, x: p.x, y: p.y })), filler };
        let frame = `{"type":"match.state","payload":${JSON.stringify(state)}}`;
        // Sized once, on the first tick, to svc's frame; later frames vary only with the numbers in them.
        if (match.tick === 1 && frame.length < stateBytes) {
          filler = 'x'.repeat(stateBytes - frame.length);
          frame = `{"type":"match.state","payload":${JSON.stringify({ ...state, filler })}}`;
        }
        for (const p of players) p.ws.send(frame);
      }, 100),
    };
    for (const p of players) {
      sessions.get(p.ws)!.match = match;
      p.ws.send(matched);
    }
  };
  const server = createServer();
  const wss = new WebSocketServer({ server, perMessageDeflate: false });
  wss.on('connection', (ws) => {
    ws.on('message', (data) => {
      const msg = JSON.parse(data.toString()) as { type: string; cid?: string; payload?: { token?: string; dx?: number; dy?: number } };
      const session = sessions.get(ws);
      if (msg.type === 'session.connect') {
        const player = tokens.get(msg.payload?.token ?? '');
        if (player === undefined) return void ws.send(`{"type":"error","cid":${JSON.stringify(msg.cid ?? null)},"payload":{"code":"unauthorized"}}`);
        sessions.set(ws, { player, match: null });
        ws.send(`{"type":"session.connected","cid":${JSON.stringify(msg.cid ?? null)},"payload":{"player_id":"${player}"}}`);
      } else if (!session) {
        ws.send('{"type":"error","payload":{"code":"unauthorized"}}');
      } else if (msg.type === 'matchmaker.add') {
        if (waiting && waiting.ws !== ws) {
          startMatch(waiting, { id: session.player, ws });
          waiting = null;
        } else waiting = { id: session.player, ws };
      } else if (msg.type === 'match.input' && session.match) {
        const me = session.match.players.find((p) => p.ws === ws)!;
        me.x += msg.payload?.dx ?? 0;
        me.y += msg.payload?.dy ?? 0;
      } else {
        ws.send(data, { binary: false });
      }
    });
    ws.on('close', () => {
      const match = sessions.get(ws)?.match;
      if (match) clearInterval(match.timer);
      if (waiting?.ws === ws) waiting = null;
      sessions.delete(ws);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  serveParent(
    { port: (server.address() as { port: number }).port },
    {
      memory: () => ({ ...memory(), sessions: sessions.size }),
      provision: (m: { n: number }) => {
        const fresh = Array.from({ length: m.n }, () => randomBytes(32).toString('base64url'));
        for (const t of fresh) tokens.set(t, randomUUID());
        return { tokens: fresh };
      },
    },
  );
} else {
  const { openEmbedded, openPostgres } = await svcImport<typeof import('../host/infra/database')>('host/infra/database.ts');
  const { createHost } = await svcImport<typeof import('../host/host')>('host/host.ts');
  const { jsonb } = await svcImport<typeof import('../runtime/platform/database')>('runtime/platform/database.ts');
  const { jsonLogger, silentLogger } = await svcImport<typeof import('../runtime/platform/log')>('runtime/platform/log.ts');
  const { parseSettings } = await svcImport<typeof import('../runtime/contracts/settings')>('runtime/contracts/settings.ts');
  const { hashToken, newToken } = await svcImport<typeof import('../runtime/accounts/tokens')>('runtime/accounts/tokens.ts');
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
  const database = overrides.postgres
    ? openPostgres({ ...overrides.postgres, poolSize: settings.db_pool_size, connectTimeoutMs: settings.db_connect_timeout_ms, statementTimeoutMs: settings.db_statement_timeout_ms })
    : // As `npm start` opens it: the memory saver is the production default (issue 33 measures cold tokens with it on).
      await openEmbedded({ memorySaver: settings.embedded_memory_saver });
  const gameDir = overrides.gameDir ?? path.join(svcRoot, 'examples/demo-game');
  let log = silentLogger;
  if (overrides.productionLog) {
    const sink = openSync('/dev/null', 'w');
    log = jsonLogger((line) => writeSync(sink, line + '\n'), settings.log_level);
  }
  const running = await createHost({ settings, database, log, gameDir });
  await running.ready;
  const live = running.ctx.live as LiveHost;
  // The plane's pose fan-out, timed from outside its class (bench/worlds.ts --datagrams). Node
  // defers each datagram's kernel send to the tick queue, so timing sendPoses alone would leave
  // the sends out. Each call is therefore run from the tick queue itself, behind whatever the
  // caller queued before it (the WebSocket writes' own callbacks), and a marker queued behind
  // each call's sends ends the span: from the first call of a burst to the last marker it holds
  // the plane's JavaScript and every send it made. What it leaves out: the sends' completion
  // callbacks, which libuv runs on a later turn. World-host ignores the count sendPoses returns.
  const plane = live.datagrams;
  const planeStats = { written: 0, sendMs: 0, jsMs: 0 };
  if (plane) {
    const sendPoses = plane.sendPoses.bind(plane);
    let pending = 0;
    let start = -1;
    plane.sendPoses = (playerIds, bodies) => {
      pending++;
      process.nextTick(() => {
        const t0 = performance.now();
        if (start < 0) start = t0;
        planeStats.written += sendPoses(playerIds, bodies);
        planeStats.jsMs += performance.now() - t0;
        process.nextTick(() => {
          if (--pending > 0) return;
          planeStats.sendMs += performance.now() - start;
          start = -1;
        });
      });
      return 0;
    };
  }

  let provisioned = 0;
  serveParent(
    { port: running.port },
    {
      memory: () => ({ ...memory(), sessions: live.gateway.sessions.size, matches: live.matches.size }),
      'lateness-reset': () => live.matches.resetLateness(),
      'world-stats': () => ({ ...live.worlds.takeStats(), worlds: live.worlds.size }),
      /** The plane's counters since the last call, and its live bindings. */
      'datagram-stats': () => {
        const out = { ...planeStats, bindings: plane?.size ?? 0 };
        planeStats.written = 0;
        planeStats.sendMs = 0;
        planeStats.jsMs = 0;
        return out;
      },
      lateness: () => ({ ...live.matches.lateness(), matches: live.matches.size }),
      'thinks-reset': () => live.matches.bots.resetThinks(),
      thinks: () => live.matches.bots.thinkSummary(),
      provision: async (m: { n: number }) => {
        // Players and access tokens straight into the database, in batches: the
        // benchmark measures the gateway, not password hashing.
        const tokens: string[] = [];
        const db = running.ctx.db;
        const now = Date.now();
        for (let done = 0; done < m.n; ) {
          const batch = Math.min(500, m.n - done);
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
        // The players were there before the storm: a running node's job has long since analyzed them.
        await running.plannerStatistics?.run();
        return { tokens };
      },
    },
  );
}
