// `npm run bench -- connect-storm [--sockets 10000] [--concurrency 500]`
//
// After a deploy every player reconnects at once: each socket opens and sends
// session.connect with its own access token, which the node has never seen
// (token cache cold), and stays open until the storm is over. Prints connects per second for the service on the
// embedded database beside a bare `ws` server answering the same first frame,
// both measured in this run, with the load generator in its own process.
import { forkChild } from './_children';
import { progress, table } from './_report';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const SOCKETS = arg('sockets', 10_000);
const CONCURRENCY = arg('concurrency', 500);

const load = await forkChild('_ws-load.ts');
const rows: (string | number)[][] = [];
const rates: Record<string, number> = {};
try {
  for (const kind of ['bare', 'svc'] as const) {
    const target = await forkChild('_ws-target.ts', [kind]);
    try {
      let tokens: string[] | null = null;
      if (kind === 'svc') {
        progress(`provisioning ${SOCKETS} players with access tokens`);
        tokens = (await target.request('provision', { n: SOCKETS }, 600_000)).tokens;
      }
      progress(`${kind}: ${SOCKETS} sockets connecting, ${CONCURRENCY} at a time`);
      const r = await load.request('storm', { port: target.port, tokens, count: SOCKETS, concurrency: CONCURRENCY }, 600_000);
      rates[kind] = r.rate;
      rows.push([kind === 'bare' ? 'bare ws, first frame answered (baseline)' : 'svc session.connect, cold tokens, embedded database', SOCKETS, Math.round(r.rate), r.seconds.toFixed(1), r.failed]);
    } finally {
      await target.stop();
    }
  }
} finally {
  await load.stop();
}
table(`Connect storm: ${SOCKETS} sockets, ${CONCURRENCY} in flight, loopback`, ['target', 'sockets', 'connects/s', 'seconds', 'failed'], rows);
console.log(`\nsvc: ${Math.round(rates.svc!)} connects/s (target ≥ 3,000/s on the embedded database) — ${rates.svc! >= 3000 ? 'met' : 'NOT met'}; bare ws: ${Math.round(rates.bare!)}/s`);
