/**
 * One match: one sandboxed VM running the mode's script. The state lives in
 * the Lua registry and is handed to every callback; a failed callback never
 * replaces it.
 */
import {
  STATE_LIMIT_BYTES,
  type CallResult,
  type JoinResult,
  type JsonObject,
  type JsonValue,
  type MatchOutcome,
  type MatchRuntime,
  type MatchServices,
  type MatchVmOptions,
  type ModeInfo,
  type TickResult,
} from './host-interface';
import { RegistrySlot, ScriptInstance } from './instance';
import { isObjectJson, MarshalError, pushJson, pushStringObject, readAhead, stringObject, toJson, toJsonText, type LuaStringObject } from './marshal';
import { installGameTable } from './game-table';
import { lua } from './vm';

/** The state itself is measured every this many ticks; views are measured every time. */
const STATE_CHECK_EVERY = 10;
const EMPTY_VIEW = '{}';

type Callback = 'init' | 'join' | 'leave' | 'handle_input' | 'tick' | 'get_state' | 'vote_requested' | 'vote_resolved' | 'phases' | 'on_phase_started' | 'on_phase_ended';

/** The ceiling for `phases(config)` in its probe VM, as the reference server has it. */
const PHASES_MS = 1000;

const NAMES = {
  init: stringObject('init'),
  join: stringObject('join'),
  leave: stringObject('leave'),
  handle_input: stringObject('handle_input'),
  tick: stringObject('tick'),
  get_state: stringObject('get_state'),
  vote_requested: stringObject('vote_requested'),
  vote_resolved: stringObject('vote_resolved'),
  phases: stringObject('phases'),
  _finished: stringObject('_finished'),
  _result: stringObject('_result'),
};

/** The callbacks a tick may call, in the order it calls them. */
const TICK_CALLBACKS = [NAMES.handle_input, NAMES.tick, NAMES.vote_requested, NAMES.get_state];

/**
 * Inputs a match holds between two of its ticks. Each socket may send 60
 * frames a second, so an honest match never comes near it; a match whose
 * ticks are throttled or skipped for long (its script overruns its share of
 * the lane) would otherwise hold every input of every player for as long, up
 * to 64 KiB each. Past it the oldest inputs go: the newest say what a player
 * wants now.
 */
export const MAX_QUEUED_INPUTS = 1024;

export class MatchVm extends ScriptInstance<Callback> implements MatchRuntime {
  readonly matchId: string;
  readonly mode: ModeInfo;
  protected override readonly services: MatchServices;
  private readonly state: RegistrySlot;
  private readonly roster = new Map<string, LuaStringObject>();
  private readonly queue: [string, JsonObject][] = [];
  private dropped = 0;
  private outcome: MatchOutcome | null = null;
  private ticks = 0;
  /** The shared strategy's view of the current tick. */
  private sharedView: string | null = null;

  private readonly options: MatchVmOptions;

  private constructor(options: MatchVmOptions, probe = false) {
    super({ source: options.source, file: options.mode.file, services: options.services, budgets: options.budgets, logFields: { match_id: options.matchId, mode: options.mode.name } });
    this.matchId = options.matchId;
    this.mode = options.mode;
    this.services = options.services;
    this.options = options;
    this.state = new RegistrySlot(this.L);
    installGameTable(this.sandbox, {
      kind: 'match',
      matchId: this.matchId,
      mode: this.mode.name,
      services: this.services,
      file: this.mode.file,
      probe,
    });
  }

  /**
   * Builds the VM and runs the script body. Throws (naming the script) when
   * the body does not load: the host then does not create the match.
   */
  static create(options: MatchVmOptions): MatchVm {
    const vm = new MatchVm(options);
    const loaded = vm.evaluate();
    if (!loaded.ok) throw new Error(`${options.mode.file}: ${loaded.error}`);
    return vm;
  }

  /**
   * Before a lane runs the ticks of `vms`: reads ahead, across them all, what
   * their ticks read first (marshal.ts's readAhead, decision 0076).
   */
  static readAhead(vms: readonly MatchVm[]): void {
    const Ls: any[] = [];
    const refs: number[] = [];
    for (const vm of vms) {
      if (vm.closed) continue;
      Ls.push(vm.L);
      refs.push(vm.state.ref);
    }
    readAhead(Ls, refs, TICK_CALLBACKS);
  }

  init(): CallResult {
    const L = this.L;
    const config: JsonObject = { ...this.mode.operator, match_id: this.matchId, mode: this.mode.name };
    this.sandbox.cap = Infinity;
    if (!this.pushCallback(NAMES.init)) return this.fail('init', 'error', 'the script defines no init function');
    pushJson(L, config);
    const out = this.sandbox.call(1, this.budgets.heavy, this.budgets.heavyMs);
    if (!out.ok) return this.fail('init', out.kind, out.message);
    if (out.results < 1 || lua.lua_type(L, -out.results) !== lua.LUA_TTABLE) {
      lua.lua_settop(L, 0);
      return this.fail('init', 'malformed', 'init must return the state table');
    }
    lua.lua_settop(L, 1);
    this.storeState();
    return { ok: true };
  }

  join(playerId: string, ctx: JsonObject = {}): JoinResult {
    const id = stringObject(playerId);
    const joined = this.joinCall('join', id, ctx, this.state);
    if (joined.ok) this.roster.set(playerId, id);
    return joined;
  }

  leave(playerId: string): CallResult {
    const id = this.roster.get(playerId) ?? stringObject(playerId);
    // The player is gone whatever the script says.
    this.roster.delete(playerId);
    this.sandbox.cap = Infinity;
    if (!this.pushCallback(NAMES.leave)) return { ok: true };
    pushStringObject(this.L, id);
    this.pushState();
    return this.stateCall('leave', 2, this.budgets.light, this.budgets.lightMs, true);
  }

  input(playerId: string, input: JsonObject): void {
    if (this.queue.length >= MAX_QUEUED_INPUTS) {
      this.queue.shift();
      this.dropped++;
    }
    this.queue.push([playerId, input]);
  }

  /**
   * One tick. Its inputs, reload, `tick` and the views asked for after it
   * share one deadline (the heavy one), so a match costs its worker at most
   * that much per tick however its callbacks misbehave.
   */
  tick(): TickResult {
    this.sharedView = null;
    this.sandbox.cap = Date.now() + this.budgets.heavyMs;
    let inputFailures = 0;
    // Inputs first, in arrival order, with the code they were sent against.
    const queued = this.queue.splice(0, this.queue.length);
    for (const [playerId, input] of queued) {
      if (!this.pushCallback(NAMES.handle_input)) break;
      pushStringObject(this.L, this.roster.get(playerId) ?? stringObject(playerId));
      pushJson(this.L, input);
      this.pushState();
      const out = this.stateCall('handle_input', 3, this.budgets.light, this.budgets.lightMs);
      if (!out.ok) {
        inputFailures++;
        this.tellPlayer(playerId, 'handle_input', out.message);
      }
    }
    if (this.stale()) {
      // A reload (once per edit) has its own deadline; the tick and views then get a fresh one.
      this.sandbox.cap = Infinity;
      this.reevaluate();
      this.sandbox.cap = Date.now() + this.budgets.heavyMs;
    }

    let tick: CallResult = { ok: true };
    if (this.pushCallback(NAMES.tick)) {
      this.pushState();
      tick = this.stateCall('tick', 1, this.budgets.heavy, this.budgets.heavyMs);
    }
    this.ticks++;
    this.checkFinished();
    if (!this.outcome && this.ticks % STATE_CHECK_EVERY === 0) this.checkStateSize();
    const inputsDropped = this.dropped;
    this.dropped = 0;
    return { inputFailures, inputsDropped, tick, finished: this.outcome };
  }

  viewJson(playerId: string): string {
    if (this.outcome) return EMPTY_VIEW;
    if (this.mode.state_strategy === 'shared') {
      this.sharedView ??= this.view(null);
      return this.sharedView;
    }
    return this.view(this.roster.get(playerId) ?? stringObject(playerId));
  }

  private view(id: LuaStringObject | null): string {
    const L = this.L;
    if (!this.pushCallback(NAMES.get_state)) return EMPTY_VIEW;
    if (id) pushStringObject(L, id);
    this.pushState();
    const out = this.sandbox.call(id ? 2 : 1, this.budgets.light, this.budgets.lightMs);
    if (!out.ok) {
      this.report('get_state', out.kind, out.message);
      return EMPTY_VIEW;
    }
    let text = EMPTY_VIEW;
    if (out.results > 0 && lua.lua_type(L, -out.results) === lua.LUA_TTABLE) {
      try {
        // Only an object is a view; a table that encodes as an array is not.
        text = toJsonText(L, -out.results, true) ?? EMPTY_VIEW;
      } catch (err) {
        this.report('get_state', 'malformed', (err as Error).message);
      }
    }
    lua.lua_settop(L, 0);
    if (text.length > STATE_LIMIT_BYTES) {
      this.outcome = { result: { status: 'error', reason: 'state_too_large' } };
      return EMPTY_VIEW;
    }
    return text;
  }

  finished(): MatchOutcome | null {
    return this.outcome;
  }

  /**
   * `vote_requested(state)` after a tick that did not finish, sharing that
   * tick's deadline: the table it returned as JSON, or null (no such
   * callback, nil/false, a failed call).
   */
  voteRequested(): JsonValue {
    const L = this.L;
    if (this.outcome || !this.pushCallback(NAMES.vote_requested)) return null;
    this.pushState();
    const out = this.sandbox.call(1, this.budgets.light, this.budgets.lightMs);
    if (!out.ok) {
      this.fail('vote_requested', out.kind, out.message);
      return null;
    }
    let config: JsonValue = null;
    if (out.results > 0 && lua.lua_type(L, -out.results) === lua.LUA_TTABLE) {
      try {
        config = toJson(L, -out.results) ?? null;
      } catch (err) {
        this.report('vote_requested', 'malformed', (err as Error).message);
      }
    }
    lua.lua_settop(L, 0);
    return config;
  }

  /** `vote_resolved(template, result, state)` when a vote closes; it returns the state. */
  voteResolved(template: string, result: JsonObject): CallResult {
    this.sandbox.cap = Infinity;
    if (!this.pushCallback(NAMES.vote_resolved)) return { ok: true };
    pushJson(this.L, template);
    pushJson(this.L, result);
    this.pushState();
    return this.stateCall('vote_resolved', 3, this.budgets.light, this.budgets.lightMs, true);
  }

  /**
   * `phases(config)`, once per match, in a probe VM: a second VM
   * running the same body whose `game.*` functions change nothing and
   * answer false, so the declaration cannot touch the match or the world
   * outside it. What it returned, as JSON; undefined when the script
   * declares no `phases`, or the probe or the call failed (no phases; logged).
   */
  probePhases(): JsonValue | undefined {
    if (!this.pushCallback(NAMES.phases)) return undefined;
    lua.lua_settop(this.L, 0);
    const probe = new MatchVm(this.options, true);
    try {
      const loaded = probe.evaluate();
      if (!loaded.ok) {
        this.report('phases', 'error', `probe VM: ${loaded.error}`);
        return undefined;
      }
      if (!probe.pushCallback(NAMES.phases)) return undefined;
      pushJson(probe.L, {});
      const out = probe.sandbox.call(1, this.budgets.heavy, Math.max(this.budgets.heavyMs, PHASES_MS));
      if (!out.ok) {
        this.report('phases', out.kind, out.message);
        return undefined;
      }
      try {
        return out.results > 0 ? toJson(probe.L, -out.results) : undefined;
      } catch (err) {
        this.report('phases', 'malformed', (err as Error).message);
        return undefined;
      }
    } finally {
      probe.close();
    }
  }

  phase(callback: 'on_phase_started' | 'on_phase_ended', name: string): CallResult {
    return this.phaseCall(callback, name, this.state);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.queue.length = 0;
    this.roster.clear();
    this.state.clear();
  }

  // ---- internals ---------------------------------------------------------

  private pushState(): void {
    this.state.push();
  }

  /** Takes the table on top of the stack as the new state. */
  private storeState(): void {
    this.state.store();
    lua.lua_settop(this.L, 0);
  }

  /** A callback that must return the new state (nothing or nil is a failed call). */
  private stateCall(callback: Callback, nargs: number, budget: number, ms: number, revert = false): CallResult {
    const out = this.tableCall(callback, this.state, nargs, budget, ms, revert);
    lua.lua_settop(this.L, 0);
    return out.ok ? { ok: true } : out;
  }

  private checkFinished(): void {
    const L = this.L;
    if (this.outcome || this.state.empty) return;
    this.pushState();
    pushStringObject(L, NAMES._finished);
    const finished = lua.lua_rawget(L, -2) === lua.LUA_TBOOLEAN && lua.lua_toboolean(L, -1);
    lua.lua_pop(L, 1);
    if (finished) {
      let result: JsonObject = {};
      pushStringObject(L, NAMES._result);
      if (lua.lua_rawget(L, -2) === lua.LUA_TTABLE) {
        try {
          const value = toJson(L, -1);
          if (isObjectJson(value)) result = value;
        } catch (err) {
          this.report('tick', 'malformed', `_result: ${(err as Error).message}`);
        }
      }
      this.outcome = { result };
    }
    lua.lua_settop(L, 0);
  }

  private checkStateSize(): void {
    this.pushState();
    try {
      if ((toJsonText(this.L, -1) ?? 'null').length > STATE_LIMIT_BYTES) {
        this.outcome = { result: { status: 'error', reason: 'state_too_large' } };
      }
    } catch (err) {
      // A cyclic state is legal Lua; it just cannot be measured this way.
      if (!(err instanceof MarshalError)) throw err;
    } finally {
      lua.lua_settop(this.L, 0);
    }
  }
}
