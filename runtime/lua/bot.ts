/**
 * A bot script's VM (lua-scripting 11): `think(bot_id, state)` returns the
 * bot's next input. There is no `game` table, `require` is rooted at the
 * bot script's directory, and whatever a `think` call writes to what the
 * script holds between calls (globals, module-level locals, the tables they
 * reach) is put back after the call, as the reference says. Since no call
 * can leave anything behind, one VM serves every bot that runs the script
 * in a lane: the bots differ only in the id and view each call gets.
 */
import { DEFAULT_BUDGETS, type FailureKind, type JsonObject, type ScriptServices, type ScriptSource } from './api';
import { ScriptInstance } from './instance';
import { isObjectJson, MarshalError, pushJson, stringObject, toJson } from './marshal';
import { internals, type KeptState } from './fengari-internals';
import { lauxlib, lua, to_luastring, type LuaFunction } from './vm';

/** Wall-clock budget of one `think` (lua-scripting 9.3). */
export const THINK_MS = 50;

const THINK = stringObject('think');

export type ThinkResult =
  /** `input` null: the script had nothing to send this time (it returned nil). */
  | { ok: true; input: JsonObject | null }
  | { ok: false; kind: FailureKind; message: string };

export interface BotVmOptions {
  source: ScriptSource;
  /** The bot script, relative to the game directory. */
  script: string;
  services: ScriptServices;
  /** Instructions one `think` may run (the node's light budget). */
  instructions?: number;
  heapBytes?: number;
}

/**
 * Host-owned Lua (kept in the registry, out of the script's reach) that
 * records what the script holds once its body has run and puts it back
 * after each call. `library` is every table and function that existed
 * before the body ran: the sandbox's own, never walked into. What is kept:
 * the globals table itself (a global a call adds is removed, one it
 * reassigns or removes is put back) and every table and function the
 * globals reach beyond the library: tables entry by entry, keeping their
 * identity, with their metatables; functions' upvalues one by one (a
 * module-level `local count` is one). `snapshot` returns the kept tables
 * and functions, so a host with the fengari internals restores them
 * itself (one Map lookup per entry) instead of calling `restore`, which
 * makes a C call per entry.
 */
const KEEPER = `
local getupvalue, setupvalue, getmt, setmt, G, cache = ...
local next, type, rawget, rawset, rawequal = next, type, rawget, rawset, rawequal
local library = {}
local tables, copies, metas, funcs, ups, counts = {}, {}, {}, {}, {}, {}

local function keep(t)
  local copy = {}
  for k, x in next, t do copy[k] = x end
  tables[#tables + 1] = t; copies[#copies + 1] = copy; metas[#metas + 1] = getmt(t) or false
end

local function walk(from, mark, into)
  local stack, n = { from }, 1
  while n > 0 do
    local v = stack[n]
    stack[n] = nil
    n = n - 1
    if not mark[v] and not (into and library[v]) then
      mark[v] = true
      if type(v) == "table" then
        for k, x in next, v do
          local tk, tx = type(k), type(x)
          if (tk == "table" or tk == "function") and not mark[k] then n = n + 1; stack[n] = k end
          if (tx == "table" or tx == "function") and not mark[x] then n = n + 1; stack[n] = x end
        end
        local m = getmt(v)
        if m ~= nil and not mark[m] then n = n + 1; stack[n] = m end
        if into then keep(v) end
      elseif type(v) == "function" then
        local values, i = {}, 0
        while true do
          local name, x = getupvalue(v, i + 1)
          if name == nil then break end
          i = i + 1
          values[i] = x
          local tx = type(x)
          if (tx == "table" or tx == "function") and not mark[x] then n = n + 1; stack[n] = x end
        end
        if into and i > 0 then
          funcs[#funcs + 1] = v; ups[#ups + 1] = values; counts[#counts + 1] = i
        end
      end
    end
  end
end

local keeper = {}

-- Before the body runs: everything the sandbox made (but the module cache, which the script fills).
function keeper.library()
  walk(G, library, false)
  walk(getmt(""), library, false)
  library[cache] = nil
end

-- After the body ran (and after each hot reload).
function keeper.snapshot()
  tables, copies, metas, funcs, ups, counts = {}, {}, {}, {}, {}, {}
  keep(G)
  local seen = {}
  for _, v in next, G do
    local t = type(v)
    if t == "table" or t == "function" then walk(v, seen, true) end
  end
  return tables, funcs
end

function keeper.restore()
  for i = 1, #tables do
    local t, copy = tables[i], copies[i]
    for k in next, t do
      if rawget(copy, k) == nil then rawset(t, k, nil) end
    end
    for k, v in next, copy do
      if not rawequal(rawget(t, k), v) then rawset(t, k, v) end
    end
    local m = metas[i]
    if not rawequal(getmt(t), m or nil) then setmt(t, m or nil) end
  end
  for i = 1, #funcs do
    local f, values = funcs[i], ups[i]
    for j = 1, counts[i] do setupvalue(f, j, values[j]) end
  end
end

return keeper
`;

/** Raw versions (no `__metatable` protection) of what the keeper needs, which the sandbox does not give scripts. */
const RAW: Record<string, LuaFunction> = {
  getupvalue: (L) => {
    const name = lua.lua_getupvalue(L, 1, lua.lua_tointeger(L, 2));
    if (name === null || name === undefined) return 0;
    lua.lua_pushstring(L, name);
    lua.lua_insert(L, -2);
    return 2;
  },
  setupvalue: (L) => {
    lua.lua_settop(L, 3);
    lua.lua_setupvalue(L, 1, lua.lua_tointeger(L, 2));
    return 0;
  },
  getmt: (L) => (lua.lua_getmetatable(L, 1) ? 1 : 0),
  setmt: (L) => {
    lua.lua_settop(L, 2);
    lua.lua_setmetatable(L, 1);
    return 0;
  },
};

export class BotVm extends ScriptInstance<'think'> {
  readonly script: string;
  readonly #instructions: number;
  #keeper = lua.LUA_NOREF;
  /** With the fengari internals: what the last snapshot recorded, restored from JavaScript. */
  #kept: KeptState | null = null;

  private constructor(options: BotVmOptions) {
    super({
      source: options.source,
      file: options.script,
      services: options.services,
      budgets: { heapBytes: options.heapBytes ?? DEFAULT_BUDGETS.heapBytes },
      logFields: { bot_script: options.script },
    });
    this.script = options.script;
    this.#instructions = options.instructions ?? DEFAULT_BUDGETS.light;
  }

  /** Builds the VM and runs the body; throws (naming the script) when it does not load. */
  static create(options: BotVmOptions): BotVm {
    const vm = new BotVm(options);
    vm.#installKeeper();
    vm.#keep('library');
    const loaded = vm.evaluate();
    if (!loaded.ok) throw new Error(`${options.script}: ${loaded.error}`);
    vm.#keep('snapshot');
    return vm;
  }

  /** The file changed on disk since the body ran. */
  get changed(): boolean {
    return this.stale();
  }

  /** Hot reload: the new body over the kept globals; a broken file keeps the old code. */
  refresh(): { ok: true } | { ok: false; error: string } {
    this.#keep('restore');
    this.sandbox.cap = Infinity;
    const result = this.reevaluate();
    if (result.ok) this.#keep('snapshot');
    return result;
  }

  /**
   * `think(bot_id, view)`: a table is the input, nil is no input, anything
   * else (and any failure) is a failed call. What the call wrote to the
   * script's globals and tables is put back either way.
   */
  think(botId: string, view: JsonObject): ThinkResult {
    const L = this.L;
    this.sandbox.cap = Infinity;
    if (!this.pushCallback(THINK)) return { ok: false, kind: 'error', message: 'the bot script defines no think function' };
    lua.lua_pushstring(L, to_luastring(botId));
    pushJson(L, view);
    const out = this.sandbox.call(2, this.#instructions, THINK_MS);
    let result: ThinkResult;
    if (!out.ok) {
      result = out;
    } else {
      const type = out.results > 0 ? lua.lua_type(L, -out.results) : lua.LUA_TNIL;
      if (type === lua.LUA_TNIL) {
        result = { ok: true, input: null };
      } else if (type !== lua.LUA_TTABLE) {
        result = { ok: false, kind: 'malformed', message: 'think must return a table (the input) or nil' };
      } else {
        try {
          const input = toJson(L, -out.results);
          // An empty table at the top encodes as {}; a list is not an input.
          result = isObjectJson(input) ? { ok: true, input } : { ok: false, kind: 'malformed', message: 'think must return a table of named fields' };
        } catch (err) {
          if (!(err instanceof MarshalError)) throw err;
          result = { ok: false, kind: 'malformed', message: err.message };
        }
      }
    }
    lua.lua_settop(L, 0);
    this.#keep('restore');
    if (!result.ok) this.services.failed?.(result.kind);
    return result;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.#keeper !== lua.LUA_NOREF) lauxlib.luaL_unref(this.L, lua.LUA_REGISTRYINDEX, this.#keeper);
    this.#keeper = lua.LUA_NOREF;
  }

  #installKeeper(): void {
    const L = this.L;
    if (lauxlib.luaL_loadbufferx(L, to_luastring(KEEPER), null, to_luastring('=bot_keeper'), to_luastring('t')) !== lua.LUA_OK) {
      throw new Error(`bot keeper: ${lua.lua_tojsstring(L, -1)}`);
    }
    for (const name of ['getupvalue', 'setupvalue', 'getmt', 'setmt']) lua.lua_pushcfunction(L, RAW[name]!);
    lua.lua_pushglobaltable(L);
    lua.lua_getglobal(L, to_luastring('_SVC_LOADED'));
    lua.lua_call(L, 6, 1);
    this.#keeper = lauxlib.luaL_ref(L, lua.LUA_REGISTRYINDEX);
  }

  /**
   * Runs a keeper step outside any script call's budget: its cost is
   * bounded by what the body built, which had a budget of its own.
   */
  #keep(step: 'library' | 'snapshot' | 'restore'): void {
    const L = this.L;
    if (step === 'restore' && this.#kept !== null) return internals!.restoreState(L, this.#kept);
    lua.lua_rawgeti(L, lua.LUA_REGISTRYINDEX, this.#keeper);
    lua.lua_getfield(L, -1, to_luastring(step));
    const results = step === 'snapshot' ? 2 : 0;
    const status = lua.lua_pcall(L, 0, results, 0);
    if (step === 'snapshot') this.#kept = status === lua.LUA_OK && internals ? internals.keepState(L, -2, -1) : null;
    if (status !== lua.LUA_OK) this.services.log.error('bot_keeper_failed', { step, script: this.script, error: lua.lua_tojsstring(L, -1) });
    lua.lua_settop(L, 0);
  }
}
