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
import type { Database } from './schema';

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

/** Timestamps go out as ISO 8601 UTC, second precision, `Z` (rest-payloads 0.3). */
export function isoSeconds(value: Date | string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  const date = value instanceof Date ? value : new Date(value);
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** True for a unique-constraint violation from either driver. */
export function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';
}
