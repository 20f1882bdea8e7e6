// `npm run bench -- connect-storm [--sockets 10000] [--concurrency 500]`
//
// After a deploy every player reconnects at once: each socket opens and sends
// session.connect with its own access token, which the node has never seen
// (token cache cold), and stays open until the storm is over. Prints connects
// per second for the service on the embedded database and on the PostgreSQL
// server at DATABASE_URL (default the local test database; skipped when
// unreachable) beside a bare `ws` server answering the same first frame, all
// measured in this run, with the load generator in its own process.
import pg from 'pg';
import { forkChild } from './_children';
import { progress, table } from './_report';
import { numberOption } from './_options';

const SOCKETS = numberOption('sockets', 10_000);
const CONCURRENCY = numberOption('concurrency', 500);

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = `storm_${Date.now().toString(36)}`;
const admin = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
const postgres = await admin.connect().then(() => true, () => false);
if (postgres) await admin.query(`create schema ${schema}`);

const targets = [
  { kind: 'bare', label: 'bare ws, first frame answered (baseline)', args: [] as string[] },
  { kind: 'svc', label: 'svc session.connect, cold tokens, embedded database', args: [] },
  ...(postgres ? [{ kind: 'svc', label: 'svc session.connect, cold tokens, PostgreSQL', args: [JSON.stringify({ postgres: { url, schema } })] }] : []),
];
const load = await forkChild('_ws-load.ts');
const rows: (string | number)[][] = [];
const rates: Record<string, number> = {};
try {
  for (const { kind, label, args } of targets) {
    const target = await forkChild('_ws-target.ts', [kind, ...args]);
    try {
      let tokens: string[] | null = null;
      if (kind === 'svc') {
        progress(`${label}: provisioning ${SOCKETS} players with access tokens`);
        tokens = (await target.request('provision', { n: SOCKETS }, 600_000)).tokens;
      }
      progress(`${label}: ${SOCKETS} sockets connecting, ${CONCURRENCY} at a time`);
      const r = await load.request('storm', { port: target.port, tokens, count: SOCKETS, concurrency: CONCURRENCY }, 600_000);
      rates[label] = r.rate;
      rows.push([label, SOCKETS, Math.round(r.rate), r.seconds.toFixed(1), r.failed]);
    } finally {
      await target.stop();
    }
  }
} finally {
  await load.stop();
  if (postgres) {
    await admin.query(`drop schema if exists ${schema} cascade`);
    await admin.end();
  }
}
if (!postgres) rows.push(['svc session.connect, PostgreSQL', SOCKETS, `skipped (${url} unreachable)`, '', '']);
table(`Connect storm: ${SOCKETS} sockets, ${CONCURRENCY} in flight, loopback`, ['target', 'sockets', 'connects/s', 'seconds', 'failed'], rows);
const embedded = rates[targets[1]!.label]!;
console.log(`\nsvc: ${Math.round(embedded)} connects/s on the embedded database (target ≥ 3,000/s) — ${embedded >= 3000 ? 'met' : 'NOT met'}; bare ws: ${Math.round(rates[targets[0]!.label]!)}/s`);
