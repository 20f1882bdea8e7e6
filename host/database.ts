import { PGlite } from '@electric-sql/pglite';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { serialDialect, type Db } from '../runtime/database';
import type { Database } from '../runtime/schema';

export interface OpenDatabase {
  db: Db;
  kind: 'embedded' | 'postgres';
  close(): Promise<void>;
  /** Embedded only: the data directory as a tarball, to clone it cheaply. */
  dump?: () => Promise<Blob>;
}

const INT8_OID = 20;

/**
 * The real PostgreSQL server through a `pg` pool. int8 comes back as a number
 * (as PGlite does) so both databases hand the domain code the same shapes.
 */
export function openPostgres(url: string, poolSize: number, schema?: string): OpenDatabase {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    ...(schema ? { options: `-c search_path=${schema}` } : {}),
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8_OID ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
    },
  });
  // An idle client losing its server must not crash the process; the next
  // query reports the outage as 503.
  pool.on('error', () => {});
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return { db, kind: 'postgres', close: () => db.destroy() };
}

/** Embedded PostgreSQL (PGlite), persisted in `dataDir` or, without one, in memory. */
export async function openEmbedded(options: { dataDir?: string; image?: Blob }): Promise<OpenDatabase> {
  const lite = new PGlite({
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    ...(options.image ? { loadDataDir: options.image } : {}),
  });
  await lite.waitReady;
  const db = new Kysely<Database>({
    dialect: serialDialect(
      async (text, params) => {
        const r = await lite.query<Record<string, unknown>>(text, params as unknown[]);
        return { rows: r.rows, ...(r.affectedRows !== undefined ? { affectedRows: r.affectedRows } : {}) };
      },
      () => lite.close(),
    ),
  });
  return { db, kind: 'embedded', close: () => db.destroy(), dump: () => lite.dumpDataDir('none') };
}

