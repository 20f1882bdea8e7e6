// Memory a deployment needs: `npm run bench -- memory [--players 10000] [--idle-ms 5000]`
//
// The production host (dist/host.mjs) idle on the embedded database (first
// boot on a new data directory, then a restart on it), then after registering
// N players; the same on the PostgreSQL server at DATABASE_URL (default the
// local test server; skipped when unreachable). Baseline: an idle bare node
// process, measured in the same run. Target: the embedded default fits a
// 512 MB container with room to spare (issue target ≤ 200 MB idle).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { start, startHost, svcRoot, type Child } from './_children';
import { numberOption } from './_options';

const PLAYERS = numberOption('players', 10_000);
const IDLE_MS = numberOption('idle-ms', 5000);
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const MB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rows: [string, string][] = [];
const row = (name: string, bytes: number, extra = '') => {
  rows.push([name, `${(bytes / MB).toFixed(0)} MB${extra}`]);
  console.log(`  ${name}: ${(bytes / MB).toFixed(0)} MB${extra}`);
};

async function idleRss(h: Child): Promise<number> {
  await sleep(IDLE_MS);
  return h.rss();
}

async function registerMany(h: Child, n: number): Promise<number> {
  const started = Date.now();
  let next = 0;
  let peak = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const res = await fetch(`${h.url}/api/v1/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: `mem_${i}`, password: 'memory bench' }),
      });
      if (res.status !== 200) throw new Error(`register ${i}: ${res.status} ${await res.text()}`);
      await res.arrayBuffer();
      if (i % 500 === 0) {
        peak = Math.max(peak, h.rss());
        process.stdout.write(`\r  registered ${i}/${n}`);
      }
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  process.stdout.write(`\r  registered ${n}/${n} in ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
  return Math.max(peak, h.rss());
}

async function measure(label: string, env: Record<string, string>, restart: boolean): Promise<void> {
  console.log(`${label}:`);
  let h = await startHost(env);
  try {
    await h.ready(120_000);
    row(`${label}, first boot, idle`, await idleRss(h));
    if (restart) {
      await h.stop();
      h = await startHost(env);
      await h.ready(120_000);
      row(`${label}, restart, idle`, await idleRss(h));
    }
    const peak = await registerMany(h, PLAYERS);
    row(`${label}, ${PLAYERS} players registered, idle`, await idleRss(h), ` (peak while registering ${(peak / MB).toFixed(0)} MB)`);
  } finally {
    await h.stop();
  }
}

async function bareNode(): Promise<number> {
  const bare = start({ name: 'bare node', args: ['-e', 'setInterval(() => {}, 1000)'] });
  try {
    await sleep(1000);
    return bare.rss();
  } finally {
    await bare.stop();
  }
}

async function main(): Promise<void> {
  if (spawnSync(process.execPath, ['esbuild.config.mjs'], { cwd: svcRoot, stdio: 'inherit' }).status !== 0) throw new Error('build failed');
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-memory-'));
  const config = path.join(dir, 'settings.json');
  // Memory, not hashing, is measured: cheap hashes and an open register bucket keep setup short.
  writeFileSync(config, JSON.stringify({ pbkdf2_iterations: 1000, rate_limits: { register: { limit: 100_000, window: 1000 } }, log_level: 'warn' }));
  try {
    row('baseline: bare node, idle', await bareNode());
    await measure('embedded', { SVC_DATA_DIR: path.join(dir, 'data'), SVC_CONFIG: config }, true);

    const schema = `mem_${Date.now().toString(36)}`;
    const admin = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
    const reachable = await admin.connect().then(() => true, () => false);
    if (!reachable) {
      rows.push(['postgres', `skipped (${url} unreachable)`]);
    } else {
      await admin.query(`create schema ${schema}`);
      try {
        const u = new URL(url);
        u.searchParams.set('options', `-c search_path=${schema}`);
        await measure('postgres', { DATABASE_URL: u.toString(), SVC_CONFIG: config }, false);
      } finally {
        await admin.query(`drop schema if exists ${schema} cascade`);
        await admin.end();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const width = Math.max(...rows.map(([k]) => k.length));
  console.log('\nmemory (resident set size)');
  for (const [k, v] of rows) console.log(`${k.padEnd(width)}  ${v}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
