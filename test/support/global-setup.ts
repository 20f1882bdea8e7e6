import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { openEmbedded } from '../../host/infra/database';
import { migrateToLatest } from '../../runtime/platform/migrate';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseImage: string;
    /** Each test database appends its creation time (ms) here, one line each. */
    databaseTimings: string;
  }
}

/**
 * PGlite's first start costs seconds, so the suite migrates one embedded
 * database once and every test file starts from a copy of its data directory.
 */
export default async function setup(project: TestProject): Promise<() => void> {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-test-'));
  const file = path.join(dir, 'migrated.tar');
  const started = Date.now();
  const timings = path.join(dir, 'timings.txt');
  writeFileSync(timings, '');
  project.provide('databaseTimings', timings);
  const teardown = () => {
    const ms = readFileSync(timings, 'utf8').split('\n').filter(Boolean).map(Number);
    if (ms.length > 0) {
      const mean = ms.reduce((a, b) => a + b, 0) / ms.length;
      process.stdout.write(`test databases: ${ms.length} created, mean ${mean.toFixed(0)} ms, max ${Math.max(...ms)} ms each\n`);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  if (process.env.DATABASE_URL) {
    process.stdout.write(`test databases: PostgreSQL at ${redactUrl(process.env.DATABASE_URL)} (a fresh schema per file)\n`);
    project.provide('databaseImage', '');
    return teardown;
  }
  const embedded = await openEmbedded({});
  await migrateToLatest(embedded.db);
  const image = await embedded.dump!();
  writeFileSync(file, Buffer.from(await image.arrayBuffer()));
  await embedded.close();
  process.stdout.write(`test databases: embedded PGlite (a clone per file); migrated image built in ${Date.now() - started} ms\n`);
  project.provide('databaseImage', file);
  return teardown;
}

function redactUrl(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@]*@/, '//$1:***@');
}
