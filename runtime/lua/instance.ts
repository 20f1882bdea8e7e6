/**
 * What every instance VM (a match, a world, a zone) shares: a sandbox running
 * one mode script, hot reload against the script's revision, values the host
 * keeps in the Lua registry between calls, and one way to report a failed
 * callback. The instance kinds differ only in their callbacks.
 */
import { DEFAULT_BUDGETS, type Budgets, type CallResult, type FailureKind, isLimitKind, type JoinResult, type JsonObject, type LimitKind, type ScriptServices, type ScriptSource } from './host-interface';
import { dirOf } from './game-declarations';
import { jsString, pushGlobal, pushJson, pushRegistry, pushStringObject, stringObject, type LuaStringObject } from './marshal';
import { SNAPSHOT_MAX_ENTRIES, VmSnapshot } from './snapshot';
import { lauxlib, lua, Sandbox, type Outcome } from './vm';
import type { LogFields } from '../platform/log';

const JOIN = stringObject('join');
type PhaseCallback = 'on_phase_started' | 'on_phase_ended';
const PHASE_CALLBACKS: Record<PhaseCallback, LuaStringObject> = {
  on_phase_started: stringObject('on_phase_started'),
  on_phase_ended: stringObject('on_phase_ended'),
};
/** A refusal reason longer than this is dropped. */
const REASON_MAX = 64;

/** A Lua value the host keeps between calls (a state, a zone's entities). */
export class RegistrySlot {
  #ref: number = lua.LUA_NOREF;

  constructor(private readonly L: any) {}

  get empty(): boolean {
    return this.#ref === lua.LUA_NOREF;
  }

  /** Its registry slot (LUA_NOREF while empty). */
  get ref(): number {
    return this.#ref;
  }

  /** Pushes the value, or nil while the slot is empty. */
  push(): void {
    if (this.#ref === lua.LUA_NOREF) lua.lua_pushnil(this.L);
    else pushRegistry(this.L, this.#ref);
  }

  /** Pushes the value onto another thread of the same Lua state (a script calling in from a coroutine). */
  pushOnto(L: any): void {
    if (this.#ref === lua.LUA_NOREF) lua.lua_pushnil(L);
    else pushRegistry(L, this.#ref);
  }

  /** Takes the value on top of the stack (popping it). */
  store(): void {
    if (this.#ref === lua.LUA_NOREF) this.#ref = lauxlib.luaL_ref(this.L, lua.LUA_REGISTRYINDEX);
    else lua.lua_rawseti(this.L, lua.LUA_REGISTRYINDEX, this.#ref);
  }

  clear(): void {
    if (this.#ref !== lua.LUA_NOREF) lauxlib.luaL_unref(this.L, lua.LUA_REGISTRYINDEX, this.#ref);
    this.#ref = lua.LUA_NOREF;
  }
}

export interface InstanceOptions {
  source: ScriptSource;
  /** The mode script, relative to the game directory. */
  file: string;
  services: ScriptServices;
  budgets?: Partial<Budgets>;
  /** Fields every log line of this instance carries (`match_id`, `world_id`, `zone`, `mode`). */
  logFields: LogFields;
}

export abstract class ScriptInstance<Callback extends string> {
  protected readonly sandbox: Sandbox;
  protected readonly L: any;
  protected readonly budgets: Budgets;
  protected readonly services: ScriptServices;
  protected readonly file: string;
  protected closed = false;
  readonly #source: ScriptSource;
  readonly #logFields: LogFields;
  #revision: number | undefined;
  readonly #suppressed = new Map<string, number>();
  #limitFailure: { callback: Callback | 'reload'; kind: LimitKind } | null = null;
  /** When this VM last told a player of a failed input (ScriptServices.scriptError). */
  #toldAt = -Infinity;

  protected constructor(options: InstanceOptions) {
    this.#source = options.source;
    this.file = options.file;
    this.services = options.services;
    this.#logFields = options.logFields;
    this.budgets = { ...DEFAULT_BUDGETS, ...options.budgets };
    this.sandbox = new Sandbox({ source: options.source, baseDir: dirOf(options.file), heapBudget: this.budgets.heapBytes, bindingWait: this.budgets.bindingWaitMs });
    this.L = this.sandbox.L;
  }

  /** Compiles and runs the script body in this VM (creation and hot reload). */
  protected evaluate(): { ok: true } | { ok: false; error: string } {
    this.#revision = this.#source.revision?.(this.file);
    return this.sandbox.runFile(this.file, this.budgets.heavy, this.budgets.loadMs);
  }

  /** The script changed on disk since this VM evaluated it. */
  protected stale(): boolean {
    const revision = this.#source.revision;
    return revision !== undefined && revision(this.file) !== this.#revision;
  }

  /** Runs the new body over the live globals; a broken file keeps the old code. */
  protected reevaluate(): { ok: true } | { ok: false; error: string } {
    const result = this.sandbox.reevaluate(() => this.evaluate());
    if (result.ok) this.services.log.info('lua_hot_reload', { ...this.#logFields, script: this.file });
    else this.report('reload', 'error', result.error);
    return result;
  }

  /** Re-evaluates the script now (hot reload). */
  reload(): { ok: true } | { ok: false; error: string } {
    this.sandbox.cap = Infinity;
    return this.reevaluate();
  }

  /** The last callback a limit stopped since the previous ask (the host counts ticks that had one). */
  takeLimitFailure(): { callback: string; kind: LimitKind } | null {
    const failure = this.#limitFailure;
    this.#limitFailure = null;
    return failure;
  }

  /** Pushes a global callback; false (nothing pushed) when the script does not define it. */
  protected pushCallback(name: LuaStringObject): boolean {
    if (this.closed) return false;
    if (pushGlobal(this.L, name) === lua.LUA_TFUNCTION) return true;
    lua.lua_pop(this.L, 1);
    return false;
  }

  /**
   * A callback whose first result is a table the host keeps in `slot` (a
   * state, an entity table); nothing, nil or a non-table is a failed call
   * and the slot keeps its value. Extra results stay on the stack above the
   * call's base for the caller to read; it clears the stack after.
   */
  protected tableCall(callback: Callback, slot: RegistrySlot, nargs: number, budget: number, ms: number, revert = false): Outcome {
    const L = this.L;
    // `revert`: the last argument is the state, and a failed call leaves no trace in the VM.
    const snapshot = revert ? this.snapshot(callback, -1) : null;
    const out = this.sandbox.call(nargs, budget, ms);
    if (!out.ok) {
      snapshot?.restore();
      this.fail(callback, out.kind, out.message);
      return out;
    }
    if (out.results < 1 || lua.lua_type(L, -out.results) !== lua.LUA_TTABLE) {
      const message = `${callback} must return a table`;
      lua.lua_settop(L, 0);
      snapshot?.restore();
      this.fail(callback, 'malformed', message);
      return { ok: false, kind: 'malformed', message };
    }
    snapshot?.release();
    lua.lua_pushvalue(L, -out.results);
    slot.store();
    return out;
  }

  /**
   * `join(player_id, state, ctx)`, the same for every instance kind: a table
   * is the new state (kept in `state`); `nil`/`false` [, reason] turns the
   * player away (reason kept only if printable ASCII of at most 64 bytes);
   * anything else is a failed call.
   */
  protected joinCall(join: Callback, id: LuaStringObject, ctx: JsonObject, state: RegistrySlot): JoinResult {
    const L = this.L;
    this.sandbox.cap = Infinity;
    if (!this.pushCallback(JOIN)) {
      this.fail(join, 'error', 'the script defines no join function');
      return { ok: false, refused: false, kind: 'error', message: 'the script defines no join function' };
    }
    pushStringObject(L, id);
    state.push();
    const snapshot = this.snapshot(join, -1);
    pushJson(L, ctx);
    const out = this.sandbox.call(3, this.budgets.light, this.budgets.lightMs);
    if (!out.ok) {
      snapshot?.restore();
      this.fail(join, out.kind, out.message);
      return { ok: false, refused: false, kind: out.kind, message: out.message };
    }
    const first = out.results > 0 ? lua.lua_type(L, -out.results) : lua.LUA_TNONE;
    if (first === lua.LUA_TTABLE) {
      snapshot?.release();
      lua.lua_settop(L, 1);
      state.store();
      lua.lua_settop(L, 0);
      return { ok: true };
    }
    // Refused or malformed: nothing the call did persists, the reason read first.
    let reason: string | undefined;
    if (out.results >= 2 && lua.lua_type(L, -out.results + 1) === lua.LUA_TSTRING) {
      const text = jsString(lua.lua_tostring(L, -out.results + 1));
      if (text.length > 0 && text.length <= REASON_MAX && /^[\x20-\x7e]+$/.test(text)) reason = text;
    }
    const refused = first === lua.LUA_TNIL || first === lua.LUA_TNONE || (first === lua.LUA_TBOOLEAN && !lua.lua_toboolean(L, -out.results));
    lua.lua_settop(L, 0);
    snapshot?.restore();
    if (refused) {
      if (first === lua.LUA_TNONE) this.report(join, 'malformed', 'join_returned_no_state');
      return reason === undefined ? { ok: false, refused: true } : { ok: false, refused: true, reason };
    }
    this.fail(join, 'malformed', 'join must return the state, or nil/false [, reason] to refuse');
    return { ok: false, refused: false, kind: 'malformed', message: 'join returned neither a state nor a refusal' };
  }

  /**
   * `on_phase_started(name, state)` / `on_phase_ended(name, state)` for an
   * instance whose state is in `state` (a match, a world): it returns the
   * state, and a failed call leaves no trace (decision 0040).
   */
  protected phaseCall(callback: Callback & PhaseCallback, name: string, state: RegistrySlot): CallResult {
    this.sandbox.cap = Infinity;
    if (!this.pushCallback(PHASE_CALLBACKS[callback])) return { ok: true };
    pushJson(this.L, name);
    state.push();
    const out = this.tableCall(callback, state, 2, this.budgets.light, this.budgets.lightMs, true);
    lua.lua_settop(this.L, 0);
    return out.ok ? { ok: true } : out;
  }

  /**
   * A snapshot of the VM (globals and the state at `stateIndex`) for a call
   * whose failure or refusal must leave no trace; null, logged, when the VM
   * is too big to copy (that call then keeps what it did).
   */
  protected snapshot(callback: Callback, stateIndex: number): VmSnapshot | null {
    const snapshot = VmSnapshot.take(this.L, stateIndex);
    if (!snapshot && this.services.limits.take('script_log', `${this.file}:${callback}:snapshot`).ok) {
      this.services.log.warn('lua_snapshot_skipped', { ...this.#logFields, callback, script: this.file, detail: `the VM holds over ${SNAPSHOT_MAX_ENTRIES} table entries and upvalues: this call is not reverted if it fails` });
    }
    return snapshot;
  }

  protected fail(callback: Callback | 'reload', kind: FailureKind, message: string): CallResult {
    lua.lua_settop(this.L, 0);
    this.report(callback, kind, message);
    return { ok: false, kind, message };
  }

  /**
   * The player whose input failed hears of it (development errors; the host decides whether it is sent), at
   * most once a second from this VM, as on the reference server, so a broken script cannot flood its players.
   */
  protected tellPlayer(playerId: string, callback: Callback, message: string): void {
    if (!this.services.scriptError) return;
    const now = this.services.clock.now();
    if (now - this.#toldAt < 1000) return;
    this.#toldAt = now;
    this.services.scriptError(playerId, { callback, script: this.file, message: message.slice(0, 500) });
  }

  /** `lua_callback_failed`, 3 lines per 10 s per call site (group `script_log`). */
  protected report(callback: Callback | 'reload', kind: FailureKind, message: string): void {
    if (isLimitKind(kind)) this.#limitFailure = { callback, kind };
    this.services.failed?.(kind);
    const site = `${this.file}:${callback}`;
    if (!this.services.limits.take('script_log', site).ok) {
      this.#suppressed.set(site, (this.#suppressed.get(site) ?? 0) + 1);
      return;
    }
    const suppressed = this.#suppressed.get(site) ?? 0;
    this.#suppressed.delete(site);
    this.services.log.warn('lua_callback_failed', {
      ...this.#logFields,
      callback,
      script: this.file,
      reason_class: kind,
      detail: message.slice(0, 500),
      suppressed_since_last: suppressed,
    });
  }
}
