/**
 * The script side of a lane: it runs inside a script worker, or on the main
 * thread with `match_workers: 0`, takes command batches and answers each
 * with the events the scripts caused. It knows no kind of script itself:
 * each kind (host/realtime/lane-kinds.ts) registers a handler, and the
 * runner hands every command to the handler of its `kind`, so matches,
 * worlds and RPC calls share the lane's services, its fair-share ledger and
 * its event stream without sharing any code path.
 */
import type { Clock, RateLimiter } from '../../../runtime/contracts/context';
import type { IdSource } from '../../../runtime/platform/ids';
import type { LogFields, LogLevel, Logger } from '../../../runtime/platform/log';
import type { Budgets, FailureKind, ScriptBindings, ScriptSource } from '../../../runtime/lua/host-interface';
import { getHeapStatistics } from 'node:v8';
import type { MessagePort } from 'node:worker_threads';
import { installHeapMeter } from '../../../runtime/lua/vm';
import type { Answer, Command, LaneEvent, LaneKind } from './protocol';
import { LaneShares } from './fair-share';
import { TICK_MS } from './tick-wheel';

/** The JavaScript heap plus external memory (fengari keeps long strings in typed arrays outside the heap). */
export function heapInUse(): number {
  const h = getHeapStatistics();
  return h.used_heap_size + h.external_memory;
}
// Every script VM of this process is built after this module loads (it holds the one VM factory's heap meter).
installHeapMeter(heapInUse);

export interface RunnerOptions {
  source: ScriptSource;
  budgets: Budgets;
  bindings: ScriptBindings;
  limits: RateLimiter;
  clock: Clock;
  ids: IdSource;
  /** Ticks in a row with a callback stopped by a limit before a match or world ends `script_budget`. */
  failingTicksMax: number;
  /** This lane serves `rpc.lua` (one lane does, so its globals are shared by every caller). */
  rpc: boolean;
  /**
   * Runs what arrives on `port` as command batches of this lane, their events
   * going to the main thread as any batch's: the end of a link to another
   * lane (ScriptPool.link). Only worker lanes have it.
   */
  adopt?(port: MessagePort): void;
  /**
   * Runs `commands` as a batch of this lane after `ms`, unless the returned
   * function cancels it first: a lane's own timer (a world's standby tick).
   * Only worker lanes have it; a lane on the main thread runs on the
   * main thread's clock anyway.
   */
  later?(ms: number, commands: Command[]): () => void;
}

/** What a kind's handler gets from its lane. */
export interface LaneContext extends RunnerOptions {
  /** Lines travel to the main thread's logger as events. */
  readonly log: Logger;
  emit(event: LaneEvent): void;
  answer(req: number, answer: Answer): void;
  /** Counts a failed Lua callback for the batch's `failures` event. */
  failed(kind: FailureKind): void;
  /** The lane's time, shared out between every match and world on it (decision 0052). */
  readonly shares: LaneShares;
  /** Matches and worlds on the lane, of every kind. */
  tenants(): number;
}

/** One kind's side of a lane. */
export interface LaneHandler<C extends Command> {
  apply(command: C): void;
  /** Matches or worlds it holds: its tenants of the lane. */
  readonly size: number;
  /** After each batch: anything the kind reports once per batch. */
  afterBatch?(): void;
  close(): void;
}

/** The handler factory every kind registers; the worker entry and the pool build runners from the same table. */
export type LaneKinds = { [K in LaneKind]: (lane: LaneContext) => LaneHandler<Extract<Command, { kind: K }>> };

export class ScriptRunner {
  #events: LaneEvent[] = [];
  /** Failed callbacks of the batch being run; one event carries them back with the batch's other events. */
  #failures: Partial<Record<FailureKind, number>> | null = null;
  readonly #log: Logger;
  readonly #handlers: { [K in LaneKind]: LaneHandler<Extract<Command, { kind: K }>> };
  readonly #all: LaneHandler<Command>[];

  constructor(options: RunnerOptions, kinds: LaneKinds) {
    this.#log = eventLogger((e) => this.#events.push(e));
    const lane: LaneContext = {
      ...options,
      log: this.#log,
      emit: (e) => void this.#events.push(e),
      answer: (req, answer) => void this.#events.push({ kind: 'lane', k: 'answer', req, answer }),
      failed: (kind) => {
        const counts = (this.#failures ??= {});
        counts[kind] = (counts[kind] ?? 0) + 1;
      },
      shares: new LaneShares(TICK_MS, performance.now()),
      tenants: () => {
        let n = 0;
        for (const h of this.#all) n += h.size;
        return n;
      },
    };
    this.#handlers = { match: kinds.match(lane), world: kinds.world(lane), rpc: kinds.rpc(lane) };
    this.#all = Object.values(this.#handlers) as LaneHandler<Command>[];
  }

  /** Applies one batch in order; returns what the scripts caused, in order. */
  run(commands: readonly Command[]): LaneEvent[] {
    for (const command of commands) {
      const handler = this.#handlers[command.kind] as LaneHandler<Command>;
      try {
        handler.apply(command);
      } catch (err) {
        // The VMs contain script failures themselves; reaching here is a host bug. Keep the lane alive.
        this.#log.error('script_command_failed', { op: command.op, error: err instanceof Error ? err.message : String(err) });
        if ('req' in command) this.#events.push({ kind: 'lane', k: 'answer', req: command.req, answer: failedAnswer(command) });
      }
    }
    if (this.#failures) {
      this.#events.push({ kind: 'lane', k: 'failures', counts: this.#failures });
      this.#failures = null;
    }
    for (const h of this.#all) h.afterBatch?.();
    const out = this.#events;
    this.#events = [];
    return out;
  }

  close(): void {
    for (const h of this.#all) h.close();
  }
}

/** What a request answers when applying it threw: a create fails, anything else fails as a join does. */
function failedAnswer(command: Command): Answer {
  return command.op === 'create' ? { ok: false } : { ok: false, unknown: false, refused: false, kind: 'error', message: 'internal' };
}

/** A logger whose lines travel as events, for the main thread's logger to write. */
function eventLogger(push: (e: LaneEvent) => void, base: LogFields = {}): Logger {
  const emit = (level: LogLevel) => (event: string, fields?: LogFields) =>
    push({ kind: 'lane', k: 'log', level, event, fields: plain({ ...base, ...fields }) });
  return {
    debug: emit('debug'),
    info: emit('info'),
    warn: emit('warn'),
    error: emit('error'),
    child: (fields) => eventLogger(push, { ...base, ...fields }),
  };
}

/** Log fields as structured clone carries them (an Error loses its message otherwise). */
function plain(fields: LogFields): LogFields {
  for (const k in fields) {
    const v = fields[k];
    if (v instanceof Error) fields[k] = { name: v.name, message: v.message, stack: v.stack };
  }
  return fields;
}
