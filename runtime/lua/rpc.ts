/**
 * The game script's RPC methods (our rule: the script API has no RPC
 * hook, the real-time issue asks for one). `rpc.lua` at the root of the game
 * directory runs in one long-lived sandbox with the instance-free `game`
 * table (`id`, `log`, `send`, domain bindings) and defines a global table
 * `rpc` of functions:
 *
 *   rpc = {}
 *   function rpc.roll(player_id, params) return { value = math.random(6) } end
 *
 * A client calls it as method `game.roll`. A function answers with a table
 * (the result object), with nothing (`{}`), or with `nil`/`false` [, reason]
 * to turn the call down. Every call runs under the light instruction budget;
 * a call that errors, loops or returns something else fails alone. Globals
 * persist between calls (the VM is shared by every caller), and an edited
 * file is re-evaluated before the next call, keeping the old code when the
 * new one does not load.
 */
import { DEFAULT_BUDGETS, RPC_SCRIPT, STATE_LIMIT_BYTES, type Budgets, type FailureKind, type JsonObject, type ScriptRpcResult, type ScriptServices, type ScriptSource } from './host-interface';
import { isObjectJson, jsString, luaString, pushJson, toJson } from './marshal';
import { installGameTable } from './game-table';
import { lua, Sandbox } from './vm';

const METHOD = /^[A-Za-z0-9_-]{1,64}$/;
const REASON = /^[\x20-\x7e]{1,64}$/;
const RPC_TABLE = luaString('rpc');

export interface ScriptRpcOptions {
  source: ScriptSource;
  services: ScriptServices;
  budgets?: Partial<Budgets>;
}

export class ScriptRpc {
  readonly #source: ScriptSource;
  readonly #services: ScriptServices;
  readonly #budgets: Budgets;
  #sandbox: Sandbox | null = null;
  /** Revision of `rpc.lua` last evaluated (or found missing/broken), so a file is read once per change. */
  #revision: number | undefined;
  #checked = false;
  #loadFailure: string | null = null;
  readonly #suppressed = new Map<string, number>();

  constructor(options: ScriptRpcOptions) {
    this.#source = options.source;
    this.#services = options.services;
    this.#budgets = { ...DEFAULT_BUDGETS, ...options.budgets };
  }

  call(method: string, playerId: string, params: JsonObject): ScriptRpcResult {
    const sandbox = this.#current();
    if (!sandbox || !METHOD.test(method)) return { ok: false, unknown: true };
    const L = sandbox.L;
    try {
      // Raw lookups: a metatable on `rpc` must not run script code outside a budgeted call.
      lua.lua_pushglobaltable(L);
      lua.lua_pushstring(L, RPC_TABLE);
      if (lua.lua_rawget(L, -2) !== lua.LUA_TTABLE) return { ok: false, unknown: true };
      lua.lua_pushstring(L, luaString(method));
      if (lua.lua_rawget(L, -2) !== lua.LUA_TFUNCTION) return { ok: false, unknown: true };
      lua.lua_pushstring(L, luaString(playerId));
      pushJson(L, params);
      const base = lua.lua_gettop(L) - 3;
      const out = sandbox.call(2, this.#budgets.light, this.#budgets.lightMs);
      if (!out.ok) return this.#failed(method, out.kind, out.message);
      const n = lua.lua_gettop(L) - base;
      if (n === 0) return { ok: true, result: {} };
      const first = base + 1;
      const type = lua.lua_type(L, first);
      if (type === lua.LUA_TNIL || (type === lua.LUA_TBOOLEAN && !lua.lua_toboolean(L, first))) {
        const reason = n >= 2 && lua.lua_type(L, first + 1) === lua.LUA_TSTRING ? jsString(lua.lua_tostring(L, first + 1)) : '';
        return REASON.test(reason) ? { ok: false, unknown: false, refused: true, reason } : { ok: false, unknown: false, refused: true };
      }
      if (type !== lua.LUA_TTABLE) return this.#failed(method, 'malformed', 'an rpc function must return a table, nothing, or nil/false [, reason]');
      let result;
      try {
        result = toJson(L, first);
      } catch (err) {
        return this.#failed(method, 'malformed', (err as Error).message);
      }
      if (!isObjectJson(result)) return this.#failed(method, 'malformed', 'the result table must encode as an object, not an array');
      if (JSON.stringify(result).length > STATE_LIMIT_BYTES) return this.#failed(method, 'malformed', `the result is larger than ${STATE_LIMIT_BYTES} bytes`);
      return { ok: true, result };
    } finally {
      lua.lua_settop(L, 0);
    }
  }

  /**
   * Loads `rpc.lua` now (boot): null when it loads or is absent, else why
   * it does not. A script that does not load stops the boot, as a broken
   * match script does.
   */
  loadError(): string | null {
    if (this.#source.read(RPC_SCRIPT) === null) return null;
    this.#checked = false;
    return this.#current() ? null : (this.#loadFailure ?? 'the script did not load');
  }

  /** The sandbox running the current `rpc.lua`, (re)loaded when the file changed; null without a usable script. */
  #current(): Sandbox | null {
    const revision = this.#source.revision?.(RPC_SCRIPT);
    if (this.#checked && revision === this.#revision) return this.#sandbox;
    this.#checked = true;
    this.#revision = revision;
    if (this.#source.read(RPC_SCRIPT) === null) {
      // A deleted file takes its methods with it.
      this.#sandbox = null;
      return null;
    }
    if (this.#sandbox) {
      const sandbox = this.#sandbox;
      const reloaded = sandbox.reevaluate(() => sandbox.runFile(RPC_SCRIPT, this.#budgets.heavy, this.#budgets.loadMs));
      if (reloaded.ok) this.#services.log.info('lua_hot_reload', { script: RPC_SCRIPT });
      else this.#report('reload', 'error', reloaded.error);
      return sandbox;
    }
    const sandbox = new Sandbox({ source: this.#source, baseDir: '', heapBudget: this.#budgets.heapBytes, bindingWait: this.#budgets.bindingWaitMs });
    installGameTable(sandbox, { kind: 'rpc', file: RPC_SCRIPT, services: this.#services });
    const loaded = sandbox.runFile(RPC_SCRIPT, this.#budgets.heavy, this.#budgets.loadMs);
    if (!loaded.ok) {
      this.#loadFailure = loaded.error;
      this.#report('load', 'error', loaded.error);
      return null;
    }
    this.#sandbox = sandbox;
    return sandbox;
  }

  #failed(method: string, kind: FailureKind, message: string): ScriptRpcResult {
    this.#report(`rpc.${method}`, kind, message);
    return { ok: false, unknown: false, refused: false, kind, message };
  }

  /** `lua_callback_failed`, rate-limited per call site like a match's (group `script_log`). */
  #report(callback: string, kind: FailureKind, message: string): void {
    this.#services.failed?.(kind);
    const site = `${RPC_SCRIPT}:${callback}`;
    if (!this.#services.limits.take('script_log', site).ok) {
      this.#suppressed.set(site, (this.#suppressed.get(site) ?? 0) + 1);
      return;
    }
    const suppressed = this.#suppressed.get(site) ?? 0;
    this.#suppressed.delete(site);
    this.#services.log.warn('lua_callback_failed', {
      callback,
      script: RPC_SCRIPT,
      reason_class: kind,
      detail: message.slice(0, 500),
      suppressed_since_last: suppressed,
    });
  }
}
