import { loadConfig, parseCli, USAGE } from './config';
import { openEmbedded, openPostgres, type OpenDatabase } from './infra/database';
import { BootRefusal, createHost } from './host';
import { jsonLogger } from '../runtime/platform/log';
import { migrateToLatest } from '../runtime/platform/migrate';
import { databaseFault } from '../runtime/platform/database';
import { effectiveRegistration } from '../runtime/accounts/registration';
import { spawnSync } from 'node:child_process';
import { createServer as createNetServer } from 'node:net';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { bootBanner } from './banner';
import path from 'node:path';
import { lockDataDir } from './infra/data-dir-lock';
import { announceReady, isWorker, superviseWorkers, workerCount, workersRefusal } from './fleet/workers';

/**
 * A new embedded data directory is created by PGlite's initdb, which grows its
 * WebAssembly memory to several hundred MB, and WebAssembly memory never
 * shrinks. So a first boot creates the directory in a short-lived child
 * process and opens it afterwards like any restart (decision 0014).
 */
async function initialiseDataDir(dir: string, log: ReturnType<typeof jsonLogger>): Promise<void> {
  if (existsSync(path.join(dir, 'PG_VERSION'))) return;
  log.info('data_dir_initialising', { dir });
  const child = spawnSync(process.execPath, [...process.execArgv, process.argv[1]!, INIT_FLAG, dir], { stdio: 'inherit' });
  if (child.status !== 0) throw new Error(`could not create the embedded database in ${dir} (exit ${child.status ?? child.signal})`);
}

const INIT_FLAG = '--initialise-data-dir';

/** The version in the package.json beside dist/ (or the sources). */
function packageVersion(): string {
  try {
    const file = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'package.json');
    return String(JSON.parse(readFileSync(file, 'utf8')).version ?? 'unknown');
  } catch {
    return 'unknown';
  }
}

/** CLI entry of dist/host.mjs: `npm start`, `npm run migrate`. */
type ListenRefusal = 'EADDRINUSE' | 'EACCES' | 'EADDRNOTAVAIL';

function isListenRefusal(code: string | undefined): code is ListenRefusal {
  return code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL';
}

/** Listens on the address and lets go of it at once: why it cannot be had, or null. */
function listenRefusal(host: string, port: number): Promise<ListenRefusal | null> {
  return new Promise((resolve, reject) => {
    const probe = createNetServer();
    probe.once('error', (err: NodeJS.ErrnoException) => (isListenRefusal(err.code) ? resolve(err.code) : reject(err)));
    probe.listen(port, host, () => probe.close(() => resolve(null)));
  });
}

function refuseListen(host: string, port: number, code: ListenRefusal): never {
  const why = code === 'EADDRINUSE' ? 'is already in use' : code === 'EACCES' ? 'needs privileges this process lacks' : 'is not an address of this machine';
  process.stderr.write(`svc: cannot listen on ${host}:${port}: the port ${why} (set PORT or HOST)\n`);
  process.exit(2);
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv[0] === INIT_FLAG && argv[1]) {
    const created = await openEmbedded({ dataDir: argv[1] });
    await created.close();
    return;
  }
  let config;
  try {
    if (parseCli(argv).help) {
      process.stdout.write(USAGE);
      return;
    }
    config = loadConfig(argv, process.env);
  } catch (err) {
    process.stderr.write(`svc: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const log = jsonLogger((line) => process.stdout.write(line + '\n'), config.settings.log_level);
  for (const n of config.notices) log.warn('setting_notice', { key: n.key, message: n.message });
  const workers = workerCount(config.settings);
  // Migrating is one process's job, whatever `workers` says.
  const refusal = parseCli(argv).migrateOnly ? null : workersRefusal(workers, config);
  if (refusal) {
    process.stderr.write(`svc: ${refusal}\n`);
    process.exit(2);
  }
  // A signal during boot is kept and acted on once the host exists: the
  // data directory and the database are left the way a shutdown leaves them.
  let signalled: string | null = null;
  const early = (signal: string) => () => {
    signalled ??= signal;
    log.info('signal', { signal, during: 'boot' });
  };
  const earlyTerm = early('SIGTERM');
  const earlyInt = early('SIGINT');
  process.on('SIGTERM', earlyTerm);
  process.on('SIGINT', earlyInt);
  // A port already taken is said before seconds of database work (a first
  // boot initialises the data directory); the real listen still answers the
  // same way if the port is taken in between. One process only: node:cluster
  // workers listen through their supervisor.
  if (!parseCli(argv).migrateOnly && workers <= 1 && !isWorker() && config.port !== 0) {
    const taken = await listenRefusal(config.host, config.port);
    if (taken) refuseListen(config.host, config.port, taken);
  }

  let opened: OpenDatabase | null = null;
  const openDatabase = async (): Promise<OpenDatabase> => {
    if (config.databaseUrl) {
      opened = openPostgres({
        url: config.databaseUrl,
        poolSize: config.settings.db_pool_size,
        connectTimeoutMs: config.settings.db_connect_timeout_ms,
        statementTimeoutMs: config.settings.db_statement_timeout_ms,
      });
      return opened;
    }
    mkdirSync(config.dataDir, { recursive: true });
    try {
      lockDataDir(config.dataDir);
    } catch (err) {
      process.stderr.write(`svc: ${(err as Error).message}\n`);
      process.exit(2);
    }
    await initialiseDataDir(config.dataDir, log);
    opened = await openEmbedded({ dataDir: config.dataDir, memorySaver: config.settings.embedded_memory_saver });
    return opened;
  };

  if (parseCli(argv).migrateOnly) {
    const database = await openDatabase();
    const admin = database.unbounded?.();
    const applied = await migrateToLatest(admin?.db ?? database.db).finally(() => admin?.close());
    log.info('migrations_complete', { applied, database: database.kind });
    await database.close();
    return;
  }

  // Several processes on the one port: this one only supervises them (host/fleet/workers.ts).
  if (workers > 1 && !isWorker()) {
    process.off('SIGTERM', earlyTerm);
    process.off('SIGINT', earlyInt);
    await superviseWorkers(workers, log, { nodeId: config.redis?.nodeId });
    return;
  }

  let running: Awaited<ReturnType<typeof createHost>>;
  try {
    running = await createHost({
      settings: config.settings,
      // Opened once the game directory loaded: a broken script fails the boot before any database work.
      database: openDatabase,
      port: config.port,
      host: config.host,
      log,
      gameDir: config.gameDir,
      redis: config.redis,
    });
  } catch (err) {
    if (err instanceof BootRefusal) {
      process.stderr.write(`svc: ${err.message}\n`);
      await (opened as OpenDatabase | null)?.close().catch(() => {});
      process.exit(2);
    }
    const code = (err as NodeJS.ErrnoException).code;
    if (!isListenRefusal(code)) throw err;
    refuseListen(config.host, config.port, code);
  }
  // A node that cannot reach its database or apply its migrations in time
  // says so in one line and exits, so the orchestrator sees a failed start.
  running.ready.catch(async (err: Error) => {
    process.stderr.write(`svc: not ready: ${err.message}\n`);
    await running.close().catch(() => {});
    process.exit(1);
  });
  running.ready.then(announceReady, () => {});
  log.info('listening', { port: running.port, host: config.host, database: config.databaseUrl ? 'postgres' : 'embedded', game_dir: config.gameDir });
  // After the game directory is loaded: a script declaration narrows an unset operator posture.
  log.info('registration_mode', effectiveRegistration(running.ctx));
  // Under several workers the first one speaks for all.
  if ((process.env.SVC_WORKER_INDEX ?? '1') === '1') process.stderr.write(
    bootBanner({
      version: packageVersion(),
      url: `http://${config.host === '0.0.0.0' ? 'localhost' : config.host}:${running.port}`,
      configFile: config.configFile,
      database: config.databaseUrl ? { kind: 'postgres', url: config.databaseUrl } : { kind: 'embedded', dataDir: config.dataDir },
      gameDir: config.gameDir,
      game: running.game!.info,
      ctx: running.ctx,
    }),
  );

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('signal', { signal });
    running.close().then(
      () => process.exit(0),
      (err) => {
        log.error('shutdown_failed', { error: err });
        process.exit(1);
      },
    );
  };
  // Last line of defence: a database fault that escapes every listener (a
  // stray emitter, a forgotten catch) is weather and must not end the node;
  // anything else is a bug and still ends it, as node would.
  const stray = (kind: string) => (err: unknown) => {
    const fault = databaseFault(err);
    if (fault) return log.warn('database_fault_unhandled', { kind, reason: fault, error: err instanceof Error ? err.message : String(err) });
    log.error(kind, { error: err });
    process.exit(1);
  };
  process.on('uncaughtException', stray('uncaught_exception'));
  process.on('unhandledRejection', stray('unhandled_rejection'));
  process.off('SIGTERM', earlyTerm);
  process.off('SIGINT', earlyInt);
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  if (signalled) stop(signalled);
}

main().catch((err) => {
  process.stderr.write(`svc: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
