import { writeHeapSnapshot } from 'node:v8';
import { loadGameDirectory } from '../host/game-directory';
import { LANE_KINDS } from '../host/realtime/lane-kinds';
import type { Command } from '../host/realtime/lanes/protocol';
import { ScriptRunner } from '../host/realtime/lanes/runner';
import { DEFAULT_BUDGETS } from '../runtime/lua/host-interface';
import { uuidv7Source } from '../runtime/platform/ids';
import { silentLogger } from '../runtime/platform/log';
const game = loadGameDirectory('examples/demo-game', {}, silentLogger);
const arena = game.info.modes.get('arena')!;
const allow = { ok: true, retryAfterMs: 0 } as const;
const ids = uuidv7Source();
const runner = new ScriptRunner({ source: game.source, budgets: DEFAULT_BUDGETS, bindings: {}, failingTicksMax: 50, rpc: false, limits: { take: () => allow, check: () => allow }, clock: { now: Date.now }, ids }, LANE_KINDS);
const N = Number(process.env.N ?? 200);
let req = 1;
const mids: string[] = [];
for (let i = 0; i < N; i++) {
  const m = ids.uuid(); mids.push(m);
  runner.run([{ kind: 'match', op: 'create', req: req++, matchId: m, mode: arena }]);
  runner.run([{ kind: 'match', op: 'join', req: req++, matchId: m, playerId: 'a' + i, ctx: {} }, { kind: 'match', op: 'join', req: req++, matchId: m, playerId: 'b' + i, ctx: {} }] as Command[]);
}
for (let t = 0; t < 5; t++) runner.run([{ kind: 'match', op: 'tick', matchIds: mids, due: Date.now() }]);
(globalThis as any).gc?.();
console.log(writeHeapSnapshot('/tmp/me/vms.heapsnapshot'));
