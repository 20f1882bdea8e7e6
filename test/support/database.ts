import { appendFileSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { inject } from 'vitest';
import { openEmbedded, openPostgres, type OpenDatabase } from '../../host/infra/database';
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
 * A fresh, migrated database for one test file: a clone of the migrated
 * PGlite image, or, with DATABASE_URL set, a new schema on that server
 * (dropped again on close).
 */
export async function freshDatabase(server: ServerConnection = {}): Promise<OpenDatabase & { setupMs: number; schema?: string }> {
  const started = Date.now();
  const url = process.env.DATABASE_URL;
  if (url) {
    const schema = `t_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`create schema ${schema}`);
    await admin.end();
    const opened = openPostgres({
      url: server.url ?? url,
      poolSize: 5,
      schema,
      connectTimeoutMs: server.connectTimeoutMs ?? DEFAULTS.db_connect_timeout_ms,
      statementTimeoutMs: server.statementTimeoutMs ?? DEFAULTS.db_statement_timeout_ms,
      ...(server.applicationName ? { applicationName: server.applicationName } : {}),
    });
    const migrator = openPostgres({ url, poolSize: 1, schema, connectTimeoutMs: 10_000, statementTimeoutMs: 60_000 });
    await migrateToLatest(migrator.db);
    await migrator.close();
    return {
      ...opened,
      schema,
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
