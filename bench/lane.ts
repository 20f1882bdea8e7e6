// `npm run bench -- lane [seconds] [counts...] [--batch n]`: the CPU a script lane spends per
// match tick, in this process, on the production lane code (ScriptRunner with the lane kinds,
// the demo game's arena), driven as a worker is driven: every 5 ms a batch of the ticks due in
// that slot (a twentieth of the matches, so each ticks at 10 Hz) with the inputs that arrived
// since (0.4 a match tick, for any match, as the pool sends them), and the thread asleep
// between batches. No sockets and no crossing: what is left is the lane's own work. The
// baseline, in the same run, is the first count (default 100 matches). `--batch n` holds the
// batch at n ticks instead (each match then ticks every count/n slots, not at 10 Hz): the
// work per batch stays the same and only the number of matches whose data lies between two
// ticks of one changes, which is what pushes a match's data out of the CPU's caches
// (decision 0076).
import { loadGameDirectory } from '../host/game-directory';
import { LANE_KINDS } from '../host/realtime/lane-kinds';
import type { Command } from '../host/realtime/lanes/protocol';
import { ScriptRunner } from '../host/realtime/lanes/runner';
import { TickWheel } from '../host/realtime/lanes/tick-wheel';
import { DEFAULT_BUDGETS } from '../runtime/lua/host-interface';
import { uuidv7Source } from '../runtime/platform/ids';
import { silentLogger } from '../runtime/platform/log';
import { numberOption } from './_options';
import { progress, table } from './_report';

const positional = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && !all[i - 1]?.startsWith('--'));
const seconds = Number(positional[0] ?? 4);
const given = positional.slice(1).map(Number).filter((n) => n > 0);
const counts = given.length > 0 ? given : [100, 500, 2000];
/** Ticks a batch when held fixed (`--batch`); 0: a twentieth of the matches, as the wheel's grid makes them. */
const BATCH = numberOption('batch', 0);
/** Batches a 100 ms turn: the wheel's grid for worker lanes. */
const TURN_SLOTS = 100 / TickWheel.GRID;

const game = loadGameDirectory('examples/demo-game', {}, silentLogger);
const arena = game.info.modes.get('arena')!;
const allow = { ok: true, retryAfterMs: 0 } as const;

/** µs of this process's CPU per match tick over `seconds`, after a second of warm-up. */
async function perTick(matches: number): Promise<{ us: number; ticks: number; frames: number }> {
  const ids = uuidv7Source();
  const runner = new ScriptRunner(
    {
      source: game.source,
      budgets: DEFAULT_BUDGETS,
      bindings: {},
      failingTicksMax: 50,
      rpc: false,
      limits: { take: () => allow, check: () => allow },
      clock: { now: Date.now },
      ids,
    },
    LANE_KINDS,
  );
  const matchIds = Array.from({ length: matches }, () => ids.uuid());
  const players = matchIds.map(() => [ids.uuid(), ids.uuid()] as const);
  let req = 1;
  for (let i = 0; i < matches; i++) {
    runner.run([{ kind: 'match', op: 'create', req: req++, matchId: matchIds[i]!, mode: arena }]);
    runner.run(players[i]!.map((playerId) => ({ kind: 'match', op: 'join', req: req++, matchId: matchIds[i]!, playerId, ctx: {} }) as Command));
  }
  const slots = BATCH > 0 ? Math.max(1, Math.round(matches / BATCH)) : TURN_SLOTS;
  let slot = 0;
  let ticks = 0;
  let frames = 0;
  let cpuUs = 0;
  const started = Date.now();
  await new Promise<void>((resolve) => {
    const turn = () => {
      const elapsed = Date.now() - started;
      if (elapsed > (seconds + 1) * 1000) return resolve();
      const due: string[] = [];
      for (let i = slot; i < matches; i += slots) due.push(matchIds[i]!);
      const batch: Command[] = [];
      for (let k = 0; k < due.length * 0.4; k++) {
        const m = Math.floor(Math.random() * matches);
        batch.push({ kind: 'match', op: 'input', matchId: matchIds[m]!, playerId: players[m]![k % 2]!, input: { dx: 1, dy: 0 } });
      }
      batch.push({ kind: 'match', op: 'tick', matchIds: due, due: Date.now() });
      const before = process.cpuUsage();
      const events = runner.run(batch);
      const cpu = process.cpuUsage(before);
      if (elapsed > 1000) {
        cpuUs += cpu.user + cpu.system;
        ticks += due.length;
        for (const e of events) if (e.kind === 'match' && e.k === 'states') frames += e.frames.length;
      }
      slot = (slot + 1) % slots;
      setTimeout(turn, TickWheel.GRID);
    };
    turn();
  });
  runner.close();
  return { us: cpuUs / ticks, ticks, frames };
}

const rows: (string | number)[][] = [];
let baseline = 0;
for (const n of counts) {
  progress(`${n} matches`);
  const r = await perTick(n);
  baseline ||= r.us;
  rows.push([n, BATCH > 0 ? BATCH : Math.ceil(n / TURN_SLOTS), r.us.toFixed(1), `${(r.us / baseline).toFixed(2)}×`, r.ticks, r.frames]);
}
table(
  `A script lane's CPU per match tick, a batch every ${TickWheel.GRID} ms${BATCH > 0 ? ` of ${BATCH} ticks` : ', each match at 10 Hz'}, ${seconds} s per count (baseline: the first count)`,
  ['matches', 'ticks a batch', 'µs CPU a match tick', 'against the baseline', 'ticks', 'frames'],
  rows,
);
game.close();
