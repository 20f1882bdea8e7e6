/**
 * The main thread's side of the script lanes (docs/decisions/0020): match
 * VMs and the RPC VM run in `match_workers` worker threads, so no script can
 * hold up sockets, HTTP or the tick wheel. Commands to a lane are batched
 * and posted after a wheel slot that ticked something on it; what awaits an
 * answer (a create, a join, an RPC call) goes at the end of the current
 * event-loop turn. A worker that dies is replaced at once and the matches
 * and worlds it held are reported lost. The pool knows no kind of script:
 * hosts send their kind's commands and subscribe to their kind's events
 * (protocol.ts).
 */
import { setFlagsFromString } from 'node:v8';
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import type { Logger } from '../../../runtime/platform/log';
import type { AwaitedBindings, JsonValue, ScriptBinding, ScriptBindings, ScriptSource } from '../../../runtime/lua/host-interface';
import type { Clock, RateLimiter } from '../../../runtime/contracts/context';
import type { IdSource } from '../../../runtime/platform/ids';
import type { RateLimitGroup, RateRule } from '../../../runtime/contracts/settings';
import { ANSWERED, CLAIM, MEMORY_EXIT_CODE, mergeTicks, type Answer, type BindingAnswer, type BindingCall, type BindingShape, type Command, type EventOf, type LaneEvent, type WorkerData } from './protocol';
import { ScriptRunner, type LaneKinds, type RunnerOptions } from './runner';
import { TICK_MS } from './tick-wheel';

export interface PoolOptions {
  /** Worker threads; 0 runs the scripts on the main thread. */
  workers: number;
  /** The game directory the workers read, and the main thread's own view of it for `workers: 0`. */
  gameDir: string | null;
  source: ScriptSource;
  budgets: RunnerOptions['budgets'];
  failingTicksMax: number;
  memoryBytes: number;
  rateLimits: Record<RateLimitGroup, RateRule>;
  bindings: ScriptBindings;
  /** Bindings that wait on the database; scripts on the main thread (`workers: 0`) cannot wait, so only workers get them. */
  awaitedBindings?: AwaitedBindings;
  log: Logger;
  /** Main-thread services for in-thread mode. */
  limits: RateLimiter;
  clock: Clock;
  ids: IdSource;
  /** The kinds the main thread's own lane runs (`workers: 0`); workers build theirs from the same table. */
  kinds: LaneKinds;
}

type Listener<E> = (event: E) => void;

interface Lane {
  index: number;
  /** Its worker died and the replacement is not up yet. */
  dead: boolean;
  matches: Set<string>;
  pending: Command[];
  /** Ports travelling in the pending commands (a link between two lanes). */
  transfer: MessagePort[];
  flushQueued: boolean;
  /** A tick waits in `pending`: the lane's batch goes out after this slot. */
  ticking: boolean;
  /** When `pending` last went from empty to not (Date.now()): what waits a whole turn goes whether a tick came or not. */
  pendingSince: number;
  /** Requests posted to this lane and not yet answered, with the answer to give if the lane dies. */
  requests: Map<number, { resolve(a: Answer): void; lost: Answer }>;
  post(commands: Command[], transfer: MessagePort[]): void;
  terminate(): Promise<void>;
  /** Shut down on purpose (its worker's exit is not a loss). */
  isTerminated(): boolean;
}

/**
 * V8 allocates an object straight into the old generation when most objects
 * from its allocation site survived a scavenge. A script's tick keeps its
 * values (fengari's TValues, tables, strings) alive across the scavenges
 * that fall inside it and lets them go right after, so V8 learnt to pretenure
 * them: a world lane's old generation grew 8-10 MB a second and was marked
 * every 1-2 s, by every V8 helper thread at once, taking the cores the lane
 * and the main thread then waited for (decision 0072). V8's flags are the
 * process's: this holds for the main thread and every worker.
 */
function noPretenuring(): void {
  setFlagsFromString('--no-allocation-site-pretenuring');
}

/** A worker that dies this soon after starting is restarted after a growing pause, not at once. */
const EARLY_DEATH_MS = 5000;

export class ScriptPool {
  readonly #lanes: Lane[] = [];
  readonly #byMatch = new Map<string, Lane>();
  #nextReq = 1;
  #closing = false;
  readonly #restartDelay = new Map<number, number>();
  readonly #shape: BindingShape;
  readonly #awaited: AwaitedBindings;
  readonly #listeners: { [K in LaneEvent['kind']]: Listener<EventOf<K>>[] } = { lane: [], match: [], world: [] };
  readonly #lostListeners: Listener<string[]>[] = [];

  constructor(private readonly options: PoolOptions) {
    noPretenuring();
    this.#awaited = options.awaitedBindings ?? {};
    this.#shape = bindingShape(options.bindings, this.#awaited);
    if (options.workers === 0 && Object.keys(this.#awaited).length > 0) {
      options.log.warn('script_bindings_unavailable', { namespaces: Object.keys(this.#awaited), reason: 'match_workers is 0: scripts on the main thread cannot wait for the database' });
    }
    const count = options.workers === 0 ? 1 : options.workers;
    for (let i = 0; i < count; i++) this.#lanes.push(options.workers === 0 ? this.#inlineLane(i) : this.#workerLane(i));
  }

  get workers(): number {
    return this.options.workers;
  }

  /** Puts a new match or world on the lane holding the fewest. */
  assign(matchId: string): void {
    let best = this.#lanes[0]!;
    for (const lane of this.#lanes) if ((best.dead && !lane.dead) || (lane.matches.size < best.matches.size && !lane.dead)) best = lane;
    best.matches.add(matchId);
    this.#byMatch.set(matchId, best);
  }

  /** Lanes in the pool (1 with `workers: 0`). */
  get lanes(): number {
    return this.#lanes.length;
  }

  /**
   * Puts `id` on the lane holding the fewest among those holding none of
   * `apart` (a world's stripes each want a lane of their own); false when
   * every live lane holds one of them.
   */
  assignApart(id: string, apart: readonly string[]): boolean {
    const taken = new Set<Lane>();
    for (const other of apart) {
      const lane = this.#byMatch.get(other);
      if (lane) taken.add(lane);
    }
    let best: Lane | null = null;
    for (const lane of this.#lanes) if (!lane.dead && !taken.has(lane) && (best === null || lane.matches.size < best.matches.size)) best = lane;
    if (best === null) return false;
    best.matches.add(id);
    this.#byMatch.set(id, best);
    return true;
  }

  /**
   * A channel between the lanes holding `a` and `b`: each gets the command
   * `make` builds around its end, at the end of this turn, and from then on
   * they talk without the main thread (a world and its stripes, decision
   * 0067). False, and nothing sent, when either holds no worker lane.
   */
  link(a: string, b: string, make: (port: MessagePort) => Command): boolean {
    const laneA = this.#byMatch.get(a);
    const laneB = this.#byMatch.get(b);
    if (this.options.workers === 0 || !laneA || !laneB || laneA === laneB) return false;
    const { port1, port2 } = new MessageChannel();
    laneA.transfer.push(port1);
    this.#soon(laneA, make(port1));
    laneB.transfer.push(port2);
    this.#soon(laneB, make(port2));
    return true;
  }

  /** Hears every event of one kind, in order (answers settle their requests instead). */
  subscribe<K extends LaneEvent['kind']>(kind: K, listener: Listener<EventOf<K>>): void {
    (this.#listeners[kind] as Listener<EventOf<K>>[]).push(listener);
  }

  /** Hears the ids of the matches and worlds a dead worker took with it. */
  onLost(listener: Listener<string[]>): void {
    this.#lostListeners.push(listener);
  }

  /**
   * A command someone awaits, posted at the end of this turn; settles with
   * the lane's answer, or `lost` if the lane dies first. `id` is the match
   * or world it concerns; null sends it to the first lane (the one serving
   * `rpc.lua`).
   */
  request<A extends Answer>(id: string | null, lost: A, command: (req: number) => Command): Promise<A> {
    return this.#request(id === null ? this.#lanes[0]! : this.#laneOf(id), lost, command) as Promise<A>;
  }

  /** Like `request`, but quietly settles with `lost` when `id` holds no lane. */
  requestIfPlaced<A extends Answer>(id: string, lost: A, command: (req: number) => Command): Promise<A> {
    const lane = this.#byMatch.get(id);
    return lane ? (this.#request(lane, lost, command) as Promise<A>) : Promise.resolve(lost);
  }

  /** Posted at the end of this turn. */
  soon(id: string, command: Command): void {
    this.#soon(this.#byMatch.get(id), command);
  }

  /**
   * Goes with the lane's next batch that carries a tick: an input matters
   * only to the tick after it, so inputs alone do not wake a worker
   * (decision 0069). A tick goes out after the wheel's slot.
   */
  queue(id: string, command: Command): void {
    const lane = this.#byMatch.get(id);
    if (!lane) return;
    const pending = lane.pending;
    if (pending.length === 0) lane.pendingSince = Date.now();
    if (pending.length === 0 || !mergeTicks(pending[pending.length - 1]!, command)) pending.push(command);
    if (command.op === 'tick') lane.ticking = true;
  }

  /** The match or world is over on the main thread: `close` tells its lane to drop its VMs. */
  release(id: string, close: Command): void {
    const lane = this.#byMatch.get(id);
    if (!lane) return;
    this.#byMatch.delete(id);
    lane.matches.delete(id);
    this.#soon(lane, close);
  }

  /** Posts the batches that carry a tick, and any that waited a whole turn (the wheel calls this after each slot it passes). */
  flush(): void {
    let stale = 0;
    for (const lane of this.#lanes) {
      if (lane.ticking) this.#flush(lane);
      else if (lane.pending.length > 0 && lane.pendingSince <= (stale ||= Date.now() - TICK_MS)) this.#flush(lane);
    }
  }

  async close(): Promise<void> {
    this.#closing = true;
    await Promise.all(this.#lanes.map((lane) => lane.terminate()));
    for (const lane of this.#lanes) for (const r of lane.requests.values()) r.resolve(r.lost);
  }

  #laneOf(matchId: string): Lane {
    const lane = this.#byMatch.get(matchId);
    if (!lane) throw new Error(`match ${matchId} has no lane`);
    return lane;
  }

  #request(lane: Lane, lost: Answer, command: (req: number) => Command): Promise<Answer> {
    const req = this.#nextReq++;
    return new Promise<Answer>((resolve) => {
      if (this.#closing || lane.dead) return resolve(lost);
      lane.requests.set(req, { resolve, lost });
      this.#soon(lane, command(req));
    });
  }

  /** Queues a command and posts the lane's batch at the end of this turn. */
  #soon(lane: Lane | undefined, command: Command): void {
    if (!lane) return;
    lane.pending.push(command);
    if (lane.flushQueued) return;
    lane.flushQueued = true;
    queueMicrotask(() => this.#flush(lane));
  }

  #flush(lane: Lane): void {
    lane.flushQueued = false;
    lane.ticking = false;
    if (lane.pending.length === 0) return;
    const batch = lane.pending;
    const transfer = lane.transfer;
    lane.pending = [];
    lane.transfer = [];
    lane.post(batch, transfer);
  }

  #deliver(lane: Lane, events: LaneEvent[]): void {
    for (const e of events) {
      if (e.k === 'answer') {
        const r = lane.requests.get(e.req);
        lane.requests.delete(e.req);
        r?.resolve(e.answer);
        continue;
      }
      for (const listener of this.#listeners[e.kind] as Listener<LaneEvent>[]) {
        try {
          listener(e);
        } catch (err) {
          this.options.log.error('script_event_failed', { kind: e.k, error: err });
        }
      }
    }
  }

  #newLane(index: number, post: Lane['post'], terminate: Lane['terminate']): Lane {
    return { index, dead: false, matches: new Set(), pending: [], transfer: [], flushQueued: false, ticking: false, pendingSince: 0, requests: new Map(), post, terminate, isTerminated: () => false };
  }

  /** `match_workers: 0`: the runner on this thread, still answering asynchronously. */
  #inlineLane(index: number): Lane {
    const runner = new ScriptRunner(
      {
        source: this.options.source,
        budgets: this.options.budgets,
        bindings: this.options.bindings,
        limits: this.options.limits,
        clock: this.options.clock,
        ids: this.options.ids,
        failingTicksMax: this.options.failingTicksMax,
        rpc: index === 0,
      },
      this.options.kinds,
    );
    let closed = false;
    const lane: Lane = this.#newLane(
      index,
      (commands) => void setImmediate(() => !closed && this.#deliver(lane, runner.run(commands))),
      async () => {
        closed = true;
        runner.close();
      },
    );
    return lane;
  }

  /** A lane whose worker starts with the first batch posted to it (a node without matches starts none). */
  #workerLane(index: number): Lane {
    let worker: Worker | null = null;
    let terminated = false;
    const lane: Lane = this.#newLane(
      index,
      (commands, transfer) => (worker ??= this.#spawn(lane)).postMessage(commands, transfer),
      async () => {
        terminated = true;
        await worker?.terminate();
      },
    );
    lane.isTerminated = () => terminated;
    return lane;
  }

  #spawn(lane: Lane): Worker {
    const signal = new SharedArrayBuffer(8);
    const flag = new Int32Array(signal);
    const { port1, port2 } = new MessageChannel();
    const data: WorkerData = {
      gameDir: this.options.gameDir,
      budgets: this.options.budgets,
      failingTicksMax: this.options.failingTicksMax,
      rpc: lane.index === 0,
      rateLimits: perWorker(this.options.rateLimits, this.options.workers),
      memoryBytes: this.options.memoryBytes,
      bindings: this.#shape,
      port: port2,
      signal,
    };
    const entry = workerEntry();
    const worker = new Worker(entry.script, {
      eval: entry.eval,
      workerData: data,
      transferList: [port2],
      // The JavaScript heap ceiling backs up the worker's own check, which also counts external memory.
      resourceLimits: { maxOldGenerationSizeMb: Math.ceil((this.options.memoryBytes / 1024 / 1024) * 1.25) },
      stdout: false,
      stderr: false,
    });
    const started = Date.now();
    port1.on('message', (call: BindingCall) => {
      const answer = (result: JsonValue) => {
        port1.postMessage({ seq: call.seq, result } satisfies BindingAnswer);
        Atomics.store(flag, ANSWERED, 1);
        Atomics.notify(flag, ANSWERED);
      };
      const claim = () => Atomics.compareExchange(flag, CLAIM, call.seq, -call.seq) === call.seq;
      const result = this.#invoke(call, claim);
      if (result instanceof Promise) void result.then(answer);
      else answer(result);
    });
    worker.on('message', (events: LaneEvent[]) => this.#deliver(lane, events));
    worker.on('error', (err) => this.options.log.error('script_worker_failed', { worker: lane.index, error: err }));
    worker.on('exit', (code) => {
      port1.close();
      if (lane.isTerminated() || this.#closing) return;
      this.#lost(lane, code, Date.now() - started);
    });
    return worker;
  }

  /** A worker ended on its own: its matches and pending answers are lost; a new worker takes its place. */
  #lost(lane: Lane, code: number, livedMs: number): void {
    lane.dead = true;
    const matchIds = [...lane.matches];
    for (const id of matchIds) this.#byMatch.delete(id);
    this.options.log.error('script_worker_lost', {
      worker: lane.index,
      exit_code: code,
      reason: code === MEMORY_EXIT_CODE ? 'memory' : 'crash',
      matches: matchIds.length,
    });
    for (const r of lane.requests.values()) r.resolve(r.lost);
    lane.requests.clear();
    lane.pending = [];
    for (const port of lane.transfer) port.close();
    lane.transfer = [];
    // A worker that keeps dying at start (a broken install) is retried with a growing pause, not in a tight loop.
    const delay = livedMs < EARLY_DEATH_MS ? Math.min(10_000, (this.#restartDelay.get(lane.index) ?? 50) * 2) : 0;
    this.#restartDelay.set(lane.index, delay);
    const replace = () => {
      if (!this.#closing) this.#lanes[lane.index] = this.#workerLane(lane.index);
    };
    if (delay > 0) setTimeout(replace, delay).unref();
    else replace();
    for (const listener of this.#lostListeners) listener(matchIds);
  }

  /** Runs a binding a worker's script called; a binding that throws answers an error envelope. */
  #invoke(call: BindingCall, claim: () => boolean): JsonValue | Promise<JsonValue> {
    const [name, fn] = call.path;
    const failed = (err: unknown): JsonValue => {
      this.options.log.error('script_binding_failed', { binding: call.path.join('.'), error: err });
      return { error: 'internal' };
    };
    const awaited = fn !== undefined ? this.#awaited[name!]?.[fn] : undefined;
    if (awaited) return awaited(call.args, call.caller, claim).catch(failed);
    const entry = this.options.bindings[name!];
    const binding: ScriptBinding | undefined = typeof entry === 'function' ? entry : fn !== undefined ? entry?.[fn] : undefined;
    if (!binding) return { error: 'unknown_binding' };
    try {
      return binding(call.args, call.caller);
    } catch (err) {
      return failed(err);
    }
  }
}

function bindingShape(bindings: ScriptBindings, awaited: AwaitedBindings): BindingShape {
  const shape: BindingShape = {};
  for (const [name, entry] of Object.entries(bindings)) shape[name] = typeof entry === 'function' ? true : Object.keys(entry);
  for (const [name, entry] of Object.entries(awaited)) {
    const known = shape[name];
    shape[name] = [...(Array.isArray(known) ? known : []), ...Object.keys(entry)];
  }
  return shape;
}

/**
 * Node-wide script buckets (`log_global`) are split between the workers, so
 * all of them together keep the node's rate; per-match buckets live where
 * the match does.
 */
function perWorker(rules: Record<RateLimitGroup, RateRule>, workers: number): Record<RateLimitGroup, RateRule> {
  const global = rules.log_global;
  return { ...rules, log_global: { limit: Math.max(1, Math.ceil(global.limit / Math.max(1, workers))), window: global.window } };
}

/**
 * Built: dist/match-worker.mjs beside dist/host.mjs. From the sources (tests,
 * benchmarks under tsx): the TypeScript entry through tsx's loader.
 */
function workerEntry(): { script: string | URL; eval: boolean } {
  const here = import.meta.url;
  if (!here.endsWith('.ts')) return { script: new URL('./match-worker.mjs', here), eval: false };
  const entry = new URL('./worker.ts', here).href;
  const tsx = import.meta.resolve('tsx/esm/api');
  return { script: `import(${JSON.stringify(tsx)}).then((m) => m.tsImport(${JSON.stringify(entry)}, ${JSON.stringify(here)}))`, eval: true };
}

