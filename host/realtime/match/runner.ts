/**
 * The script side of a lane: every match VM and the RPC VM a lane holds,
 * driven by command batches and answering with events. It runs inside a
 * script worker, or on the main thread with `match_workers: 0`; either way
 * it is the only place a match VM is built (the one VM factory).
 */
import type { Clock, RateLimiter } from '../../../runtime/contracts/context';
import type { IdSource } from '../../../runtime/platform/ids';
import type { LogFields, LogLevel, Logger } from '../../../runtime/platform/log';
import type { Budgets, FailureKind, JsonObject, ModeInfo, ScriptBindings, ScriptSource } from '../../../runtime/lua/host-interface';
import { getHeapStatistics } from 'node:v8';
import { MatchVm } from '../../../runtime/lua/match';
import { installHeapMeter } from '../../../runtime/lua/vm';
import { ScriptRpc } from '../../../runtime/lua/rpc';
import { parseVoteConfig } from '../../../runtime/votes/engine';
import type { Answer, Command, LaneEvent } from './protocol';
import { WorldRun, type WorldRecovery } from '../world/world-run';
import { MatchPhases } from './match-phases';
import { isBotId } from '../../../runtime/bots/ids';
import { LaneBots } from './bot-lane';
import { LaneShares, type ShareAccount } from './fair-share';

/** The match tick is fixed: ten ticks a second. */
export const TICK_MS = 100;

/** The JavaScript heap plus external memory (fengari keeps long strings in typed arrays outside the heap). */
export function heapInUse(): number {
  const h = getHeapStatistics();
  return h.used_heap_size + h.external_memory;
}
// Every script VM of this process is built after this module loads (it holds the one VM factory).
installHeapMeter(heapInUse);

export interface RunnerOptions {
  source: ScriptSource;
  budgets: Budgets;
  bindings: ScriptBindings;
  limits: RateLimiter;
  clock: Clock;
  ids: IdSource;
  /** Ticks in a row with a callback stopped by a limit before the match ends `script_budget`. */
  failingTicksMax: number;
  /** This lane serves `rpc.lua` (one lane does, so its globals are shared by every caller). */
  rpc: boolean;
}

interface RunnerMatch {
  vm: MatchVm;
  mode: ModeInfo;
  players: Set<string>;
  /** Consecutive ticks on which a callback hit a limit. */
  failing: number;
  /** A vote this match asked for has not resolved yet: `vote_requested` is not called meanwhile. */
  voting: boolean;
  /** The mode's phases (null without): they start at creation and move with ticks, joins and leaves. */
  phases: MatchPhases | null;
  /** Its share of the lane: what its ticks took against what it earned (fair-share.ts). */
  share: ShareAccount;
}

interface LaneWorld {
  run: WorldRun;
  /** A vote the world asked for through `_vote` is open: no other starts meanwhile. */
  voting: boolean;
  /** The phase listing last sent, as text. */
  phase: string | null;
}

export class ScriptRunner {
  readonly #matches = new Map<string, RunnerMatch>();
  readonly #worlds = new Map<string, LaneWorld>();
  #events: LaneEvent[] = [];
  /** Failed callbacks of the batch being run; one event carries them back with the batch's other events. */
  #failures: Partial<Record<FailureKind, number>> | null = null;
  readonly #failed = (kind: FailureKind): void => {
    const counts = (this.#failures ??= {});
    counts[kind] = (counts[kind] ?? 0) + 1;
  };
  readonly #log: Logger;
  readonly #rpc: ScriptRpc | null;
  readonly #bots: LaneBots;
  readonly #shares = new LaneShares(TICK_MS, performance.now());

  constructor(private readonly options: RunnerOptions) {
    this.#log = eventLogger((e) => this.#events.push(e));
    this.#bots = new LaneBots({
      source: options.source,
      budgets: options.budgets,
      services: {
        log: this.#log.child({ component: 'bot' }),
        limits: options.limits,
        clock: options.clock,
        ids: options.ids,
        send: () => {},
        failed: this.#failed,
      },
    });
    this.#rpc = options.rpc
      ? new ScriptRpc({
          source: options.source,
          budgets: options.budgets,
          services: {
            log: this.#log.child({ component: 'rpc_script' }),
            limits: options.limits,
            clock: options.clock,
            ids: options.ids,
            send: (playerId, message) => this.#events.push({ k: 'send', playerId, message }),
            bindings: options.bindings,
            failed: this.#failed,
          },
        })
      : null;
  }

  get size(): number {
    return this.#matches.size;
  }

  /** Applies one batch in order; returns what the scripts caused, in order. */
  run(commands: readonly Command[]): LaneEvent[] {
    for (const command of commands) {
      try {
        this.#apply(command);
      } catch (err) {
        // The VM contains script failures itself; reaching here is a host bug. Keep the lane alive.
        this.#log.error('script_command_failed', { op: command.op, error: err instanceof Error ? err.message : String(err) });
        if ('req' in command) this.#answer(command.req, command.op === 'create' ? { ok: false } : { ok: false, unknown: false, refused: false, kind: 'error', message: 'internal' });
      }
    }
    if (this.#failures) {
      this.#events.push({ k: 'failures', counts: this.#failures });
      this.#failures = null;
    }
    const thinks = this.#bots.takeThinks();
    if (thinks) {
      // Only the buckets that counted anything cross to the main thread.
      const buckets: [number, number][] = [];
      for (let i = 0; i < thinks.length; i++) if (thinks[i]! > 0) buckets.push([i, thinks[i]!]);
      this.#events.push({ k: 'thinks', buckets });
    }
    const out = this.#events;
    this.#events = [];
    return out;
  }

  #apply(c: Command): void {
    switch (c.op) {
      case 'create':
        return this.#answer(c.req, this.#create(c.matchId, c.mode));
      case 'join': {
        const m = this.#matches.get(c.matchId);
        if (!m) return this.#answer(c.req, { ok: false, refused: false, kind: 'error', message: 'no such match' });
        const r = m.vm.join(c.playerId, c.ctx);
        if (r.ok) {
          m.players.add(c.playerId);
          m.phases?.players(m.players, c.playerId);
          if (isBotId(c.playerId)) this.#bots.join(c.matchId, c.playerId, m.mode.bots?.script ?? null);
        }
        return this.#answer(c.req, r);
      }
      case 'leave': {
        const m = this.#matches.get(c.matchId);
        if (!m || !m.players.delete(c.playerId)) return;
        this.#bots.leave(c.matchId, c.playerId);
        const r = m.vm.leave(c.playerId);
        if (!r.ok) this.#log.warn('match_leave_failed', { match_id: c.matchId, kind: r.kind });
        m.phases?.players(m.players, null);
        return;
      }
      case 'input':
        return this.#matches.get(c.matchId)?.vm.input(c.playerId, c.input);
      case 'tick':
        return this.#tick(c.matchId, c.due);
      case 'close':
        return this.#close(c.matchId);
      case 'vote_resolved': {
        // A world's vote only frees the world to ask for the next (worlds have no `vote_resolved` callback).
        const world = this.#worlds.get(c.matchId);
        if (world) return void (world.voting = false);
        const m = this.#matches.get(c.matchId);
        if (!m) return;
        m.voting = false;
        m.vm.voteResolved(c.template, c.result);
        return;
      }
      case 'rpc':
        return this.#answer(c.req, this.#rpc ? this.#rpc.call(c.method, c.playerId, c.params) : { ok: false, unknown: true });
      case 'world_create':
        return this.#answer(c.req, this.#createWorld(c.worldId, c.mode, c.seed, c.recovery));
      case 'world_join': {
        const w = this.#worlds.get(c.worldId);
        if (!w) return this.#answer(c.req, { ok: false, refused: false, kind: 'error', message: 'no such world' });
        const r = w.run.join(c.playerId, c.ctx);
        this.#answer(c.req, r);
        return this.#worldOutput(c.worldId, w, null);
      }
      case 'world_leave': {
        const w = this.#worlds.get(c.worldId);
        if (w) {
          if (c.detach) w.run.detach(c.playerId);
          else w.run.leave(c.playerId);
          this.#worldOutput(c.worldId, w, null);
        }
        return this.#answer(c.req, { ok: true });
      }
      case 'world_input':
        return this.#worlds.get(c.worldId)?.run.input(c.playerId, c.input, c.seq);
      case 'world_resync': {
        const w = this.#worlds.get(c.worldId);
        if (!w) return;
        w.run.resync(c.playerId, c.x, c.y);
        return this.#worldOutput(c.worldId, w, null);
      }
      case 'world_tick':
        return this.#tickWorld(c.worldId, c.due);
      case 'world_snapshot': {
        const w = this.#worlds.get(c.worldId);
        if (w) this.#events.push({ k: 'world_snapshot', worldId: c.worldId, zones: w.run.snapshot() });
        return;
      }
      case 'world_close':
        this.#worlds.get(c.worldId)?.run.close();
        this.#worlds.delete(c.worldId);
        return;
    }
  }

  #createWorld(worldId: string, mode: ModeInfo, seed: number, recovery: WorldRecovery | null): Answer {
    if (!mode.world) return { ok: false };
    const run = WorldRun.start(
      {
        worldId,
        mode,
        seed,
        source: this.options.source,
        budgets: this.options.budgets,
        failingTicksMax: this.options.failingTicksMax,
        log: this.#log,
        limits: this.options.limits,
        ids: this.options.ids,
        bindings: this.options.bindings,
        send: (playerId, message) => this.#events.push({ k: 'send', playerId, message }),
        failed: this.#failed,
      },
      recovery,
    );
    if (!run) return { ok: false };
    const world: LaneWorld = { run, voting: false, phase: null };
    this.#worlds.set(worldId, world);
    this.#worldOutput(worldId, world, null);
    return { ok: true };
  }

  #tickWorld(worldId: string, due: number): void {
    const w = this.#worlds.get(worldId);
    const started = Date.now();
    const t0 = performance.now();
    const lateMs = started - due;
    if (!w || lateMs >= w.run.settings.tick_rate) return void this.#events.push({ k: 'world_skipped', worldId });
    w.run.step(started);
    const finished = w.run.finished;
    if (finished) {
      this.#worldOutput(worldId, w, null);
      w.run.close();
      this.#worlds.delete(worldId);
      return void this.#events.push({ k: 'world_finished', worldId, result: finished });
    }
    const vote = w.run.takeVote();
    if (vote !== null && !w.voting) {
      const asked = parseVoteConfig(vote);
      if (asked !== null && asked.ok) {
        w.voting = true;
        this.#events.push({ k: 'world_vote', worldId, config: { ...asked.config, vote_id: asked.config.vote_id ?? this.options.ids.uuid() } });
      }
    }
    this.#worldOutput(worldId, w, { lateMs, busyMs: performance.now() - t0, deltaBytes: w.run.takeDeltaBytes() });
  }

  /** Sends what the world produced; the phase listing rides along when it changed. */
  #worldOutput(worldId: string, w: LaneWorld, tick: { lateMs: number; busyMs: number; deltaBytes: number } | null): void {
    const out = w.run.takeOutput();
    const listing = w.run.phaseListing();
    const text = listing === null ? null : JSON.stringify(listing);
    const phase = text !== w.phase ? listing : null;
    w.phase = text;
    if (tick === null && phase === null && out.sends.length === 0 && out.moved.length === 0) return;
    this.#events.push({ k: 'world', worldId, tick, out, phase });
  }

  #answer(req: number, answer: Answer): void {
    this.#events.push({ k: 'answer', req, answer });
  }

  /** The one VM factory: a match VM with this node's budgets, bindings and services. */
  #create(matchId: string, mode: ModeInfo): Answer {
    const log = this.#log.child({ match_id: matchId, mode: mode.name });
    let vm: MatchVm;
    try {
      vm = MatchVm.create({
        source: this.options.source,
        mode,
        matchId,
        budgets: this.options.budgets,
        services: {
          log,
          limits: this.options.limits,
          clock: this.options.clock,
          ids: this.options.ids,
          bindings: this.options.bindings,
          broadcast: (leaf, payload) =>
            this.#events.push({ k: 'broadcast', matchId, text: `{"type":${JSON.stringify(`match.${leaf}`)},"payload":${JSON.stringify(payload)}}` }),
          send: (playerId, message) => this.#events.push({ k: 'send', playerId, message }),
          failed: this.#failed,
          setJoinable: (joinable) => this.#events.push({ k: 'joinable', matchId, joinable }),
          bots: (op, name) => this.#events.push({ k: 'bots', matchId, op, name }),
        },
      });
    } catch (err) {
      log.warn('match_init_failed', { kind: 'error', message: (err as Error).message });
      return { ok: false };
    }
    const init = vm.init();
    if (!init.ok) {
      vm.close();
      log.warn('match_init_failed', { kind: init.kind, message: init.message });
      return { ok: false };
    }
    const phases = MatchPhases.start(vm, log, (phase) => this.#events.push({ k: 'phase', matchId, phase }));
    this.#matches.set(matchId, { vm, mode, players: new Set(), failing: 0, voting: false, phases, share: this.#shares.account(performance.now()) });
    return { ok: true };
  }

  #tick(matchId: string, due: number): void {
    const m = this.#matches.get(matchId);
    const lateMs = Date.now() - due;
    // A tick a whole period late is dropped, never run back to back with the next one.
    if (!m || lateMs >= TICK_MS) return void this.#events.push({ k: 'skipped', matchId });
    const started = performance.now();
    const tenants = this.#matches.size + this.#worlds.size;
    const throttled = this.#shares.admit(m.share, started, tenants);
    if (throttled) return void this.#events.push({ k: 'throttled', matchId, reason: throttled });
    this.#runTick(matchId, m, lateMs);
    this.#shares.charge(m.share, performance.now() - started, tenants);
  }

  /** One tick's steps: inputs, `tick`, the phases, the views; then the finish and failure checks. */
  #runTick(matchId: string, m: RunnerMatch, lateMs: number): void {
    // Failures of joins and leaves between ticks do not count against the ticks.
    m.vm.takeLimitFailure();
    const r = m.vm.tick();
    if (r.finished) return this.#finish(matchId, r.finished.result);
    if (!m.voting) this.#requestVote(matchId, m);
    if (m.phases?.tick(TICK_MS)) return this.#finish(matchId, { status: 'phases_complete' });
    let shared: string | null = null;
    const views: [string, string][] = [];
    if (m.mode.state_strategy === 'shared') {
      const first = m.players.values().next();
      const view = first.done ? null : m.vm.viewJson(first.value);
      if (view !== null) shared = stateFrame(view);
      for (const playerId of m.players) if (view !== null && this.#bots.drives(matchId, playerId)) this.#botInput(m, matchId, playerId, view);
    } else {
      for (const playerId of m.players) {
        const view = m.vm.viewJson(playerId);
        // A bot's view goes to its think, never to a socket.
        if (this.#bots.drives(matchId, playerId)) this.#botInput(m, matchId, playerId, view);
        else views.push([playerId, stateFrame(view)]);
      }
    }
    const outcome = m.vm.finished();
    if (outcome) return this.#finish(matchId, outcome.result);
    const failure = m.vm.takeLimitFailure();
    m.failing = failure ? m.failing + 1 : 0;
    if (failure && m.failing >= this.options.failingTicksMax) {
      this.#log.warn('match_script_budget', {
        match_id: matchId,
        mode: m.mode.name,
        script: m.mode.file,
        callback: failure.callback,
        reason_class: failure.kind,
        failing_ticks: m.failing,
      });
      return this.#finish(matchId, { status: 'error', reason: 'script_budget' });
    }
    this.#events.push({ k: 'state', matchId, lateMs, shared, views });
  }

  /** A bot's decision is queued like a human's input: the next tick's `handle_input` sees it. */
  #botInput(m: RunnerMatch, matchId: string, botId: string, view: string): void {
    const input = this.#bots.think(matchId, botId, view);
    if (input !== null) m.vm.input(botId, input);
  }

  #requestVote(matchId: string, m: RunnerMatch): void {
    const asked = parseVoteConfig(m.vm.voteRequested());
    if (asked === null) return;
    if (!asked.ok) {
      // A script that keeps asking with a bad table would log every tick: the failing-call rate applies.
      if (this.options.limits.take('script_log', `${m.mode.file}:vote_requested`).ok) {
        this.#log.warn('vote_config_invalid', { match_id: matchId, mode: m.mode.name, script: m.mode.file, problem: asked.problem });
      }
      return;
    }
    m.voting = true;
    this.#events.push({ k: 'vote', matchId, config: { ...asked.config, vote_id: asked.config.vote_id ?? this.options.ids.uuid() } });
  }

  #finish(matchId: string, result: JsonObject): void {
    this.#close(matchId);
    this.#events.push({ k: 'finished', matchId, result });
  }

  #close(matchId: string): void {
    this.#bots.close(matchId);
    this.#matches.get(matchId)?.vm.close();
    this.#matches.delete(matchId);
  }

  close(): void {
    this.#bots.closeAll();
    for (const m of this.#matches.values()) m.vm.close();
    this.#matches.clear();
    for (const w of this.#worlds.values()) w.run.close();
    this.#worlds.clear();
  }
}

function stateFrame(view: string): string {
  return `{"type":"match.state","payload":${view}}`;
}

/** A logger whose lines travel as events, for the main thread's logger to write. */
function eventLogger(push: (e: LaneEvent) => void, base: LogFields = {}): Logger {
  const emit = (level: LogLevel) => (event: string, fields?: LogFields) =>
    push({ k: 'log', level, event, fields: plain({ ...base, ...fields }) });
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

