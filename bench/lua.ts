// `npm run bench -- lua`: how many arena tick()+viewJson() rounds one VM
// sustains, and what a VM costs in memory. Baseline in the same run: the
// same loop over an empty script (the fixed cost of the VM wrapper). Each
// figure twice, side by side: with fengari's internals (this process) and on
// its public API only (a child process, as a node with another fengari
// release runs; the internals are process-wide). Then what the main thread
// spends per match per tick when the lane runs on a worker (the crossing)
// against the lane on the main thread (the Lua itself).
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { serveParent, start } from './_children';
import { progress } from './_report';
import { loadGameDirectory } from '../host/game-directory';
import { ScriptPool } from '../host/realtime/lanes/pool';
import { LANE_KINDS } from '../host/realtime/lane-kinds';
import { DEFAULT_BUDGETS } from '../runtime/lua/host-interface';
import { DEFAULT_RATE_LIMITS } from '../runtime/contracts/settings';
import { MatchVm } from '../runtime/lua/match';
import { internals, internalsOff } from '../runtime/lua/fengari-internals';
import { silentLogger } from '../runtime/platform/log';
import { uuidv7Source } from '../runtime/platform/ids';
import type { MatchServices, ModeInfo, ScriptSource } from '../runtime/lua/host-interface';

const services: MatchServices = {
  log: silentLogger,
  limits: { take: () => ({ ok: true, retryAfterMs: 0 }), check: () => ({ ok: true, retryAfterMs: 0 }) },
  clock: { now: Date.now },
  ids: uuidv7Source(),
  broadcast() {},
  send() {},
  setJoinable() {},
};

/**
 * Round-robin over a pool of live VMs, as the match host does; no VM reaches
 * its 600-tick end. The rate is per second of this process's CPU time, so
 * other work on a shared machine does not move it (wall time would).
 */
function rounds(make: () => MatchVm, ms: number, pool = 100): number {
  const vms = Array.from({ length: pool }, make);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let n = 0;
  while (performance.now() - t0 < ms && n < pool * 500) {
    const vm = vms[n % pool]!;
    vm.input('a', { dx: 1, dy: 0 });
    vm.input('b', { dx: -1, dy: 1 });
    vm.tick();
    vm.viewJson('a');
    vm.viewJson('b');
    n++;
  }
  const cpu = process.cpuUsage(cpu0);
  const rate = (n * 1e6) / (cpu.user + cpu.system);
  for (const vm of vms) vm.close();
  return rate;
}

const game = loadGameDirectory('examples/demo-game', {}, silentLogger);
const arena = game.info.modes.get('arena')!;
const makeArena = () => {
  const vm = MatchVm.create({ source: game.source, mode: arena, matchId: 'bench', services });
  vm.init();
  vm.join('a');
  vm.join('b');
  return vm;
};
const empty: ScriptSource = {
  read: () => `function init() return {} end function join(i, s) return s end function handle_input(i, x, s) return s end
    function tick(s) return s end function get_state(i, s) return {} end`,
};
const emptyMode: ModeInfo = { ...arena, file: 'empty.lua' };
const makeEmpty = () => {
  const vm = MatchVm.create({ source: empty, mode: emptyMode, matchId: 'bench', services });
  vm.init();
  vm.join('a');
  vm.join('b');
  return vm;
};

type VmFigures = { baseline: number; arena: number; createMs: number; perVmKiB: number };

function measureVms(): VmFigures {
  // JIT warm-up: fengari's interpreter loop needs a few seconds before it runs at speed.
  rounds(makeEmpty, 1500);
  rounds(makeArena, 3000);
  const baseline = rounds(makeEmpty, 2000);
  const arena = rounds(makeArena, 3000);
  const t0 = performance.now();
  for (let i = 0; i < 20; i++) makeArena().close();
  const createMs = (performance.now() - t0) / 20;

  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const before = process.memoryUsage().heapUsed;
  const vms: MatchVm[] = [];
  for (let i = 0; i < 200; i++) {
    const vm = makeArena();
    vm.tick();
    vms.push(vm);
  }
  gc?.();
  const perVmKiB = (process.memoryUsage().heapUsed - before) / vms.length / 1024;
  for (const vm of vms) vm.close();
  return { baseline, arena, createMs, perVmKiB };
}

if (process.argv.includes('--public-api-child')) {
  // The child: the same figures without the internals, measured when asked.
  serveParent({ internals: internals !== null }, { figures: () => ({ figures: measureVms() }) });
} else {
  await main();
}

async function main(): Promise<void> {
  progress(`VM figures in this process (${internals ? 'fengari internals in use' : `internals off: ${internalsOff}`})`);
  const patched = measureVms();
  progress('VM figures in a child on the public API only');
  const other = start({
    name: 'lua (public API only)',
    args: ['--import', 'tsx', '--expose-gc', fileURLToPath(import.meta.url), '--public-api-child'],
    env: { ...process.env, SVC_FENGARI_UNPATCHED: '1' },
    ipc: true,
    echo: true,
  });
  let unpatched: VmFigures;
  try {
    await other.ready();
    if (other.info.internals) throw new Error('the public-API child runs the internals');
    unpatched = (await other.request<{ figures: VmFigures }>('figures')).figures;
  } finally {
    await other.stop();
  }

  const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`;
  console.table([
    { case: 'baseline: empty script (2 inputs + tick + 2 views), rounds/CPU-s', internals: Math.round(patched.baseline), public_api: Math.round(unpatched.baseline), speedup: ratio(patched.baseline, unpatched.baseline) },
    { case: 'arena (2 inputs + tick + 2 views), rounds/CPU-s', internals: Math.round(patched.arena), public_api: Math.round(unpatched.arena), speedup: ratio(patched.arena, unpatched.arena) },
    { case: 'creating an arena VM, ms', internals: patched.createMs.toFixed(1), public_api: unpatched.createMs.toFixed(1), speedup: ratio(unpatched.createMs, patched.createMs) },
    { case: 'memory per arena VM, KiB heap', internals: Math.round(patched.perVmKiB), public_api: Math.round(unpatched.perVmKiB), speedup: '' },
  ]);
  if (!internals) console.log(`note: this process ran without the internals too (${internalsOff})`);
  const needed = 1000 * 10; // 1,000 matches at 10 Hz
  console.log(`arena: one core sustains ${Math.round(patched.arena)} match-ticks/s; 1,000 matches at 10 Hz need ${needed}/s -> ${((needed / patched.arena) * 100).toFixed(0)}% of one core`);
  console.log(`creating an arena VM (libraries, prelude, script, init, 2 joins): ${patched.createMs.toFixed(1)} ms`);
  const gc = (globalThis as { gc?: () => void }).gc;
  console.log(`memory per arena VM: ${patched.perVmKiB.toFixed(0)} KiB heap${gc ? '' : ' (run with --expose-gc for a steadier number)'}`);

  progress('the crossing (lane on the main thread, then on one worker; with the internals)');
  const inThread = await crossing(0);
  const onWorker = await crossing(1);
  console.table([
    { lane: 'main thread (match_workers: 0)', main_thread_us_per_match_tick: inThread.mainUs.toFixed(1), ticks: inThread.ticks },
    { lane: 'one worker (the crossing)', main_thread_us_per_match_tick: onWorker.mainUs.toFixed(1), ticks: onWorker.ticks },
  ]);
  game.close();
}

/**
 * 500 arena matches driven as the wheel drives them (one batch per 1 ms slot,
 * 5 matches a slot) for `seconds`; main-thread busy time per match-tick.
 */
async function crossing(workers: number, matches = 500, seconds = 5): Promise<{ mainUs: number; ticks: number }> {
  let states = 0;
  const pool = new ScriptPool({
    workers,
    gameDir: game.dir,
    source: game.source,
    budgets: DEFAULT_BUDGETS,
    failingTicksMax: 50,
    memoryBytes: 512 * 1024 * 1024,
    rateLimits: DEFAULT_RATE_LIMITS,
    bindings: {},
    log: silentLogger,
    limits: services.limits,
    clock: services.clock,
    ids: services.ids,
    kinds: LANE_KINDS,
  });
  pool.subscribe('match', (e) => void (e.k === 'states' && (states += e.matchIds.length)));
  const join = (id: string, playerId: string) => pool.request(id, { ok: false }, (req) => ({ kind: 'match', op: 'join', req, matchId: id, playerId, ctx: {} }));
  const ids = Array.from({ length: matches }, (_, i) => `m${i}`);
  for (const id of ids) pool.assign(id);
  await Promise.all(ids.map((id) => pool.request(id, { ok: false }, (req) => ({ kind: 'match', op: 'create', req, matchId: id, mode: arena }))));
  await Promise.all(ids.flatMap((id) => [join(id, 'a'), join(id, 'b')]));
  const drive = (ms: number) =>
    new Promise<void>((resolve) => {
      const until = Date.now() + ms;
      let slot = 0;
      const turn = () => {
        if (Date.now() >= until) return resolve();
        // As on the wheel: the inputs that arrived before the slot, then the slot's ticks.
        const due = Date.now();
        for (let i = slot; i < matches; i += 100) pool.queue(ids[i]!, { kind: 'match', op: 'input', matchId: ids[i]!, playerId: 'a', input: { dx: 1, dy: 0 } });
        for (let i = slot; i < matches; i += 100) pool.queue(ids[i]!, { kind: 'match', op: 'tick', matchIds: [ids[i]!], due });
        pool.flush();
        slot = (slot + 1) % 100;
        setTimeout(turn, 1);
      };
      turn();
    });
  await drive(2000);
  states = 0;
  const elu0 = performance.eventLoopUtilization();
  await drive(seconds * 1000);
  const elu = performance.eventLoopUtilization(elu0);
  await pool.close();
  return { mainUs: (elu.active * 1000) / states, ticks: states };
}
