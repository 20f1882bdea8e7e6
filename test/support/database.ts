import { appendFileSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { inject } from 'vitest';
import { openEmbedded, openPostgres, type OpenDatabase } from '../../host/database';
import { migrateToLatest } from '../../runtime/migrate';

let image: Blob | null = null;

/**
 * A fresh, migrated database for one test file: a clone of the migrated
 * PGlite image, or, with DATABASE_URL set, a new schema on that server
 * (dropped again on close).
 */
export async function freshDatabase(): Promise<OpenDatabase & { setupMs: number }> {
  const started = Date.now();
  const url = process.env.DATABASE_URL;
  if (url) {
    const schema = `t_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`create schema ${schema}`);
    await admin.end();
    const opened = openPostgres(url, 5, schema);
    await migrateToLatest(opened.db);
    return {
      ...opened,
      setupMs: record(started),
      async close() {
        await opened.close();
        const c = new pg.Client({ connectionString: url });
        await c.connect();
        await c.query(`drop schema if exists ${schema} cascade`);
        await c.end();
      },
    };
  }
  image ??= new Blob([readFileSync(inject('databaseImage'))]);
  const opened = await openEmbedded({ image });
  return { ...opened, setupMs: record(started) };
}

/** Reports the creation time to the global setup, which prints a summary. */
function record(started: number): number {
  const ms = Date.now() - started;
  appendFileSync(inject('databaseTimings'), `${ms}\n`);
  return ms;
}
