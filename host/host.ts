import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from '../handlers/app';
import type { Route } from '../handlers/contract';
import type { Clock, Ctx, GameDeclarations } from '../runtime/contracts/context';
import { createContext } from './context';
import { ApiError } from '../runtime/contracts/errors';
import { jsonLogger, type Logger } from '../runtime/platform/log';
import { migrateToLatest } from '../runtime/platform/migrate';
import { guestsEnabled } from '../runtime/accounts/guests';
import { SettingsError, type Settings } from '../runtime/contracts/settings';
import type { OpenDatabase } from './infra/database';
import { nodeHandler } from './http/adapter';
import { TrustedProxies } from './infra/client-address';
import { builtDir, StaticSite } from './http/static-site';
import { LiveHost } from './realtime/live';
import { scriptWorkers } from './realtime/lanes/usable-cpus';
import { ProcessProbe } from './ops/probe';
import { loadGameDirectory, type LoadedGame } from './game-directory';
import { GameCatalogue } from './game-catalogue';
import type { OperatorModes } from '../runtime/lua/host-interface';
import { databaseFault } from '../runtime/platform/database';
import { GuestReaper } from './jobs/guest-reaper';
import { TokenSweeper } from './jobs/token-sweeper';
import { PlannerStatistics } from './jobs/planner-statistics';
import { LeaderboardFlush } from './jobs/leaderboard-flush';
import { TournamentClock } from './jobs/tournament-clock';
import { NodeMetrics } from './metrics/registry';
import { listenForScrapes, type MetricsListener } from './metrics/listener';
import { Fleet, type FleetOptions } from './fleet/fleet';
import { isWorker } from './fleet/workers';
import { DatagramPlane } from './realtime/datagram/plane';

export interface ServerOptions {
  settings: Settings;
  /**
   * The database, or how to open it: given as a function, it is opened only
   * after the game directory loaded, so a broken script refuses the boot
   * without first paying for (or creating) a database.
   */
  database: OpenDatabase | (() => Promise<OpenDatabase>);
  /**
   * The game directory to serve, loaded here with the operator's `game_modes`
   * (a broken script or an empty directory refuses the boot, naming it).
   */
  gameDir?: string;
  port?: number;
  host?: string;
  log?: Logger;
  clock?: Clock;
  routes?: Route[];
  /** Deployment-wide declarations; by default the loaded game directory's. */
  game?: GameDeclarations;
  /** Brings the schema up to date; a seam so tests can hold the node in `not_ready`. */
  migrate?: (db: Ctx['db']) => Promise<unknown>;
  /** The fleet's Redis (`REDIS_URL`); without it the node is a fleet of one (docs/decisions/0041). */
  redis?: FleetOptions | null;
}

/** A running node: HTTP (and later WebSocket) on one port, in front of one database. */
export interface RunningServer {
  port: number;
  /** The game directory being served, if any. */
  game: LoadedGame | null;
  url: string;
  /** `http://host:port/metrics` of the metrics listener, or null when `metrics_port` is unset. */
  metricsUrl: string | null;
  ctx: Ctx;
  server: Server;
  /** Resolves when migrations have finished and API routes answer. */
  ready: Promise<void>;
  /** Runs on its interval when `guest_reap_after` is set; `sweep()` runs one pass now. */
  guestReaper: GuestReaper;
  tokenSweeper: TokenSweeper;
  /** The embedded database's ANALYZE of stale tables (the server's autovacuum does it there); `run()` runs a pass now. */
  plannerStatistics: PlannerStatistics | null;
  /** Writes changed leaderboard entries on its interval and at shutdown; `flush()` runs one pass now. */
  leaderboardFlush: LeaderboardFlush;
  /** Moves tournaments on time; `tick()` runs a pass now. */
  tournamentClock: TournamentClock;
  /** The fleet this node belongs to: its node id, the bus, fleet presence, the match and world directory. */
  fleet: Fleet;
  /** Registers work to do on shutdown (close sockets, stop loops) before the database closes. */
  onShutdown(hook: () => Promise<void> | void): void;
  close(): Promise<void>;
}

/**
 * Starts listening at once and migrates in the background: until the schema
 * is current every API route answers 503 `not_ready`, so an orchestrator's
 * probe sees the node come up honestly.
 */
export async function createHost(options: ServerOptions): Promise<RunningServer> {
  const log = options.log ?? jsonLogger((line) => process.stdout.write(line + '\n'), options.settings.log_level);
  let game: LoadedGame | null = null;
  let catalogue: GameCatalogue | null = null;
  if (options.gameDir !== undefined) {
    try {
      game = loadGameDirectory(options.gameDir, options.settings.game_modes as OperatorModes, log, { allowEmpty: options.settings.allow_empty_game });
      catalogue = new GameCatalogue(game, log);
    } catch (err) {
      game?.close();
      throw new BootRefusal((err as Error).message, { cause: err });
    }
  }
  const loaded = game;
  const database = typeof options.database === 'function' ? await options.database() : options.database;
  const declarations = options.game ?? (loaded ? { registration: () => loaded.info.registration, guestAuth: () => loaded.info.guestAuth } : undefined);
  const metrics: NodeMetrics | null = options.settings.metrics_port === undefined ? null : nodeMetrics(database, (): LiveHost => live, (): ProcessProbe => probe);
  let fleet: Fleet;
  try {
    fleet = await Fleet.open(options.redis ?? null, log);
  } catch (err) {
    loaded?.close();
    throw new BootRefusal((err as Error).message, { cause: err });
  }
  const live: LiveHost = new LiveHost({ ...(loaded ? { game: loaded } : {}), ...(metrics ? { metrics } : {}), fleet });
  const probe = new ProcessProbe(live, scriptWorkers(options.settings));
  let metricsListener: MetricsListener | null = null;
  let context: Awaited<ReturnType<typeof createContext>>;
  let datagrams: DatagramPlane | null = null;
  try {
    if (metrics) metricsListener = await listenMetrics(metrics, options.settings, log);
    context = await createContext({ ...options, database, ...(declarations ? { game: declarations } : {}), log, live, probe, fleet });
    if (options.settings.datagrams) datagrams = await openDatagrams(context.ctx, metrics);
  } catch (err) {
    await metricsListener?.close();
    await fleet.close();
    probe.close();
    loaded?.close();
    // A setting that names a file (a trust anchor, store roots, a service-account key) is read here.
    if (err instanceof SettingsError) throw new BootRefusal(err.message, { cause: err });
    throw err;
  }
  const { ctx, limits, watch, markReady } = context;
  if (metrics) {
    limits.onRefused = (group) => metrics.rateRefused(group);
    database.timeStatements?.((seconds) => metrics.dbStatement(seconds));
  }
  watch?.start();
  const ids = ctx.ids;
  log.info('guest_auth', {
    enabled: guestsEnabled(ctx),
    key_id: options.settings.guest_verifier_key_id,
    key_ids: Object.keys(options.settings.guest_verifier_pepper),
  });

  const app = createApp(
    ctx,
    options.routes,
    metrics ? (route, method, status, meta) => metrics.httpServed(route, method, status, secondsSince(meta.arrived)) : undefined,
  );
  const handle = nodeHandler({
    app,
    ids,
    proxies: new TrustedProxies(options.settings.trusted_proxies),
    sites: browserSites(options.settings),
    ...(metrics ? { refused: (method: string, status: number, arrived: number) => metrics.httpServed(undefined, method, status, secondsSince(arrived)) } : {}),
  });

  let inFlight = 0;
  let drained: (() => void) | null = null;
  const server = createServer((req, res) => {
    // In flight = the handler has not settled (its database work included),
    // whether or not the client is still there to read the answer.
    inFlight++;
    // The handler answers at once when it can (host/http/adapter.ts): a promise only when it could not.
    let handled: void | Promise<void>;
    try {
      handled = handle(req, res);
    } catch (err) {
      return failed(res, err);
    }
    if (handled instanceof Promise) handled.then(settled, (err: unknown) => failed(res, err));
    else settled();
  });
  function failed(res: ServerResponse, err: unknown): void {
    log.error('adapter_failure', { error: err });
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify({ error: { code: 'internal', message: 'An internal error occurred.', details: {} } }));
    settled();
  }
  function settled(): void {
    inFlight--;
    if (inFlight === 0) drained?.();
  }
  server.keepAliveTimeout = 5000;
  // Framing errors (garbage after a body, oversized headers) never reach the
  // adapter; answer them with the error object too, never node's bare 400.
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (!socket.writable || (err.code === 'ECONNRESET')) return socket.destroy();
    const payload = JSON.stringify(new ApiError('invalid_message', 'The HTTP request could not be parsed.').body());
    socket.end(
      `HTTP/1.1 400 Bad Request\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(payload)}\r\nconnection: close\r\n\r\n${payload}`,
    );
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  }).catch(async (err) => {
    await metricsListener?.close();
    await datagrams?.close();
    throw err;
  });
  const port = (server.address() as AddressInfo).port;

  let closing: Promise<void> | null = null;
  const shutdown = new AbortController();
  const fleetBoards = fleet.serveLeaderboards(ctx.leaderboards);
  const leaderboardFlush = new LeaderboardFlush(ctx, () => fleetBoards.flushes());
  const readyPromise = bootWhenReachable({ ...options, database }, ctx.db, log, shutdown.signal, async () => {
    // Routes answer from the catalogue's tables, so they open once it is synced.
    await catalogue?.start(ctx);
    // Reads answer from the boards, so they are back before the routes open: a running fleet's copy, else the table.
    if (!(await fleetBoards.join())) {
      await leaderboardFlush.reload();
      fleetBoards.loaded();
    }
  }).then(async (applied) => {
    markReady();
    log.info('migrations_complete', { applied, database: database.kind });
    // Boot reports a known database state: the first probe has answered.
    await watch?.settled();
  });
  readyPromise.catch((err) => {
    if (!shutdown.signal.aborted) log.error('migrations_failed', { error: err });
  });
  const guestReaper = new GuestReaper(ctx);
  readyPromise.then(() => guestReaper.start(), () => {});
  const tokenSweeper = new TokenSweeper(ctx);
  readyPromise.then(() => tokenSweeper.start(), () => {});
  const plannerStatistics = database.kind === 'embedded' ? new PlannerStatistics(ctx.db, log) : null;
  readyPromise.then(() => plannerStatistics?.start(), () => {});
  readyPromise.then(() => leaderboardFlush.start(), () => {});
  // A tournament's final order is its entrants' places on its board in this node's memory.
  const tournamentClock = new TournamentClock(ctx, (board, players) =>
    players
      .map((p) => ctx.leaderboards.standing(board, p))
      .filter((line) => line !== null)
      .sort((x, y) => x.rank - y.rank),
  );
  readyPromise.then(() => {
    tournamentClock.start();
    // A later edit of the declarations may move a start or an end: the clock re-reads its schedule.
    catalogue?.onSynced(() => void tournamentClock.tick());
  }, () => {});

  const hooks: (() => Promise<void> | void)[] = [];
  // WebSocket on the same port: upgrades of `/ws` go to the gateway; sockets close with 1001 on shutdown.
  live.start(ctx, server, datagrams);
  if (datagrams) log.info('datagram_plane', { port: datagrams.port, endpoint: datagrams.endpoint, poses: datagrams.manifest !== null });
  // Persistent worlds a previous run left come back once their tables answer.
  readyPromise.then(() => live.worlds.recover(), () => {}).catch((err) => log.error('world_recovery_failed', { error: err }));
  hooks.push(() => live.close());
  // After the sockets closed: the goodbye tells the other nodes this one's players are gone.
  hooks.push(() => fleet.close());
  // After the matches stopped: their scripts' last scores are in.
  hooks.push(() => leaderboardFlush.stop());
  hooks.push(() => guestReaper.stop());
  hooks.push(() => tokenSweeper.stop());
  if (plannerStatistics) hooks.push(() => plannerStatistics.stop());
  hooks.push(() => tournamentClock.stop());
  hooks.push(() => probe.close());
  // A scrape that is still running is cut off: the listener never holds shutdown up.
  if (metricsListener) hooks.push(() => metricsListener.close());
  if (loaded) hooks.push(() => loaded.close());

  return {
    port,
    url: `http://127.0.0.1:${port}`,
    metricsUrl: metricsListener?.url ?? null,
    game: loaded,
    ctx,
    server,
    ready: readyPromise,
    guestReaper,
    tokenSweeper,
    plannerStatistics,
    leaderboardFlush,
    tournamentClock,
    fleet,
    onShutdown: (hook) => void hooks.push(hook),
    close() {
      closing ??= (async () => {
        log.info('shutdown_started', { in_flight: inFlight });
        shutdown.abort();
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        if (inFlight > 0) {
          const grace = options.settings.shutdown_grace_ms;
          await Promise.race([
            new Promise<void>((resolve) => (drained = resolve)),
            new Promise<void>((resolve) => setTimeout(resolve, grace).unref()),
          ]);
        }
        for (const hook of hooks) await hook();
        server.closeAllConnections();
        await stopped;
        limits.close();
        await readyPromise.catch(() => {});
        await watch?.stop();
        await database.close();
        log.info('shutdown_complete', {});
      })();
      return closing;
    },
  };
}

/** The node's metrics over its live services, probe and pool; read at scrape time, when all of them exist. */
function nodeMetrics(database: OpenDatabase, live: () => LiveHost, probe: () => ProcessProbe): NodeMetrics {
  // The real-time services start after the context; a scrape before then reads zeros.
  const started = <T>(read: () => T, none: T): T => {
    try {
      return read();
    } catch {
      return none;
    }
  };
  return new NodeMetrics({
    sockets: () => started(() => live().gateway.sessions.size, 0),
    liveMatches: () => started(() => live().matches.size, 0),
    liveWorlds: () => started(() => live().worlds.size, 0),
    matchmaker: () => started(() => live().matchmaker.samples(), {}),
    pool: () => database.poolUse?.() ?? null,
    datagramBindings: () => started(() => live().datagrams?.size ?? 0, 0),
    get probe() {
      return probe();
    },
  });
}

/** The built browser apps this node serves, each behind its setting. */
function browserSites(settings: Settings): StaticSite[] {
  const sites: StaticSite[] = [];
  if (settings.console) {
    sites.push(
      new StaticSite({
        prefix: '/console',
        dir: builtDir('console'),
        passThrough: ['/console/session'],
        codes: { notFound: 'console.not_found', notBuilt: 'console.not_built' },
      }),
    );
  }
  // The demo arena client (play/), built by `npm run build`.
  if (settings.play) sites.push(new StaticSite({ prefix: '/play', dir: builtDir('play') }));
  return sites;
}

/**
 * The datagram plane binds one UDP port in this process (decision 0065): node:cluster's
 * processes would share it, and a datagram would reach a process that did not mint its
 * connection. A port that cannot be bound stops the boot naming the setting, as the metrics
 * port does.
 */
async function openDatagrams(ctx: Ctx, metrics: NodeMetrics | null): Promise<DatagramPlane> {
  const settings = ctx.settings.datagrams!;
  if (isWorker()) throw new BootRefusal(`invalid setting 'datagrams': the datagram plane needs workers set to 1 (each process of a fleet behind one port would see another's datagrams); run one node per UDP port instead`);
  try {
    return await DatagramPlane.open(ctx, metrics ?? undefined);
  } catch (err) {
    throw new BootRefusal(`cannot bind the datagram plane on udp ${settings.host}:${settings.port}: ${(err as Error).message} (set datagrams.port or datagrams.host)`, { cause: err });
  }
}

/** A metrics port that cannot be bound stops the boot with a line naming it, like the API port. */
async function listenMetrics(metrics: NodeMetrics, settings: Settings, log: Logger): Promise<MetricsListener> {
  const port = settings.metrics_port!;
  try {
    return await listenForScrapes(metrics, port, settings.metrics_host, log);
  } catch (err) {
    throw new BootRefusal(`cannot listen for metrics on ${settings.metrics_host}:${port}: ${(err as Error).message} (set metrics_port or metrics_host)`, { cause: err });
  }
}

function secondsSince(arrived: number | undefined): number {
  return arrived === undefined ? 0 : (performance.now() - arrived) / 1000;
}

/** A configuration the node cannot serve (a broken game script, an empty game directory): the boot stops with its message. */
export class BootRefusal extends Error {}

/**
 * Brings the schema up to date and does the boot's other database work,
 * waiting out a database that is not reachable yet (a node and its database
 * often start together) with a capped backoff, for at most
 * `db_boot_timeout_ms`. Any other failure is final at once.
 */
async function bootWhenReachable(
  options: ServerOptions & { database: OpenDatabase },
  db: Ctx['db'],
  log: Logger,
  stop: AbortSignal,
  /** Boot work that needs the migrated tables (catalogue sync, board reload); it may run more than once. */
  afterMigrations: () => Promise<void>,
): Promise<string[]> {
  const migrate = options.migrate ?? ((target: Ctx['db']) => migrateToLatest(target, (step) => log.info('migration_applied', { name: step.name, ms: step.ms })));
  const giveUpAt = Date.now() + options.settings.db_boot_timeout_ms;
  const applied: string[] = [];
  for (let attempt = 0; ; attempt++) {
    const handle = options.database.unbounded?.();
    try {
      applied.push(...((await migrate(handle?.db ?? db)) as string[]));
      // A database that goes away between the migrations and the rest of the boot is waited for the same way.
      await afterMigrations();
      return applied;
    } catch (err) {
      const fault = databaseFault(err);
      if (!fault || stop.aborted) throw err;
      const left = giveUpAt - Date.now();
      if (left <= 0) {
        throw new Error(`the database was unreachable for ${options.settings.db_boot_timeout_ms} ms at boot (${fault}: ${(err as Error).message})`, { cause: err });
      }
      const retryMs = Math.min(10_000, 500 * 2 ** attempt, left);
      log.warn('migrations_waiting', { reason: fault, attempt: attempt + 1, retry_in_ms: retryMs, error: (err as Error).message });
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, retryMs);
        stop.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
      });
      if (stop.aborted) throw err;
    } finally {
      await handle?.close().catch(() => {});
    }
  }
}
