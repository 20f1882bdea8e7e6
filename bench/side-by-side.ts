// `npm run bench -- side-by-side [rounds] [seconds] [--matches 500] [--idle 10000] [--sockets 10000] [--only heartbeat,idle,storm,matches] [--match-workers n]`
//
// Issue 33's four socket figures for svc and for a bare `ws` server doing the
// least the same frames require, in one run, as ratios:
//  - heartbeat: server CPU per round trip, 1,000 clients paced at 50/s
//    (bare: the `bare` echo server of bench/ws.ts);
//  - idle sockets: heap per authenticated idle socket (bare: one Map entry
//    per socket);
//  - connect storm: connects per second, cold tokens, and server CPU per
//    connect (bare: one Map lookup);
//  - matches: server CPU per match tick, 2-player Lua arena matches at 10 Hz,
//    main thread and script worker together (bare: one JS timer per match
//    sending frames of svc's size to both players).
// svc is the production wiring (createHost, embedded database, worker lanes,
// the JSON logger at the default level writing to a sink); only the rate
// limits and idle timeouts are opened, since every client here shares one
// address and some sit idle on purpose. Each measurement has a fresh target
// and load generator; the target is pinned to CPU 0 and the load generator to
// CPU 1 (where `taskset` is missing, unpinned with the load generator at the
// lowest priority). Prints the median of the rounds with their range.
import { loadavg } from 'node:os';
import { canPin, forkChild, svcRevision, type Child } from './_children';
import { listOption, numberOption } from './_options';
import { progress, table } from './_report';

const positional = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && !all[i - 1]?.startsWith('--'));
const ROUNDS = Number(positional[0] ?? 3);
const SECONDS = Number(positional[1] ?? 10);
const MATCHES = numberOption('matches', 500);
const IDLE = numberOption('idle', 10_000);
const SOCKETS = numberOption('sockets', 10_000);
const ONLY = new Set(listOption('only') ?? ['heartbeat', 'idle', 'storm', 'matches']);
const CONNECTIONS = 1000;
const PACE_MS = 20;

const pinned = canPin();
const targetPlacement = pinned ? { cpus: '0' } : {};
const loadPlacement = pinned ? { cpus: '1' } : { lowPriority: true };
// Production settings but for what one loopback address and deliberately idle sockets would trip.
// `--match-workers n` sets svc's script placement; without it the default for the one CPU the target may use.
const matchWorkers = numberOption('match-workers', -1);
const svcArgs = JSON.stringify({
  productionLog: true,
  settings: { log_level: 'info', pbkdf2_iterations: 100_000, ...(matchWorkers >= 0 ? { match_workers: matchWorkers } : {}) },
});

type Kind = 'svc' | 'bare';

async function withPair<T>(target: Child, run: (load: Child) => Promise<T>): Promise<T> {
  try {
    const load = await forkChild('_ws-load.ts', [], loadPlacement);
    try {
      return await run(load);
    } finally {
      await load.stop();
    }
  } finally {
    await target.stop();
  }
}

const startTarget = (kind: Kind | 'bare-echo' | 'bare-json', extra: Record<string, unknown> = {}) =>
  kind === 'svc'
    ? forkChild('_ws-target.ts', ['svc', svcArgs], { ...targetPlacement, nodeFlags: ['--expose-gc'] })
    : forkChild('_ws-target.ts', [kind === 'bare' ? 'bare-game' : kind === 'bare-json' ? 'bare-json' : 'bare', JSON.stringify(extra)], { ...targetPlacement, nodeFlags: ['--expose-gc'] });

/** µs of target CPU per heartbeat round trip; `json` is the bare server that parses and answers JSON. */
async function heartbeat(kind: Kind | 'json'): Promise<number> {
  const target = await startTarget(kind === 'svc' ? 'svc' : kind === 'json' ? 'bare-json' : 'bare-echo');
  return withPair(target, async (load) => {
    const tokens = kind === 'svc' ? (await target.request('provision', { n: CONNECTIONS })).tokens : null;
    await load.request('heartbeat', { port: target.port, tokens, connections: CONNECTIONS, seconds: 2, paceMs: PACE_MS });
    const cpu0 = target.cpuMs();
    const r = await load.request('heartbeat', { port: target.port, tokens, connections: CONNECTIONS, seconds: SECONDS, paceMs: PACE_MS });
    const cpu = target.cpuMs() - cpu0;
    if (r.errors > 0) throw new Error(`${kind} heartbeat: ${r.errors} error frames`);
    progress(`  ${kind}: ${Math.round(r.rate)} round trips/s, p99 ${r.p99.toFixed(1)} ms`);
    return (cpu * 1000) / r.count;
  });
}

/** KB of heap per idle authenticated socket. */
async function idle(kind: Kind): Promise<number> {
  const target = await startTarget(kind);
  return withPair(target, async (load) => {
    const tokens = (await target.request('provision', { n: IDLE }, 600_000)).tokens;
    const before = await target.request('memory');
    await load.request('idle', { port: target.port, tokens }, 600_000);
    await new Promise((r) => setTimeout(r, 1000));
    const after = await target.request('memory');
    await load.request('release');
    if (after.sessions < IDLE) throw new Error(`${kind} idle: ${after.sessions} of ${IDLE} sessions`);
    return (after.heap - before.heap) / IDLE / 1024;
  });
}

/**
 * Connects per second, every token new to the target, and the target's CPU
 * per connect: one core of load generator opening sockets can be slower than
 * a bare server accepting them, and then only the CPU figure tells the two
 * servers apart.
 */
async function storm(kind: Kind): Promise<{ rate: number; us: number }> {
  const target = await startTarget(kind);
  return withPair(target, async (load) => {
    const tokens = (await target.request('provision', { n: SOCKETS }, 600_000)).tokens;
    const cpu0 = target.cpuMs();
    const r = await load.request('storm', { port: target.port, tokens, count: SOCKETS, concurrency: 500 }, 600_000);
    const cpu = target.cpuMs() - cpu0;
    if (r.failed > 0) throw new Error(`${kind} storm: ${r.failed} failed`);
    progress(`  ${kind}: ${Math.round(r.rate)} connects/s, ${((cpu * 1000) / SOCKETS).toFixed(0)} µs of server CPU each`);
    return { rate: r.rate, us: (cpu * 1000) / SOCKETS };
  });
}

/** Thread split of a match tick: the main thread, the busiest other thread (the script worker), and the rest (V8's helpers). */
type ThreadSplit = { main: number; worker: number; rest: number };

/** µs of target CPU (all threads) per match tick, split by thread; svc's also reports its frame size for bare's. */
async function matches(kind: Kind, stateBytes: number): Promise<{ us: number; split: ThreadSplit; stateBytes: number }> {
  const target = await startTarget(kind, { stateBytes });
  return withPair(target, async (load) => {
    const tokens = (await target.request('provision', { n: 2 * MATCHES })).tokens;
    await load.request('matches', { port: target.port, tokens }, 600_000);
    // The burst of match starts settles before the window.
    await new Promise((r) => setTimeout(r, 2000));
    const before = await load.request('counters');
    const cpu0 = target.cpuMs();
    const threads0 = target.threadCpuMs();
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    const cpu = target.cpuMs() - cpu0;
    const threads1 = target.threadCpuMs();
    const after = await load.request('counters');
    await load.request('release');
    const states = after.states - before.states;
    const delivered = states / (2 * MATCHES * 10 * SECONDS);
    progress(`  ${kind}: ${(delivered * 100).toFixed(1)} % of match.state frames delivered, ${after.finished} finished early`);
    // Ticks as the players saw them: a late or skipped tick costs the figure, as it would a player.
    const perTick = (ms: number) => (ms * 1000) / (states / 2);
    const others = [...threads1].filter(([tid]) => tid !== target.pid).map(([tid, ms]) => ms - (threads0.get(tid) ?? 0)).sort((a, b) => b - a);
    const split = {
      main: perTick(threads1.get(target.pid)! - threads0.get(target.pid)!),
      worker: perTick(others[0] ?? 0),
      rest: perTick(others.slice(1).reduce((a, b) => a + b, 0)),
    };
    return { us: perTick(cpu), split, stateBytes: Math.round((after.stateBytes - before.stateBytes) / states) };
  });
}

interface Scenario {
  name: string;
  unit: string;
  /** The issue's bound on svc / bare, or null where it sets none. */
  target: { op: '≤' | '≥'; ratio: number } | null;
  svc: number[];
  bare: number[];
}

const scenarios: Scenario[] = [
  { name: `heartbeat: server CPU per round trip (${CONNECTIONS} clients at 50/s)`, unit: 'µs', target: { op: '≤', ratio: 1.15 }, svc: [], bare: [] },
  // A reference, not svc: in the svc column a bare server that parses each frame and answers JSON, against the echo.
  { name: 'heartbeat, reference: bare ws parsing and answering JSON (svc column) vs the echo', unit: 'µs', target: null, svc: [], bare: [] },
  { name: `idle sockets: heap per authenticated socket (${IDLE})`, unit: 'KB', target: { op: '≤', ratio: 1.3 }, svc: [], bare: [] },
  { name: `connect storm: connects/s, cold tokens (${SOCKETS}, 500 in flight)`, unit: '/s', target: { op: '≥', ratio: 0.8 }, svc: [], bare: [] },
  { name: 'connect storm: server CPU per connect (same runs)', unit: 'µs', target: null, svc: [], bare: [] },
  { name: `matches: server CPU per match tick (${MATCHES} 2-player Lua matches, 10 Hz)`, unit: 'µs', target: null, svc: [], bare: [] },
];

const loads: number[] = [];
const splits: ThreadSplit[] = [];
progress(`${svcRevision()}; ${pinned ? 'targets on CPU 0, load generators on CPU 1' : 'taskset missing: unpinned, load generators at nice 19'}`);
for (let round = 1; round <= ROUNDS; round++) {
  loads.push(loadavg()[0]!);
  progress(`round ${round}/${ROUNDS}, load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  // Alternating which goes first, so neither always inherits the other's leftovers on the machine.
  const order: Kind[] = round % 2 ? ['svc', 'bare'] : ['bare', 'svc'];
  for (const kind of ONLY.has('heartbeat') ? order : []) {
    progress(` heartbeat, ${kind}`);
    scenarios[0]![kind].push(await heartbeat(kind));
  }
  if (ONLY.has('heartbeat')) {
    progress(' heartbeat, bare JSON');
    scenarios[1]!.svc.push(await heartbeat('json'));
    scenarios[1]!.bare.push(scenarios[0]!.bare[scenarios[0]!.bare.length - 1]!);
  }
  for (const kind of ONLY.has('idle') ? order : []) {
    progress(` idle sockets, ${kind}`);
    scenarios[2]![kind].push(await idle(kind));
  }
  for (const kind of ONLY.has('storm') ? order : []) {
    progress(` connect storm, ${kind}`);
    const r = await storm(kind);
    scenarios[3]![kind].push(r.rate);
    scenarios[4]![kind].push(r.us);
  }
  if (!ONLY.has('matches')) continue;
  // svc first: the bare loop sends frames the size svc's were.
  progress(' matches, svc');
  const svcMatches = await matches('svc', 0);
  scenarios[5]!.svc.push(svcMatches.us);
  splits.push(svcMatches.split);
  progress(` matches, bare (${svcMatches.stateBytes}-byte frames)`);
  scenarios[5]!.bare.push((await matches('bare', svcMatches.stateBytes)).us);
}
loads.push(loadavg()[0]!);

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const digits = (x: number) => (x >= 100 ? 0 : x >= 10 ? 1 : 2);
const figure = (xs: number[], unit: string) => {
  const d = digits(median(xs));
  const spread = xs.length > 1 ? ` (${Math.min(...xs).toFixed(d)}-${Math.max(...xs).toFixed(d)})` : '';
  return `${median(xs).toFixed(d)} ${unit}${spread}`;
};
const rows = scenarios.filter((s) => s.svc.length > 0).map((s) => {
  const ratios = s.svc.map((v, i) => v / s.bare[i]!);
  const r = median(ratios);
  const met = s.target === null ? '—' : (s.target.op === '≤' ? r <= s.target.ratio : r >= s.target.ratio) ? 'met' : 'NOT met';
  return [
    s.name,
    figure(s.svc, s.unit),
    figure(s.bare, s.unit),
    `${r.toFixed(2)}×${ratios.length > 1 ? ` (${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)})` : ''}`,
    s.target ? `${s.target.op} ${s.target.ratio}×` : 'none',
    met,
  ];
});
table(
  `svc beside bare ws: median of ${ROUNDS} round${ROUNDS > 1 ? 's' : ''} (range), ${SECONDS} s windows, ${pinned ? 'target on CPU 0, load generator on CPU 1' : 'unpinned, load generator at nice 19'}, load average ${loads.map((l) => l.toFixed(2)).join(' → ')}`,
  ['scenario', 'svc', 'bare ws', 'svc / bare', 'target', ''],
  rows,
);
if (splits.length > 0) {
  const part = (pick: (s: ThreadSplit) => number) => figure(splits.map(pick), 'µs');
  console.log(`svc's match tick by thread: main thread ${part((s) => s.main)}, script worker (the busiest other thread) ${part((s) => s.worker)}, the rest (V8's helper threads) ${part((s) => s.rest)}`);
}
