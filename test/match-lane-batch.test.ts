import { afterEach, describe, expect, it, vi } from 'vitest';
import { LANE_KINDS } from '../host/realtime/lane-kinds';
import type { LaneEvent } from '../host/realtime/lanes/protocol';
import { ScriptRunner } from '../host/realtime/lanes/runner';
import { DEFAULT_BUDGETS } from '../runtime/lua/host-interface';
import { MatchVm } from '../runtime/lua/match';
import { uuidv7Source } from '../runtime/platform/ids';
import { allowAll, matchMode, memorySource } from './fixtures/games/harness';

// A lane's side of the crossing (decision 0075): a slot's ticks arrive as one command and the batch's
// views leave as one `states` event of parallel lists, which the main thread reads by position.
const SCRIPT = `
function init(config) return { id = config.match_id, n = 0 } end
function join(id, state) return state end
function leave(id, state) return state end
function handle_input(id, input, state) return state end
function tick(state) state.n = state.n + 1 return state end
function get_state(id, state) return { id = state.id, you = id, n = state.n } end`;

function lane() {
  const lines: { level: string; event: string }[] = [];
  const runner = new ScriptRunner(
    {
      source: memorySource({ 'match.lua': SCRIPT }),
      budgets: { ...DEFAULT_BUDGETS, heavyMs: 500, lightMs: 200 },
      bindings: {},
      limits: allowAll,
      clock: { now: Date.now },
      ids: uuidv7Source(),
      failingTicksMax: 50,
      rpc: false,
    },
    LANE_KINDS,
  );
  const events: LaneEvent[] = [];
  const run = (commands: Parameters<ScriptRunner['run']>[0]) => {
    const out = runner.run(commands);
    for (const e of out) if (e.kind === 'lane' && e.k === 'log') lines.push({ level: e.level, event: e.event });
    events.push(...out);
    return out;
  };
  let req = 1;
  const open = (matchId: string) => {
    run([{ kind: 'match', op: 'create', req: req++, matchId, mode: matchMode('match.lua') }]);
    run([
      { kind: 'match', op: 'join', req: req++, matchId, playerId: 'a', ctx: {} },
      { kind: 'match', op: 'join', req: req++, matchId, playerId: 'b', ctx: {} },
    ]);
  };
  return { run, open, lines, close: () => runner.close() };
}

const statesOf = (events: LaneEvent[]) => events.filter((e) => e.kind === 'match' && e.k === 'states') as Extract<LaneEvent, { k: 'states' }>[];

afterEach(() => void vi.restoreAllMocks());

describe("a lane's batch of ticks", () => {
  it("answers a slot's ticks with one states event whose lists line up: each frame is its match's view for its player", () => {
    const l = lane();
    for (const id of ['m1', 'm2', 'm3']) l.open(id);
    const events = l.run([{ kind: 'match', op: 'tick', matchIds: ['m1', 'm2', 'm3'], due: Date.now() }]);
    const [states, ...more] = statesOf(events);
    expect(more).toEqual([]);
    expect(states!.matchIds).toEqual(['m1', 'm2', 'm3']);
    expect(states!.counts).toEqual([2, 2, 2]);
    expect(states!.to).toEqual(['a', 'b', 'a', 'b', 'a', 'b']);
    expect(states!.frames.map((f) => JSON.parse(f))).toEqual(
      ['m1', 'm2', 'm3'].flatMap((id) => ['a', 'b'].map((you) => ({ type: 'match.state', payload: { id, you, n: 1 } }))),
    );
    l.close();
  });

  it('keeps the other ticks of a slot and their views in line when one tick throws half-way through its views', () => {
    const l = lane();
    for (const id of ['m1', 'm2', 'm3']) l.open(id);
    // A host bug in m2's second view, after its first view was kept for the batch.
    const real = MatchVm.prototype.viewJson;
    vi.spyOn(MatchVm.prototype, 'viewJson').mockImplementation(function (this: MatchVm, playerId: string) {
      if (this.matchId === 'm2' && playerId === 'b') throw new Error('injected');
      return real.call(this, playerId);
    });
    const events = l.run([{ kind: 'match', op: 'tick', matchIds: ['m1', 'm2', 'm3'], due: Date.now() }]);
    const [states] = statesOf(events);
    expect(states!.matchIds).toEqual(['m1', 'm3']);
    expect(states!.counts).toEqual([2, 2]);
    expect(states!.frames.map((f) => JSON.parse(f).payload.id)).toEqual(['m1', 'm1', 'm3', 'm3']);
    // m2's tick counts as skipped, so the main thread sends it its next tick.
    expect(events).toContainEqual({ kind: 'match', k: 'skipped', matchId: 'm2' });
    expect(l.lines).toContainEqual({ level: 'error', event: 'script_command_failed' });
    l.close();
  });
});
