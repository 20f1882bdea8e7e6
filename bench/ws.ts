// `npm run bench -- ws [seconds]`: the WebSocket gateway.
//  1. Heartbeat round trips at 1,000 connections: svc (authenticated sockets,
//     the whole frame path) beside a bare `ws` echo server in the same run.
//  2. Memory per idle authenticated connection at 10,000 connections.
// Servers and the load generator are separate processes; loopback only.
import { forkChild } from './_children';
import { progress, table } from './_report';

const seconds = Number(process.argv[2] ?? 10);
const CONNECTIONS = 1000;
const IDLE = 10_000;
// The server admits 60 frames per connection per second; 50/s keeps a paced
// run under it. The unpaced bare run shows the echo ceiling.
const PACE_MS = 20;

const load = await forkChild('_ws-load.ts');
const rows: (string | number)[][] = [];
const results: Record<string, { rate: number }> = {};
try {
  // Like against like: both targets see the same paced load, so the ratio is the pipeline's cost.
  for (const [name, kind, pace] of [
    ['bare ws echo, paced 50/s/conn (baseline)', 'bare', PACE_MS],
    ['svc session.heartbeat, paced 50/s/conn', 'svc', PACE_MS],
  ] as const) {
    progress(`measuring ${name}`);
    const target = await forkChild('_ws-target.ts', [kind]);
    try {
      const tokens = kind === 'svc' ? (await target.request('provision', { n: CONNECTIONS })).tokens : null;
      // Warm-up, then the measured run.
      await load.request('heartbeat', { port: target.port, tokens, connections: CONNECTIONS, seconds: 2, paceMs: pace });
      const cpu0 = target.cpuMs();
      const r = await load.request('heartbeat', { port: target.port, tokens, connections: CONNECTIONS, seconds, paceMs: pace });
      const cpu1 = target.cpuMs();
      results[name] = r;
      // Server CPU per round trip is steadier than throughput on a shared machine.
      rows.push([name, Math.round(r.rate), r.p50.toFixed(2), r.p99.toFixed(2), (((cpu1 - cpu0) * 1000) / r.count).toFixed(1), r.errors]);
    } finally {
      await target.stop();
    }
  }
  table(`Heartbeat round trips: ${CONNECTIONS} connections, ${seconds} s, loopback`, ['target', 'round trips/s', 'p50 ms', 'p99 ms', 'server CPU µs/round trip', 'errors'], rows);
  const svc = results['svc session.heartbeat, paced 50/s/conn']!.rate;
  const bare = results['bare ws echo, paced 50/s/conn (baseline)']!.rate;
  console.log(`\nsvc / bare throughput, both paced: ${((svc / bare) * 100).toFixed(1)} % (target ≥ 50 %) — ${svc / bare >= 0.5 ? 'met' : 'NOT met'}`);

  const mem: (string | number)[][] = [];
  for (const kind of ['bare', 'svc'] as const) {
    progress(`idle memory: ${IDLE} ${kind} sockets`);
    const target = await forkChild('_ws-target.ts', [kind], { nodeFlags: ['--expose-gc'] });
    try {
      const tokens = kind === 'svc' ? (await target.request('provision', { n: IDLE })).tokens : Array(IDLE).fill('');
      const before = await target.request('memory');
      await load.request('idle', { port: target.port, tokens: kind === 'svc' ? tokens : null, ...(kind === 'bare' ? { count: IDLE } : {}) }, 600_000);
      await new Promise((r) => setTimeout(r, 1000));
      const after = await target.request('memory');
      await load.request('release');
      const per = (k: 'rss' | 'heap' | 'external') => ((after[k] - before[k]) / IDLE / 1024).toFixed(2);
      mem.push([kind === 'bare' ? 'bare ws (baseline)' : 'svc, authenticated', after.sessions ?? IDLE, per('heap'), per('external'), per('rss')]);
    } finally {
      await target.stop();
    }
  }
  table(`Idle connections: memory per connection at ${IDLE} (after forced GC)`, ['target', 'sockets', 'heap KB/conn', 'external KB/conn', 'RSS KB/conn'], mem);
  const svcRss = Number(mem[1]![4]);
  console.log(`\nsvc RSS per connection: ${svcRss} KB (target < 20 KB) — ${svcRss < 20 ? 'met' : 'NOT met'}`);
} finally {
  await load.stop();
}
