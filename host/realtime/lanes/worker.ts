/**
 * Entry of a script worker thread (built to dist/match-worker.mjs): a
 * ScriptRunner with every lane kind, over its own view of the game directory, fed command batches
 * by the main thread. Bindings (`game.notify` ...) are answered by the main
 * thread, which owns the database and the sockets, while this thread waits.
 */
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import type { JsonValue, ScriptBinding, ScriptBindings } from '../../../runtime/lua/host-interface';
import { bindingWaitLimit, excuseBindingWait } from '../../../runtime/lua/vm';
import { systemClock } from '../../../runtime/contracts/context';
import { uuidv7Source } from '../../../runtime/platform/ids';
import { watchGameFiles } from '../../game-directory';
import { WindowLimiter } from '../../../runtime/platform/rate-limiter';
import { ANSWERED, CLAIM, MEMORY_EXIT_CODE, type BindingAnswer, type BindingCall, type BindingShape, type Command, type WorkerData } from './protocol';
import { heapInUse, ScriptRunner } from './runner';
import { LANE_KINDS } from '../lane-kinds';

const data = workerData as WorkerData;
const signal = new Int32Array(data.signal);
let seq = 0;

/**
 * A binding call blocks this thread until the main thread answers, at most
 * until the calling callback's deadline plus its binding wait allowance
 * (runtime/lua/vm.ts: a database wait is not the script's work, within
 * bounds). The main thread runs no scripts, so it answers within a fraction
 * of a millisecond unless it is overloaded, or within a database round trip
 * for an awaited binding. A late answer is recognised by its sequence number
 * and dropped. At the limit the call is given up only if the main thread has
 * not claimed it to commit a change; a claimed call is waited for, and its
 * whole wait excused, so the script learns of every change it made and can
 * record it.
 */
function callMain(path: string[], args: JsonValue[], caller: BindingCall['caller']): JsonValue {
  const call: BindingCall = { seq: ++seq, path, args, caller };
  Atomics.store(signal, ANSWERED, 0);
  Atomics.store(signal, CLAIM, call.seq);
  data.port.postMessage(call);
  const started = Date.now();
  let limit = bindingWaitLimit();
  let claimed = false;
  for (;;) {
    const left = limit - Date.now();
    if (left <= 0) {
      if (claimed || Atomics.compareExchange(signal, CLAIM, call.seq, 0) === call.seq) {
        excuseBindingWait(Date.now() - started, false);
        return { error: 'binding_timeout' };
      }
      claimed = true;
      limit = Date.now() + CLAIMED_WAIT_MS;
      continue;
    }
    Atomics.wait(signal, ANSWERED, 0, left);
    Atomics.store(signal, ANSWERED, 0);
    for (let m = receiveMessageOnPort(data.port); m; m = receiveMessageOnPort(data.port)) {
      const answer = m.message as BindingAnswer;
      if (answer.seq !== call.seq) continue;
      excuseBindingWait(Date.now() - started, Atomics.load(signal, CLAIM) === -call.seq);
      return answer.result;
    }
  }
}

/** How long a claimed call is waited for past the limit: a commit settles within the database's statement timeout; this only outlasts a main thread that stopped answering. */
const CLAIMED_WAIT_MS = 30_000;

function proxyBindings(shape: BindingShape): ScriptBindings {
  const out: ScriptBindings = {};
  const proxy = (path: string[]): ScriptBinding => (args, caller) => callMain(path, args, caller);
  for (const [name, fns] of Object.entries(shape)) {
    out[name] = fns === true ? proxy([name]) : Object.fromEntries(fns.map((fn) => [fn, proxy([name, fn])]));
  }
  return out;
}

const files = data.gameDir ? watchGameFiles(data.gameDir) : null;
const runner = new ScriptRunner(
  {
    source: files?.source ?? { read: () => null },
    budgets: data.budgets,
    bindings: proxyBindings(data.bindings),
    limits: new WindowLimiter(data.rateLimits),
    clock: systemClock,
    ids: uuidv7Source(),
    failingTicksMax: data.failingTicksMax,
    rpc: data.rpc,
    adopt: (port) => void port.on('message', run),
    later: (ms, commands) => {
      const t = setTimeout(() => run(commands), ms);
      return () => clearTimeout(t);
    },
  },
  LANE_KINDS,
);

/** One batch, from the main thread or over a link from another lane; its events go to the main thread. */
function run(commands: Command[]): void {
  const events = runner.run(commands);
  if (events.length > 0) parentPort!.postMessage(events);
  // Memory a script keeps between calls is not any one call's; the worker's
  // ceiling catches it, and the main thread replaces the worker.
  if (heapInUse() > data.memoryBytes) {
    parentPort!.postMessage([{ kind: 'lane', k: 'log', level: 'warn', event: 'script_worker_memory_exceeded', fields: { bytes: heapInUse(), limit: data.memoryBytes } }]);
    process.exit(MEMORY_EXIT_CODE);
  }
}

parentPort!.on('message', run);
