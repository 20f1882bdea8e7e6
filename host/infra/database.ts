import { PGlite } from '@electric-sql/pglite';
import { setFlagsFromString } from 'node:v8';
import { Kysely, PostgresDialect, type PostgresPool, type PostgresPoolClient, type PostgresQueryResult } from 'kysely';
import pg from 'pg';
import { DatabaseDeadlineError, serialDialect, type Db } from '../../runtime/platform/database';
import type { Database } from '../../runtime/contracts/tables';
import { preparedReads, type PreparedRead } from './prepared-reads';

export interface OpenDatabase {
  db: Db;
  kind: 'embedded' | 'postgres';
  close(): Promise<void>;
  /** Embedded only: the data directory as a tarball, to clone it cheaply. */
  dump?: () => Promise<Blob>;
  /**
   * Server only: one `select 1` on a connection of the probe's own (so a
   * saturated pool cannot fake an outage), settled within `deadlineMs`.
   * Rejects with the driver's error or a `DatabaseDeadlineError`.
   */
  probe?: (deadlineMs: number) => Promise<void>;
  /** Server only: called whenever the pool loses a connection (idle or checked out). */
  onConnectionLost?: (listener: (err: Error) => void) => void;
  /**
   * Server only: a short-lived handle without the statement deadlines, for
   * migrations (an index build may rightly run for minutes).
   */
  unbounded?: () => { db: Db; close(): Promise<void> };
  /** What the pool holds right now, for the metrics listener (the embedded database has one connection). */
  poolUse?: () => PoolUse;
  /** Hands every statement's duration in seconds to `observe` (null stops), for the metrics listener. */
  timeStatements?: (observe: StatementObserver | null) => void;
  /** Embedded only: reads run as statements the database keeps prepared (host/infra/prepared-reads.ts). */
  readPrepared?: PreparedRead;
}

export interface PoolUse {
  max: number;
  open: number;
  idle: number;
  waiting: number;
}

export type StatementObserver = (seconds: number) => void;

export interface PostgresOptions {
  url: string;
  poolSize: number;
  /** Bound on opening a connection and on waiting for a free one in the pool. */
  connectTimeoutMs: number;
  /** Server-side `statement_timeout`; a client-side deadline a little later catches a silent network. */
  statementTimeoutMs: number;
  /** Tests run many nodes against one server; each scopes itself to a schema. */
  schema?: string;
  /** Shown in `pg_stat_activity`, so an operator (or a test) can find this node's backends. */
  applicationName?: string;
}

const INT8_OID = 20;
/** After the server's own statement timeout should have answered: only a silent network gets here. */
const CLIENT_DEADLINE_GRACE_MS = 1000;
/** Dead peers of idle connections are found by TCP keepalive after about this long plus the kernel's probes. */
const KEEPALIVE_IDLE_MS = 10_000;

/**
 * The real PostgreSQL server through a `pg` pool. int8 comes back as a number
 * (as PGlite does) so both databases hand the domain code the same shapes.
 *
 * Every connection carries an error listener for its whole life: pg emits
 * `error` on a client whose server goes away, and a checked-out client has no
 * pool listener, so without ours one restart of the server ends the process.
 */
export function openPostgres(options: PostgresOptions): OpenDatabase {
  const lost = new Set<(err: Error) => void>();
  const noteLost = (err: Error) => {
    for (const listener of lost) listener(err);
  };
  const config = (bounded: boolean): pg.PoolConfig => ({
    connectionString: options.url,
    connectionTimeoutMillis: options.connectTimeoutMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    application_name: options.applicationName ?? 'svc',
    ...(bounded ? { statement_timeout: options.statementTimeoutMs } : {}),
    ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8_OID ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
    },
  });

  const pool = guardedPool(new pg.Pool({ ...config(true), max: options.poolSize }), noteLost);
  const deadlines = new DeadlinePool(pool, options.statementTimeoutMs + CLIENT_DEADLINE_GRACE_MS);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: deadlines }) });

  let probeClient: pg.Client | null = null;
  const dropProbeClient = () => {
    const c = probeClient;
    probeClient = null;
    if (c) destroyClient(c);
  };
  const probe = async (deadlineMs: number): Promise<void> => {
    await withDeadline(
      (async () => {
        if (!probeClient) {
          const c = new pg.Client({ ...config(true), connectionTimeoutMillis: deadlineMs });
          c.on('error', () => {
            if (probeClient === c) probeClient = null;
          });
          probeClient = c;
          await c.connect();
        }
        await probeClient.query('select 1');
      })(),
      deadlineMs,
    ).catch((err) => {
      dropProbeClient();
      throw err;
    });
  };

  return {
    db,
    kind: 'postgres',
    close: async () => {
      dropProbeClient();
      await db.destroy();
    },
    probe,
    onConnectionLost: (listener) => void lost.add(listener),
    poolUse: () => ({ max: options.poolSize, open: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    timeStatements: (observe) => void (deadlines.observe = observe),
    unbounded: () => {
      const single = guardedPool(new pg.Pool({ ...config(false), max: 1 }), noteLost);
      const admin = new Kysely<Database>({ dialect: new PostgresDialect({ pool: single }) });
      return { db: admin, close: () => admin.destroy() };
    },
  };
}

/** Listens for connection loss on the pool and on every client it ever opens. */
function guardedPool(pool: pg.Pool, onLost: (err: Error) => void): pg.Pool {
  pool.on('error', onLost);
  pool.on('connect', (client) => client.on('error', onLost));
  return pool;
}

/**
 * Hands kysely clients whose every query has a client-side deadline. A query
 * past it fails with `DatabaseDeadlineError`, and its connection is destroyed
 * and released as broken, so the pool never hands out a connection still
 * waiting on an answer that may never come.
 */
class DeadlinePool implements PostgresPool {
  /** Set while metrics are on: every statement's seconds, failed ones included. */
  observe: StatementObserver | null = null;

  constructor(
    private readonly pool: pg.Pool,
    private readonly deadlineMs: number,
  ) {}

  async connect(): Promise<PostgresPoolClient> {
    const client = await this.pool.connect();
    const deadlineMs = this.deadlineMs;
    let broken: Error | undefined;
    return {
      query: ((sql: string, parameters: readonly unknown[]) => {
        const observe = this.observe;
        const sent = observe ? performance.now() : 0;
        const running = client.query(sql, parameters as unknown[]) as Promise<PostgresQueryResult<unknown>>;
        return withDeadline(running, deadlineMs, observe ? () => observe((performance.now() - sent) / 1000) : undefined).catch((err) => {
          if (err instanceof DatabaseDeadlineError) {
            broken = err;
            destroyClient(client);
          }
          throw err;
        });
      }) as PostgresPoolClient['query'],
      release: () => client.release(broken),
    };
  }

  end(): Promise<void> {
    return this.pool.end();
  }
}

/**
 * Settles with `work`, or rejects with `DatabaseDeadlineError` once the
 * deadline passes. The check waits one more turn of the event loop, so answers
 * already read from the socket win over a timer that fired late because the
 * process itself was busy.
 */
function withDeadline<T>(work: Promise<T>, deadlineMs: number, done?: () => void): Promise<T> {
  let settled = false;
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      setImmediate(() => {
        if (settled) return;
        settled = true;
        done?.();
        reject(new DatabaseDeadlineError(deadlineMs));
      });
    }, deadlineMs);
    work.then(
      (value) => {
        clearTimeout(timer);
        if (settled) return;
        done?.();
        settled = true;
        resolve(value);
      },
      (err) => {
        clearTimeout(timer);
        if (settled) return;
        done?.();
        settled = true;
        reject(err);
      },
    );
  });
}

/** Closes a client's socket at once; `end()` would wait for a server that may not answer. */
function destroyClient(client: pg.Client | pg.PoolClient): void {
  const stream = (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream;
  if (stream) stream.destroy();
  else void client.end().catch(() => {});
}

/**
 * PGlite's own start parameters plus a smaller buffer cache: its default
 * (128 MB of shared buffers inside WebAssembly memory, which never shrinks)
 * alone would not fit a 512 MB container once the data is warm. A single
 * node's working set of a few thousand rows per table fits in 16 MB.
 */
const EMBEDDED_START_PARAMS = [
  '--single', '-F', '-O', '-j',
  '-c', 'search_path=public',
  '-c', 'exit_on_error=false',
  '-c', 'log_checkpoints=false',
  '-c', 'max_worker_processes=0',
  '-c', 'max_parallel_workers=0',
  '-c', 'max_parallel_workers_per_gather=0',
  '-c', 'io_method=sync',
  '-c', 'max_parallel_maintenance_workers=0',
  '-c', 'shared_buffers=16MB',
];

export interface EmbeddedOptions {
  dataDir?: string;
  image?: Blob;
  memorySaver?: boolean;
}

/** Embedded PostgreSQL (PGlite), persisted in `dataDir` or, without one, in memory. */
export async function openEmbedded(options: EmbeddedOptions): Promise<OpenDatabase> {
  const lite = await startEmbedded(options);
  return embeddedDatabase(lite, () => lite.close());
}

/** A started PGlite instance with the node's start parameters. */
export async function startEmbedded(options: EmbeddedOptions): Promise<PGlite> {
  // V8 compiles the database's WebAssembly twice, a quick baseline and an
  // optimised tier for hot code, and keeps both. Baseline only holds about
  // 50 MB less for good, at the price of slower queries (decision 0027).
  // The flag is process-wide and must be set before the module compiles.
  if (options.memorySaver) setFlagsFromString('--liftoff-only');
  const lite = new PGlite({
    startParams: EMBEDDED_START_PARAMS,
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    ...(options.image ? { loadDataDir: options.image } : {}),
  });
  await lite.waitReady;
  return lite;
}

/**
 * The node's database over a started PGlite instance; `end` runs when the
 * database is closed (the test suite hands instances back to a pool of its
 * own instead of stopping them).
 */
export function embeddedDatabase(lite: PGlite, end: () => Promise<void>): OpenDatabase {
  let observe: StatementObserver | null = null;
  let running = 0;
  const counted = async <T>(work: () => Promise<T>): Promise<T> => {
    const timed = observe;
    const sent = timed ? performance.now() : 0;
    running++;
    try {
      return await work();
    } finally {
      running--;
      timed?.((performance.now() - sent) / 1000);
    }
  };
  const db = new Kysely<Database>({
    dialect: serialDialect(
      (text, params) =>
        counted(async () => {
          const r = await lite.query<Record<string, unknown>>(text, params as unknown[]);
          return { rows: r.rows, ...(r.affectedRows !== undefined ? { affectedRows: r.affectedRows } : {}) };
        }),
      end,
    ),
  });
  // Holding the serial connection, as a kysely statement does, so no transaction is open around the read.
  const readPrepared = preparedReads(lite, (work) => db.connection().execute(() => counted(work)));
  return {
    db,
    kind: 'embedded',
    close: () => db.destroy(),
    dump: () => lite.dumpDataDir('none'),
    // One connection, busy while a statement runs; transactions queue in the driver, which keeps no count.
    poolUse: () => ({ max: 1, open: 1, idle: running > 0 ? 0 : 1, waiting: 0 }),
    timeStatements: (next) => void (observe = next),
    readPrepared,
  };
}
