// `npm run bench -- matches [seconds] [counts...]`: concurrent 2-player arena
// matches of the demo game at the fixed 10 Hz tick. For each count the node
// runs that many matches with two connected players each (matched by the
// matchmaker, steering twice a second) and reports the tick lateness of the
// shared wheel: the largest count whose p99 stays under 20 ms is the result.
// Baseline in the same run: the wheel's lateness with a single match (the
// timer's own jitter). Target and load generator are separate processes.
import { child, table } from './_children';

const seconds = Number(process.argv[2] ?? 10);
const counts = process.argv.length > 3 ? process.argv.slice(3).map(Number) : [1, 50, 100, 200, 300, 500, 750, 1000, 1250];
const BUDGET_MS = 20;

const rows: (string | number)[][] = [];
let best = 0;
{
  for (const n of counts) {
    // A fresh target and load generator per count, so neither carries the
    // previous count's sockets or garbage into this one's measurement.
    // Node flags for the target, e.g. SVC_BENCH_NODE_FLAGS="--max-semi-space-size=64".
    const target = await child('_ws-target.ts', ['svc'], (process.env.SVC_BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean));
    const load = await child('_ws-load.ts');
    try {
      const tokens = (await target.request('provision', { n: 2 * n })).tokens;
      await load.request('matches', { port: target.first.port, tokens }, 600_000);
      // Let the burst of match starts settle before measuring.
      await new Promise((r) => setTimeout(r, 2000));
      await target.request('lateness-reset');
      const cpu0 = (await target.request('cpu')).cpuMs;
      await load.request('counters');
      const before = await load.request('counters');
      await new Promise((r) => setTimeout(r, seconds * 1000));
      const late = await target.request('lateness');
      const cpu1 = (await target.request('cpu')).cpuMs;
      const after = await load.request('counters');
      const states = after.states - before.states;
      const expected = 2 * n * 10 * seconds;
      const ok = late.p99 < BUDGET_MS;
      if (ok) best = Math.max(best, n);
      rows.push([
        n === 1 ? '1 (baseline)' : n,
        late.count,
        late.p50.toFixed(2),
        late.p99.toFixed(2),
        late.max.toFixed(1),
        `${((states / expected) * 100).toFixed(1)} %`,
        `${((cpu1 - cpu0) / (seconds * 10)).toFixed(0)} %`,
        after.finished,
        ok ? 'yes' : 'no',
      ]);
      await load.request('release');
      if (!ok && n > 1) break;
    } finally {
      await Promise.all([load.stop(), target.stop()]);
    }
  }
  table(
    `Concurrent 2-player arena matches at 10 Hz: ${seconds} s per count, loopback`,
    ['matches', 'ticks measured', 'p50 lateness ms', 'p99 lateness ms', 'max ms', 'match.state delivered', 'server CPU', 'finished early', `p99 < ${BUDGET_MS} ms`],
    rows,
  );
  console.log(`\nlargest count with p99 tick lateness < ${BUDGET_MS} ms: ${best} (target ≥ 1000) — ${best >= 1000 ? 'met' : 'NOT met'}`);
}
