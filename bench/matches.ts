// `npm run bench -- matches [seconds] [counts...] [main|pool] [equal] [one-core]`: concurrent 2-player arena
// matches of the demo game at the fixed 10 Hz tick, in two script modes in
// one run: `match_workers: 0` (the scripts on the main thread, as before the
// worker pool) and the default pool (usable CPUs - 1 workers, at least 1: decision 0058). For each
// count the node runs that many matches with two connected players each
// (matched by the matchmaker, steering twice a second) and reports the tick
// lateness (due on the wheel -> started in its lane, skipped ticks counted as
// one period late) and the share of `match.state` frames delivered. The
// result per mode is the largest count whose p99 stays under 20 ms with
// every frame delivered. Baseline in the same run: one match (the timers'
// own jitter). Target and load generator are separate processes; the load
// generator stands in for players on other machines, so it runs at the
// lowest CPU priority and takes the cores the node leaves idle (the word
// `equal` among the arguments gives it an equal share beside the node, as
// the figures before 2026-11-27 were taken: then the 2-core machine's p99 is
// set by the three busy processes taking turns on two cores). The word
// `one-core` pins the target to CPU 0 and the load generator to CPU 1 (a
// 1-vCPU deployment: the node sees one usable CPU and places its lanes for
// it) and adds issue 33's client figure to the verdict: the gap between two
// `match.state` frames of one player, p99.9 ≤ 150 ms.
import { availableParallelism, loadavg } from 'node:os';
import { scriptWorkers } from '../host/realtime/lanes/usable-cpus';
import { canPin, forkChild } from './_children';
import { table } from './_report';

// A p99 over 10 s (150,000 ticks at 1,500 matches) is decided by one to three stalls of the
// shared cores; 30 s counts ten of them and says what the node sustains.
const seconds = Number(process.argv[2] ?? 30);
// Words among the counts pick the modes (`main`, `pool`); both run by default.
const words = process.argv.slice(3).filter((a) => !/^\d+$/.test(a));
const equalPriority = words.includes('equal');
const oneCore = words.includes('one-core');
if (oneCore && !canPin()) throw new Error('one-core needs taskset');
const picked = words.filter((w) => w !== 'equal' && w !== 'one-core');
const given = process.argv.slice(3).filter((a) => /^\d+$/.test(a)).map(Number);
const counts = given.length > 0 ? given : [1, 500, 1000, 1250, 1500, 1750, 2000, 2500];
const BUDGET_MS = 20;
/** One core: the longest wait between two of a player's frames, at p99.9, a player may see (issue 33). */
const GAP_MS = 150;
/** Frames lost to sockets closing at the window's edges; anything more is a dropped frame. */
const DELIVERED = 0.995;
/** Issue 33: 2-player matches the worker pool sustains on two cores (1,500 before it). */
const TARGET = 2000;
const MODES: { key: string; name: string; settings: Record<string, unknown> }[] = [
  { key: 'main', name: 'main thread (match_workers: 0)', settings: { match_workers: 0 } },
  { key: 'pool', name: oneCore ? 'default settings on one CPU' : `worker pool (default: ${scriptWorkers({})} script workers)`, settings: {} },
].filter((m) => picked.length === 0 || picked.includes(m.key));

const best = new Map<string, number>();
for (const mode of MODES) {
  const rows: (string | number)[][] = [];
  best.set(mode.name, 0);
  for (const n of counts) {
    // A fresh target and load generator per count, so neither carries the
    // previous count's sockets or garbage into this one's measurement.
    // Node flags reach the target through SVC_BENCH_NODE_FLAGS, e.g. "--max-semi-space-size=64".
    const target = await forkChild('_ws-target.ts', ['svc', JSON.stringify({ settings: mode.settings })], oneCore ? { cpus: '0' } : {});
    const load = await forkChild('_ws-load.ts', [], oneCore ? { cpus: '1' } : { lowPriority: !equalPriority }).catch(async (err) => {
      await target.stop();
      throw err;
    });
    try {
      process.stdout.write(`${mode.name}: ${n} matches ... `);
      const tokens = (await target.request('provision', { n: 2 * n })).tokens;
      await load.request('matches', { port: target.port, tokens }, 600_000);
      // Let the burst of match starts settle before measuring.
      await new Promise((r) => setTimeout(r, 2000));
      await target.request('lateness-reset');
      const cpu0 = target.cpuMs();
      const loadCpu0 = load.cpuMs();
      const main0 = target.threadCpuMs().get(target.pid)!;
      const before = await load.request('counters');
      await load.request('gaps');
      await new Promise((r) => setTimeout(r, seconds * 1000));
      const late = await target.request('lateness');
      const cpu1 = target.cpuMs();
      const loadCpu1 = load.cpuMs();
      const main1 = target.threadCpuMs().get(target.pid)!;
      const after = await load.request('counters');
      const gap = await load.request('gaps');
      const states = after.states - before.states;
      const expected = 2 * n * 10 * seconds;
      const delivered = states / expected;
      const ok = late.p99 < BUDGET_MS && delivered >= DELIVERED && (!oneCore || gap.p999 <= GAP_MS);
      // The 1-minute load average includes this benchmark's own two or three busy threads.
      console.log(`p99 ${late.p99} ms, ${(delivered * 100).toFixed(1)} % delivered, ${oneCore ? `client gap p99.9 ${gap.p999} ms, ` : ''}load average ${loadavg()[0]!.toFixed(2)}`);
      if (ok) best.set(mode.name, Math.max(best.get(mode.name)!, n));
      rows.push([
        n === 1 ? '1 (baseline)' : n,
        late.count,
        late.skipped,
        late.p50.toFixed(0),
        late.p99.toFixed(0),
        late.max.toFixed(0),
        `${(delivered * 100).toFixed(1)} %`,
        // Off one core the load generator at the lowest priority reads in bursts: its gaps are its own.
        oneCore ? `${gap.p99} / ${gap.p999} / ${gap.max}` : '—',
        `${((cpu1 - cpu0) / (seconds * 10)).toFixed(0)} %`,
        `${((main1 - main0) / (seconds * 10)).toFixed(0)} %`,
        `${((loadCpu1 - loadCpu0) / (seconds * 10)).toFixed(0)} %`,
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
    `${mode.name}: concurrent 2-player arena matches at 10 Hz, ${seconds} s per count, loopback, ${oneCore ? 'target on CPU 0, load generator on CPU 1' : `${availableParallelism()} cores, load generator at ${equalPriority ? 'equal' : 'the lowest'} CPU priority`}`,
    ['matches', 'ticks', 'skipped', 'p50 lateness ms', 'p99 lateness ms', 'max ms', 'match.state delivered', 'client gap p99 / p99.9 / max ms', 'server CPU (all threads)', 'server main thread', 'load generator CPU', 'finished early', `p99 < ${BUDGET_MS} ms, all delivered${oneCore ? `, gap p99.9 ≤ ${GAP_MS} ms` : ''}`],
    rows,
  );
}
console.log('');
// One core: issue 33's bar is 500 (twice Colyseus's 250 on the same core).
const target = oneCore ? 500 : TARGET;
for (const [name, n] of best) console.log(`largest count with p99 tick lateness < ${BUDGET_MS} ms and every frame delivered${oneCore ? `, client gap p99.9 ≤ ${GAP_MS} ms` : ''}, ${name}: ${n} (target ≥ ${target}) — ${n >= target ? 'met' : 'NOT met'}`);
