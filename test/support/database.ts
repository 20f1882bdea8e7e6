import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { inject } from 'vitest';
import type { PGlite } from '@electric-sql/pglite';
import { embeddedDatabase, openPostgres, startEmbedded, type OpenDatabase } from '../../host/infra/database';
import { migrateToLatest } from '../../runtime/platform/migrate';
import { parseSettings } from '../../runtime/contracts/settings';

let image: Blob | null = null;
const DEFAULTS = parseSettings({}).settings;

/** With DATABASE_URL: how the node reaches the server (fault tests route it through a proxy they own). */
export interface ServerConnection {
  /** Defaults to DATABASE_URL; the schema is always created and migrated over DATABASE_URL itself. */
  url?: string;
  applicationName?: string;
  connectTimeoutMs?: number;
  statementTimeoutMs?: number;
}

/**
 * A migrated database in its freshly migrated state for one test file: an
 * embedded instance (a clone of the migrated PGlite image) or, with
 * DATABASE_URL set, a schema on that server; an earlier file's closed one
 * when this fork has one (see `idle` below).
 */
export async function freshDatabase(server: ServerConnection = {}): Promise<OpenDatabase & { setupMs: number; schema?: string }> {
  const started = Date.now();
  const url = process.env.DATABASE_URL;
  if (url) {
    const reusedSchema = idleSchemas.pop();
    const schema = reusedSchema ?? (await newSchema(url));
    const opened = openPostgres({
      url: server.url ?? url,
      poolSize: 5,
      schema,
      connectTimeoutMs: server.connectTimeoutMs ?? DEFAULTS.db_connect_timeout_ms,
      statementTimeoutMs: server.statementTimeoutMs ?? DEFAULTS.db_statement_timeout_ms,
      ...(server.applicationName ? { applicationName: server.applicationName } : {}),
    });
    return {
      ...opened,
      schema,
      setupMs: record(started, reusedSchema !== undefined),
      async close() {
        await opened.close();
        await recycleSchema(url, schema);
      },
    };
  }
  const reused = idle.pop();
  const lite = reused ?? (await startClone());
  const opened = embeddedDatabase(lite, () => recycle(lite));
  return { ...opened, setupMs: record(started, reused !== undefined) };
}

/** Reports the creation time to the global setup, which prints a summary. */
function record(started: number, reused: boolean): number {
  const ms = Date.now() - started;
  appendFileSync(inject('databaseTimings'), `${ms} ${reused ? 'reused' : 'new'}\n`);
  return ms;
}

/**
 * Databases this fork's earlier files closed, back in the migrated state:
 * embedded instances, and schemas on the server. Starting a clone of the
 * embedded image costs about a second (most of it PGlite's own start), and
 * a new schema on the server its migrations; emptying the tables of a
 * closed one costs tens of ms. A file reaches its database only through
 * the handle it was given, which is dead once closed, so nothing of an
 * earlier file can write into a later file's database.
 */
const idle: PGlite[] = [];
const idleSchemas: string[] = [];
/** What a migrated database's schema looks like, taken from this fork's first new one before any file used it. */
let migratedShape: string | null = null;
/** The embedded migrated image's schemas, likewise. */
let migratedNamespaces: string | null = null;

/** A statement runner over a PGlite instance or a server connection. */
type Query = (text: string, params?: unknown[]) => Promise<{ rows: unknown[] }>;
const over = (db: PGlite | pg.Client): Query => (text, params) => (db instanceof pg.Client ? db.query(text, params) : db.query(text, params));

/** The schema's digest and the migrations applied to it. */
async function shapeOf(query: Query, schema: string): Promise<string> {
  const digest = ((await query(SHAPE, [schema])).rows[0] as { shape: string }).shape;
  const applied = ((await query(`select name from ${schema}.kysely_migration order by name`)).rows as { name: string }[]).map((r) => r.name);
  return `${digest} ${applied.join(',')}`;
}

/** Empties every table of the schema but the migration ledger, if the schema still has its migrated shape; false if not. */
async function emptyIfMigrated(query: Query, schema: string): Promise<boolean> {
  if ((await shapeOf(query, schema)) !== migratedShape) return false;
  const tables = ((await query(TABLES, [schema])).rows as { t: string }[]).map((r) => `${schema}.${r.t}`);
  if (tables.length > 0) await query(`truncate ${tables.join(', ')} restart identity cascade`);
  return true;
}

async function startClone(): Promise<PGlite> {
  const lite = await startEmbedded({ image: (image ??= new Blob([readFileSync(inject('databaseImage'))])) });
  migratedShape ??= await shapeOf(over(lite), 'public');
  migratedNamespaces ??= await namespacesOf(lite);
  return lite;
}

/**
 * Ends whatever the closing file left open (a transaction, session
 * settings, advisory locks, prepared statements, temporary tables) and
 * empties every table but the migration ledger. A file that changed the
 * schema itself (a test's trigger, table or renamed table) leaves an
 * instance that is stopped instead.
 */
async function recycle(lite: PGlite): Promise<void> {
  try {
    await lite.exec('rollback');
    await lite.exec('discard all');
    if ((await namespacesOf(lite)) !== migratedNamespaces || !(await emptyIfMigrated(over(lite), 'public'))) return await lite.close();
    // A file that held several at once leaves no more than the next file is likely to need in memory.
    if (idle.length >= MAX_IDLE) return await lite.close();
    idle.push(lite);
  } catch {
    if (!lite.closed) await lite.close().catch(() => {});
  }
}

/** Idle embedded instances a fork keeps (each holds its WebAssembly memory). */
const MAX_IDLE = 2;

/** Schemas of an embedded database, temporary ones included: a file that made one leaves an instance that is stopped. */
async function namespacesOf(lite: PGlite): Promise<string> {
  return (await lite.query<{ n: string }>('select string_agg(nspname, \',\' order by nspname) as n from pg_namespace')).rows[0]!.n;
}

async function newSchema(url: string): Promise<string> {
  const schema = `${inject('schemaPrefix')}${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  await onServer(url, (c) => c.query(`create schema ${schema}`));
  const migrator = openPostgres({ url, poolSize: 1, schema, connectTimeoutMs: 10_000, statementTimeoutMs: 60_000 });
  try {
    await migrateToLatest(migrator.db);
  } finally {
    await migrator.close();
  }
  migratedShape ??= await onServer(url, (c) => shapeOf(over(c), schema));
  return schema;
}

/**
 * The server's side of `recycle`: the file's pool is closed, so its session
 * state went with its connections; a schema whose shape changed is dropped.
 * Every statement here gives up on a lock a test left behind (lock_timeout):
 * the reset fails and the schema is dropped, and if even that waits too long
 * the schema is left to the run's teardown, never waited for.
 */
async function recycleSchema(url: string, schema: string): Promise<void> {
  const reset = await onServer(url, (c) => emptyIfMigrated(over(c), schema)).catch(() => false);
  if (reset) idleSchemas.push(schema);
  else await dropSchemas(url, [schema]).catch(() => {});
}

/** A short-lived connection to the server whose statements never wait long on a lock. */
async function onServer<T>(url: string, work: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(`set lock_timeout = '2s'`);
    return await work(c);
  } finally {
    await c.end();
  }
}

/** Drops the schemas; one a lock holds (past lock_timeout) is skipped and said so in the result. */
export async function dropSchemas(url: string, schemas: string[]): Promise<string[]> {
  return onServer(url, async (c) => {
    const kept: string[] = [];
    for (const schema of schemas) {
      await c.query(`drop schema if exists ${schema} cascade`).catch(() => kept.push(schema));
    }
    return kept;
  });
}

/**
 * Schemas of this run (`prefix`), and those of runs that started more than
 * `staleMs` ago and never got to their teardown (a killed run): every schema
 * this suite makes is named `t_<start time in base 36>_...`.
 */
export async function leftoverSchemas(url: string, prefix: string, staleMs: number): Promise<string[]> {
  const { rows } = await onServer(url, (c) => c.query<{ name: string }>(`select nspname as name from pg_namespace where nspname ~ '^t_[0-9a-z]+_'`));
  const cutoff = Date.now() - staleMs;
  return rows.map((r) => r.name).filter((name) => name.startsWith(prefix) || parseInt(name.split('_')[1]!, 36) < cutoff);
}

/**
 * Every relation, column, default, constraint, type, function and trigger
 * of one schema ($1) as one digest. Names only, never the schema's own
 * name, so every migrated schema has the same one.
 */
const SHAPE = `select md5(string_agg(x, ',' order by x)) as shape from (
  select 'r:' || relname || ':' || relkind::text from pg_class where relnamespace = $1::regnamespace
  union all select 'a:' || c.relname || '.' || a.attname || ':' || format_type(a.atttypid, a.atttypmod) || ':' || a.attnotnull::text
    from pg_attribute a join pg_class c on c.oid = a.attrelid
    where c.relnamespace = $1::regnamespace and a.attnum > 0 and not a.attisdropped
  union all select 'd:' || c.relname || '.' || d.adnum::text || ':' || pg_get_expr(d.adbin, d.adrelid)
    from pg_attrdef d join pg_class c on c.oid = d.adrelid where c.relnamespace = $1::regnamespace
  union all select 'k:' || conname from pg_constraint where connamespace = $1::regnamespace
  union all select 'y:' || typname from pg_type where typnamespace = $1::regnamespace
  union all select 'f:' || proname from pg_proc where pronamespace = $1::regnamespace
  union all select 't:' || t.tgname from pg_trigger t join pg_class c on c.oid = t.tgrelid
    where c.relnamespace = $1::regnamespace and not t.tgisinternal
) s(x)`;

const TABLES = `select quote_ident(tablename) as t from pg_tables
  where schemaname = $1 and tablename not in ('kysely_migration', 'kysely_migration_lock')`;

/**
 * A new embedded data directory for a production host, already initialised
 * and migrated: the suite's migrated image unpacked. A first boot on an empty
 * directory runs initdb and every migration (seconds of CPU); tests about
 * anything but that first boot start from this instead.
 */
export function migratedDataDir(prefix: string): string {
  const dir = path.join(mkdtempSync(path.join(tmpdir(), prefix)), 'data');
  mkdirSync(dir);
  execFileSync('tar', ['-xf', inject('databaseImage'), '-C', dir]);
  return dir;
}
