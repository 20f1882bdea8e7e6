// `npm run soak -- db-outage [--writers 20] [--seconds 60] [--cut 15] [--mode reset|blackhole]`
//
// The production host (dist/host.mjs, as `npm start` runs it) in front of the
// PostgreSQL server at DATABASE_URL (default the local test server), reached
// through a TCP relay this script owns. Honest writers send direct messages
// the whole time; a third of the way in, the relay resets every connection and
// refuses new ones for the cut (or, with `--mode blackhole`, silently stops
// relaying, as a dead host or a dropping partition does), then heals. Prints requests by status, the
// longest request, time to ready after the restore, and acknowledged writes
// lost or duplicated (both must be 0), and checks the node never exited.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { TcpProxy } from '../../tools/faults/tcp-proxy';
import { startHost, svcRoot } from '../_children';
import { auditAcked, startWriters } from '../../tools/faults/writers';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const WRITERS = arg('writers', 20);
const SECONDS = arg('seconds', 60);
const CUT_SECONDS = arg('cut', 15);
const modeAt = process.argv.indexOf('--mode');
const MODE = modeAt >= 0 ? process.argv[modeAt + 1] : 'reset';
if (MODE !== 'reset' && MODE !== 'blackhole') throw new Error(`--mode: reset or blackhole, not ${MODE}`);
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const built = spawnSync(process.execPath, ['esbuild.config.mjs'], { cwd: svcRoot, stdio: 'inherit' });
  if (built.status !== 0) throw new Error('build failed');

  const schema = `soak_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`create schema ${schema}`);

  const proxy = await TcpProxy.start({ host: new URL(url).hostname, port: Number(new URL(url).port || 5432) });
  const nodeUrl = new URL(proxy.rewrite(url));
  nodeUrl.searchParams.set('options', `-c search_path=${schema}`);
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-soak-'));
  const config = path.join(dir, 'settings.json');
  // Setup registers the writers from one address; the soak measures outages, not the register bucket.
  writeFileSync(config, JSON.stringify({ rate_limits: { register: { limit: 1000, window: 1000 } }, log_level: 'warn' }));
  const host = await startHost({ DATABASE_URL: nodeUrl.toString(), SVC_CONFIG: config });
  const base = host.url;

  try {
    const ready = (withinMs: number) => host.ready(withinMs);
    await ready(30_000);
    const register = async (i: number) => {
      const res = await fetch(`${base}/api/v1/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: `soak_${i}_${Date.now().toString(36)}`, password: 'soak password' }),
      });
      if (res.status !== 200) throw new Error(`register: ${res.status} ${await res.text()}`);
      return (await res.json()) as { player_id: string; access_token: string };
    };
    const recipient = await register(0);
    const senders = [];
    for (let i = 1; i <= WRITERS; i++) senders.push(await register(i));

    const writers = startWriters({
      url: base,
      tokens: senders.map((s) => s.access_token),
      recipientId: recipient.player_id,
      writers: WRITERS,
      tag: schema,
      clientTimeoutMs: 30_000,
    });
    const cutAt = Math.round((SECONDS - CUT_SECONDS) / 3);
    console.log(`${WRITERS} writers for ${SECONDS} s; the database is cut (${MODE}) at ${cutAt} s for ${CUT_SECONDS} s`);
    await sleep(cutAt * 1000);
    if (MODE === 'reset') proxy.reset();
    else proxy.blackhole();
    const cutStarted = Date.now();
    let notReadyAfterMs: number | null = null;
    while (Date.now() - cutStarted < CUT_SECONDS * 1000) {
      if (notReadyAfterMs === null) {
        const res = await fetch(`${base}/api/v1/health/ready`, { signal: AbortSignal.timeout(2000) }).catch(() => null);
        if (res?.status === 503) notReadyAfterMs = Date.now() - cutStarted;
      }
      await sleep(notReadyAfterMs === null ? 20 : 250);
    }
    proxy.restore();
    const readyAfterMs = await ready(30_000);
    await sleep(Math.max(0, (SECONDS - cutAt - CUT_SECONDS) * 1000 - readyAfterMs));
    const stats = await writers.stop();
    const audit = await auditAcked(url, schema, stats.acked);

    const rows: [string, string][] = [
      ['requests', String(stats.requests)],
      ...[...stats.byStatus].sort(([a], [b]) => a - b).map(([status, n]): [string, string] => [`  status ${status}`, String(n)]),
      ...[...stats.errors].map(([key, n]): [string, string] => [`    ${key}`, String(n)]),
      ['  no answer (client gave up after 30 s)', String(stats.unanswered)],
      ['longest request', `${stats.longestMs} ms`],
      ['readiness 503 after the cut', notReadyAfterMs === null ? 'never' : `${notReadyAfterMs} ms`],
      ['ready after the restore', `${readyAfterMs} ms`],
      ['acknowledged writes', String(stats.acked.length)],
      ['acknowledged writes lost', String(audit.lost.length)],
      ['acknowledged writes duplicated', String(audit.duplicated.length)],
      ['node process', host.proc.exitCode === null && host.proc.signalCode === null ? 'still running' : 'EXITED'],
    ];
    const width = Math.max(...rows.map(([k]) => k.length));
    console.log('\ndb-outage soak');
    for (const [k, v] of rows) console.log(`${k.padEnd(width)}  ${v}`);
    const events = [...host.events].filter(([e]) => e.startsWith('database') || e.startsWith('migrations'));
    if (events.length) console.log(`\nnode log events: ${events.map(([e, n]) => `${e} ×${n}`).join(', ')}`);
    if (audit.lost.length || audit.duplicated.length || host.proc.exitCode !== null) process.exitCode = 1;
  } finally {
    await host.stop();
    await proxy.close();
    await admin.query(`drop schema if exists ${schema} cascade`);
    await admin.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
