import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { openEmbedded } from '../../host/infra/database';
import { migrateToLatest } from '../../runtime/platform/migrate';
import { dropSchemas, leftoverSchemas } from './database';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A tarball of a migrated embedded data directory. */
    databaseImage: string;
    /** Each test database appends its creation time (ms) here and whether it was a reused one, one line each. */
    databaseTimings: string;
    /** Every schema this run makes on the server starts with it; the teardown drops what is left. */
    schemaPrefix: string;
  }
}

/**
 * Once per run: builds dist/ when stale; migrates one embedded database and
 * keeps its data directory as an image, from which every embedded test
 * database is cloned (and reused, test/support/database.ts) and the
 * production hosts' data directories are unpacked; names this run's server
 * schemas, and drops what is left of them (and of killed runs) at the end.
 */
export default async function setup(project: TestProject): Promise<() => void> {
  // The production hosts, the embedding test and the browser tests run dist/; built once
  // here when a source is newer than it, never by a test while others read it.
  const { buildIfStale } = (await import('../../host/fresh-dist.mjs' as string)) as { buildIfStale(bundle: string): string };
  buildIfStale('host.mjs');
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-test-'));
  const file = path.join(dir, 'migrated.tar');
  const started = Date.now();
  const timings = path.join(dir, 'timings.txt');
  writeFileSync(timings, '');
  project.provide('databaseTimings', timings);
  const prefix = `t_${Date.now().toString(36)}_`;
  project.provide('schemaPrefix', prefix);
  const teardown = async () => {
    try {
      const url = process.env.DATABASE_URL;
      if (url) {
        const kept = await dropSchemas(url, await leftoverSchemas(url, prefix, STALE_RUN_MS));
        if (kept.length > 0) process.stdout.write(`test databases: ${kept.length} schemas held by a lock were left: ${kept.join(', ')}\n`);
      }
    } finally {
      summarise(timings);
      rmSync(dir, { recursive: true, force: true });
    }
  };
  // The image also seeds the production hosts' data directories (migratedDataDir), with either database.
  const embedded = await openEmbedded({});
  await migrateToLatest(embedded.db);
  const image = await embedded.dump!();
  writeFileSync(file, Buffer.from(await image.arrayBuffer()));
  await embedded.close();
  project.provide('databaseImage', file);
  if (process.env.DATABASE_URL) {
    process.stdout.write(`test databases: PostgreSQL at ${redactUrl(process.env.DATABASE_URL)} (a migrated schema per file, emptied and reused by the next file of its fork)\n`);
  } else {
    process.stdout.write(`test databases: embedded PGlite (a clone of the migrated image, emptied and reused by the next file of its fork); migrated image built in ${Date.now() - started} ms\n`);
  }
  return teardown;
}

/** One line per kind (new, reused): how many test databases and how long they took to hand out. */
function summarise(timings: string): void {
  const lines = readFileSync(timings, 'utf8').split('\n').filter(Boolean).map((l) => l.split(' '));
  for (const how of ['new', 'reused']) {
    const ms = lines.filter((l) => l[1] === how).map((l) => Number(l[0]));
    if (ms.length === 0) continue;
    const mean = ms.reduce((a, b) => a + b, 0) / ms.length;
    process.stdout.write(`test databases: ${ms.length} ${how === 'new' ? 'created' : 'reused'}, mean ${mean.toFixed(0)} ms, max ${Math.max(...ms)} ms each\n`);
  }
}

/** A run that started this long ago and left schemas was killed before its teardown. */
const STALE_RUN_MS = 6 * 60 * 60 * 1000;

function redactUrl(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@]*@/, '//$1:***@');
}
