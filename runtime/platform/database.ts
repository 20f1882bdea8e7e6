import {
  CompiledQuery,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  sql,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type QueryResult,
  type RawBuilder,
  type TransactionSettings,
} from 'kysely';
import { ApiError } from '../contracts/errors';
import type { Database } from '../contracts/tables';

export type Db = Kysely<Database>;

/** Runs one statement; how is the host's business (PGlite, an HTTP proxy, ...). */
export type StatementRunner = (
  sql: string,
  params: readonly unknown[],
) => Promise<{ rows: Record<string, unknown>[]; affectedRows?: number }>;

/**
 * A kysely dialect over a single serialised connection. PGlite has exactly one
 * backend, and an embedding host may only have a stateless statement proxy, so
 * every connection acquisition waits for the previous one to be released: a
 * transaction owns the connection from BEGIN to COMMIT and nothing interleaves.
 * (kysely 0.28 ships no PGlite dialect; see docs/decisions/0002.)
 */
export function serialDialect(run: StatementRunner, onDestroy?: () => Promise<void>): Dialect {
  return {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new SerialDriver(run, onDestroy),
    createIntrospector: (db) => new PostgresIntrospector(db),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  };
}

class SerialDriver implements Driver {
  #tail: Promise<void> = Promise.resolve();
  #release: (() => void) | null = null;
  readonly #connection: DatabaseConnection;

  constructor(
    run: StatementRunner,
    private readonly onDestroy?: () => Promise<void>,
  ) {
    this.#connection = {
      async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
        const result = await run(query.sql, query.parameters);
        const affected = result.affectedRows;
        return {
          rows: result.rows as R[],
          ...(affected !== undefined ? { numAffectedRows: BigInt(affected) } : {}),
        };
      },
      async *streamQuery<R>(query: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
        const result = await run(query.sql, query.parameters);
        for (const row of result.rows) yield { rows: [row as R] };
      },
    };
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    const previous = this.#tail;
    let release!: () => void;
    this.#tail = new Promise<void>((resolve) => (release = resolve));
    await previous;
    this.#release = release;
    return this.#connection;
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const level = settings.isolationLevel ? ` isolation level ${settings.isolationLevel}` : '';
    await connection.executeQuery(CompiledQuery.raw(`begin${level}`));
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'));
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'));
  }

  async releaseConnection(): Promise<void> {
    const release = this.#release;
    this.#release = null;
    release?.();
  }

  async destroy(): Promise<void> {
    await this.#tail;
    await this.onDestroy?.();
  }
}

/** A jsonb parameter. The one way values reach jsonb columns, so pg and PGlite agree. */
export function jsonb(value: unknown): RawBuilder<unknown> {
  return sql`${JSON.stringify(value ?? {})}::jsonb`;
}

/** Timestamps go out as ISO 8601 UTC, second precision, `Z`. */
export function isoSeconds(value: Date | string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  const date = value instanceof Date ? value : new Date(value);
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** True for a unique-constraint violation from either driver. */
export function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';
}

/** True for a foreign-key violation from either driver: the row names something that does not exist. */
export function isForeignKeyViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23503';
}

/**
 * Why the database cannot serve right now: it is unreachable (connection
 * refused, lost, or the server is shutting down), or it did not answer within
 * the host's deadline (statement timeout, lock wait, a silent network).
 */
export type DatabaseFault = 'database_unavailable' | 'database_timeout';

/** Raised by the host when a query outlives its client-side deadline (a server that went silent). */
export class DatabaseDeadlineError extends Error {
  constructor(readonly deadlineMs: number) {
    super(`The database did not answer within ${deadlineMs} ms.`);
    this.name = 'DatabaseDeadlineError';
  }
}

// SQLSTATEs that mean "this connection or server is not usable now", as
// opposed to a fault in the statement itself (which stays a 500 and a bug).
const UNAVAILABLE_STATES = new Set([
  '57P01', // admin_shutdown: pg_terminate_backend, fast shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: starting up or in recovery
  '57P04', // database_dropped
  '57P05', // idle_session_timeout
  '53300', // too_many_connections
  '25P03', // idle_in_transaction_session_timeout
]);
const TIMEOUT_STATES = new Set([
  '57014', // query_canceled: statement_timeout
  '55P03', // lock_not_available: lock_timeout
]);
// Socket errors from node's net layer, as the pg driver passes them on.
const UNAVAILABLE_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
]);
// The pg driver and pool report their own states by message only.
const DRIVER_UNAVAILABLE = [
  'Connection terminated',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'Cannot use a pool after calling end on the pool',
];
const DRIVER_TIMEOUT = ['timeout exceeded when trying to connect', 'Query read timeout', 'timeout expired'];

/**
 * The one place a database error is recognised as an outage rather than a
 * bug: SQLSTATE class 08 and the 57P0x family, node socket errors, and the pg
 * driver's own kinds. Follows `cause` chains (the pool wraps connect timeouts).
 */
export function databaseFault(err: unknown): DatabaseFault | null {
  for (let e = err, depth = 0; typeof e === 'object' && e !== null && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof DatabaseDeadlineError) return 'database_timeout';
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (TIMEOUT_STATES.has(code) || code === 'ETIMEDOUT') return 'database_timeout';
      if (code.startsWith('08') || UNAVAILABLE_STATES.has(code) || UNAVAILABLE_ERRNOS.has(code)) return 'database_unavailable';
    }
    const message = (e as { message?: unknown }).message;
    if (typeof message === 'string') {
      if (message === 'Connection terminated due to connection timeout') return 'database_timeout';
      if (DRIVER_TIMEOUT.some((m) => message.startsWith(m))) return 'database_timeout';
      if (DRIVER_UNAVAILABLE.some((m) => message.startsWith(m))) return 'database_unavailable';
    }
  }
  return null;
}

/** What a client is told when the database cannot serve: 503 `not_ready` with the reason. */
export function databaseFaultError(fault: DatabaseFault): ApiError {
  return new ApiError(
    'not_ready',
    fault === 'database_timeout' ? 'The database did not answer in time; try again shortly.' : 'The database is unavailable; try again shortly.',
    { reason: fault },
  );
}
