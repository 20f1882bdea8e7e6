/**
 * One sandboxed fengari state and the only way
 * to call into it: `call()` runs a function under an instruction budget and
 * turns every way a script can misbehave into a failed call.
 *
 * Budget enforcement has four parts:
 *  - a count hook charges instructions; when the budget is spent the hook
 *    raises, and from then on fires on EVERY instruction, so `pcall` inside
 *    the script cannot swallow the failure and keep going;
 *  - the same hook checks a wall-clock deadline (instructions differ wildly
 *    in cost: a million table inserts take over a second, a million adds
 *    under 0.1 s) and the growth of the JavaScript heap plus external
 *    memory since the call began (V8's statistics cost under a microsecond,
 *    against tens of microseconds for the thousand instructions between
 *    hooks);
 *  - string building (the `..` operator and every luaL_Buffer user:
 *    string.rep, gsub, format, table.concat ...) is capped per string and its
 *    bytes are charged against the same budget, so memcpy-heavy bombs end as
 *    quickly as loops do;
 *  - pattern matching (`string.find`, `match`, `gmatch`, `gsub`), a
 *    backtracking search that can run for hours inside one call, charges
 *    its steps and checks the limits every few thousand of them;
 *  - the Lua stack is capped, so deep recursion fails early and cheaply.
 * Memory a script retains in globals across calls is not attributed to a
 * call; the worker that runs it has its own memory ceiling for that.
 */
import fengari from 'fengari';
import { DEFAULT_BUDGETS, type FailureKind, type ScriptSource } from './host-interface';
import { internals, watchStrings } from './fengari-internals';

const { lua, lauxlib, lualib, to_luastring } = fengari;

export { lua, lauxlib, to_luastring };

/** Longest string a script may build. Matches the state bound: nothing bigger can be legitimate. */
export const MAX_STRING_BYTES = 1024 * 1024;
/** Bytes of string building that cost one instruction of budget. */
const BYTES_PER_INSTRUCTION = 64;
/** Lua stack slots per thread; a recursion bomb fails here long before memory matters. */
const MAX_STACK_SLOTS = 50_000;
/**
 * Call depth per thread where the stack's slots cannot be counted (the
 * public API has no such count): the depth MAX_STACK_SLOTS allows the
 * smallest Lua frames (the function and two registers).
 */
const MAX_CALL_DEPTH = Math.floor(MAX_STACK_SLOTS / 3);
const HOOK_EVERY = 1000;
const CHECKED_STRING_BYTES = 4096;

export const MODULE_CACHE = '_SVC_LOADED';
const MODULE_NAME = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

/** The sandbox whose call is running; calls are synchronous, so one at a time (a stack when nested). */
let active: Sandbox | null = null;

function onBigString(L: unknown, length: number): void {
  const sb = active;
  if (!sb || length < CHECKED_STRING_BYTES) return;
  if (length > MAX_STRING_BYTES) sb.exhaust(L, 'heap_exhausted', `string longer than ${MAX_STRING_BYTES} bytes`);
  sb.charge(L, length / BYTES_PER_INSTRUCTION, length);
}

/** Bytes that make a `string.find` pattern a pattern rather than plain text (Lua 5.3). */
const PATTERN_SPECIALS = new Set([...'^$*+?.([%-'].map((c) => c.charCodeAt(0)));

/**
 * `string.find` whose plain searches (`plain` true, or a pattern without
 * special characters) take linear time. fengari's compares the whole needle
 * at every occurrence of its first byte, in one step no check interrupts:
 * a megabyte of "a" searched for half a megabyte of "a" and a "b" is 2.5e11
 * comparisons. Pattern searches go to `original`, whose steps are counted.
 */
function linearPlainFind(original: LuaFunction): LuaFunction {
  return (L) => {
    const s = lauxlib.luaL_checklstring(L, 1) as Uint8Array;
    const p = lauxlib.luaL_checklstring(L, 2) as Uint8Array;
    if (!lua.lua_toboolean(L, 4) && p.some((b) => PATTERN_SPECIALS.has(b))) return original(L);
    let init = lauxlib.luaL_optinteger(L, 3, 1) as number;
    if (init < 0) init = -init > s.length ? 0 : s.length + init + 1;
    if (init < 1) init = 1;
    const at = init > s.length + 1 ? -1 : indexOfBytes(s, p, init - 1);
    if (at < 0) {
      lua.lua_pushnil(L);
      return 1;
    }
    lua.lua_pushinteger(L, at + 1);
    lua.lua_pushinteger(L, at + p.length);
    return 2;
  };
}

/** First index at or after `from` where `needle` occurs in `hay`, or -1 (Knuth-Morris-Pratt: at most two passes over each). */
function indexOfBytes(hay: Uint8Array, needle: Uint8Array, from: number): number {
  const m = needle.length;
  if (m === 0) return from;
  const fallback = new Int32Array(m);
  for (let i = 1, k = 0; i < m; i++) {
    while (k > 0 && needle[i] !== needle[k]) k = fallback[k - 1]!;
    if (needle[i] === needle[k]) k++;
    fallback[i] = k;
  }
  for (let i = from, k = 0; i < hay.length; i++) {
    while (k > 0 && hay[i] !== needle[k]) k = fallback[k - 1]!;
    if (hay[i] === needle[k] && ++k === m) return i - m + 1;
  }
  return -1;
}

/**
 * Pattern-matching steps (one subject character examined) that cost one
 * instruction of budget: a step takes about an eighth of an average VM
 * instruction here (3.5 against about 30 ns), so a budget means about the
 * same time spent either way.
 */
const PATTERN_STEPS_PER_INSTRUCTION = 8;

function onPatternSteps(L: unknown, steps: number): void {
  active?.charge(L, steps / PATTERN_STEPS_PER_INSTRUCTION);
}

/** Compiles text, or reuses the prototypes compiled for the same text (decision 0074). */
const loadChunk: (L: any, text: string, chunkName: string) => number =
  internals?.loadChunk ?? ((L, text, chunkName) => lauxlib.luaL_loadbufferx(L, to_luastring(text), null, to_luastring(chunkName), to_luastring('t')));
const stackSlots = internals?.stackSlots;
const releaseDeadSlots = internals?.releaseDeadSlots;
/** True when thread `L` holds more stack than any honest script needs. */
const stackTooDeep: (L: any) => boolean = stackSlots
  ? (L) => stackSlots(L) > MAX_STACK_SLOTS
  : (L) => lua.lua_getstack(L, MAX_CALL_DEPTH, new lua.lua_Debug()) === 1;

function hook(L: any): void {
  const sb = active;
  if (!sb) return;
  sb.remaining -= lua.lua_gethookcount(L);
  sb.check(L);
}

/**
 * How long the running call may wait for a binding's answer (epoch ms): its
 * deadline plus what is left of its wait allowance; now when no call runs.
 */
export function bindingWaitLimit(): number {
  return active ? active.deadline + active.waitAllowance : Date.now();
}

/**
 * Time a call spends waiting for an awaited binding (a database round trip on
 * the main thread) is not the script's own work, so a busy database must not
 * fail an honest callback: the wait moves the call's deadline (and its tick's
 * cap) on, up to BINDING_WAIT_ALLOWANCE_MS in all per call. A change the main
 * thread committed (`committed`) is excused in full, however long it took, so
 * that the script always lives to record it instead of failing right after
 * and repeating it on its next call. The allowance (`lua_binding_wait_ms`)
 * is what bounds how long one script's bindings may hold its worker's other
 * matches.
 */
export function excuseBindingWait(waitedMs: number, committed: boolean): void {
  const sb = active;
  if (!sb || waitedMs <= 0) return;
  const excused = committed ? waitedMs : Math.min(waitedMs, sb.waitAllowance);
  sb.waitAllowance = Math.max(0, sb.waitAllowance - excused);
  sb.deadline += excused;
  sb.cap += excused;
}

/**
 * Bytes in use, for the heap budget. The runtime is host-neutral, so the host
 * installs the meter (Node: V8's heap statistics); until then no call is
 * ever over its heap budget.
 */
let heapMeter: () => number = () => 0;

/** Installs `meter`; returns the one it replaces. */
export function installHeapMeter(meter: () => number): () => number {
  const previous = heapMeter;
  heapMeter = meter;
  return previous;
}

function heapInUse(): number {
  return heapMeter();
}

export type Outcome = { ok: true; results: number } | { ok: false; kind: FailureKind; message: string };

export interface SandboxOptions {
  source: ScriptSource;
  /** Directory (relative to the game directory, '' for its root) that `require` resolves against. */
  baseDir: string;
  /** Bytes a call may grow the heap by (the per-callback heap bound); DEFAULT_BUDGETS.heapBytes when absent. */
  heapBudget?: number;
  /** Binding wait (ms) a call may spend without it counting against its deadline; DEFAULT_BUDGETS.bindingWaitMs when absent. */
  bindingWait?: number;
}

/** A JS function callable from Lua; returns the number of results it pushed. */
export type LuaFunction = (L: any) => number;

export class Sandbox {
  readonly L: any;
  remaining = 0;
  deadline = 0;
  /** What is left of the running call's binding wait allowance (ms; see excuseBindingWait). */
  waitAllowance = 0;
  /** No call may run past this instant (a match caps the whole of one tick with it). */
  cap = Infinity;
  /**
   * The heap reading the running call's growth is measured from, taken at its
   * first check (after HOOK_EVERY instructions, at its first string of
   * CHECKED_STRING_BYTES or more, counted in, or before its first binding
   * call): NaN before. Reading V8's heap statistics costs about a
   * microsecond and a few hundred bytes, and most callbacks (a tick, a view)
   * end before their first check, so they never pay it. What a call
   * allocates before its first check goes uncounted: fewer than HOOK_EVERY
   * instructions' worth of values, strings under CHECKED_STRING_BYTES each.
   */
  heapAtStart = NaN;
  readonly heapBudget: number;
  readonly bindingWait: number;
  exhausted = false;
  private failure: { kind: FailureKind; message: string } | null = null;
  private readonly source: ScriptSource;
  private readonly baseDir: string;

  constructor(options: SandboxOptions) {
    watchStrings(onBigString, onPatternSteps);
    internals?.installFastCalls();
    this.source = options.source;
    this.baseDir = options.baseDir;
    this.heapBudget = options.heapBudget ?? DEFAULT_BUDGETS.heapBytes;
    this.bindingWait = options.bindingWait ?? DEFAULT_BUDGETS.bindingWaitMs;
    const L = lauxlib.luaL_newstate();
    this.L = L;
    // Only the libraries a game may use; never `io`, `package` or fengari's JS bridge.
    const libs: [string, unknown][] = [
      ['_G', lualib.luaopen_base],
      ['coroutine', lualib.luaopen_coroutine],
      ['table', lualib.luaopen_table],
      ['string', lualib.luaopen_string],
      ['math', lualib.luaopen_math],
      ['utf8', lualib.luaopen_utf8],
      ['os', lualib.luaopen_os],
      ['debug', lualib.luaopen_debug],
    ];
    for (const [name, open] of libs) {
      lauxlib.luaL_requiref(L, to_luastring(name), open, 1);
      lua.lua_pop(L, 1);
    }
    this.restrict();
    // The libraries are in place and no script has run: their keys become the thread's shared strings (decision 0077).
    internals?.shareKeys(L);
    lua.lua_sethook(L, hook, lua.LUA_MASKCOUNT, HOOK_EVERY);
  }

  private restrict(): void {
    const L = this.L;
    this.installRandom();
    for (const name of ['dofile', 'loadfile', 'print', 'collectgarbage', 'load', 'loadstring', 'require', 'package', 'io']) {
      lua.lua_pushnil(L);
      lua.lua_setglobal(L, to_luastring(name));
    }
    this.keepOnly('os', ['time', 'clock', 'date', 'difftime']);
    this.keepOnly('debug', ['traceback']);
    lua.lua_getglobal(L, to_luastring('string'));
    lua.lua_pushnil(L);
    lua.lua_setfield(L, -2, to_luastring('dump'));
    lua.lua_getfield(L, -1, to_luastring('find'));
    lua.lua_pushcfunction(L, linearPlainFind(lua.lua_tocfunction(L, -1) as LuaFunction));
    lua.lua_setfield(L, -3, to_luastring('find'));
    lua.lua_pop(L, 2);
    if (internals) {
      // Games clamp with these per entity per tick.
      lua.lua_getglobal(L, to_luastring('math'));
      for (const [name, max] of [['max', true], ['min', false]] as const) {
        lua.lua_getfield(L, -1, to_luastring(name));
        lua.lua_pushcfunction(L, internals.extremum(lua.lua_tocfunction(L, -1) as LuaFunction, max));
        lua.lua_setfield(L, -3, to_luastring(name));
        lua.lua_pop(L, 1);
      }
      lua.lua_pop(L, 1);
    }

    this.setGlobalFunction('collectgarbage', (L) => {
      // fengari has no collector interface; "count" is the only option a script keeps.
      const opt = lua.lua_isnoneornil(L, 1) ? 'collect' : lua.lua_tojsstring(L, 1);
      if (opt !== 'count') return lauxlib.luaL_error(L, to_luastring(`collectgarbage('${opt}') is not available`));
      lua.lua_pushnumber(L, 0);
      return 1;
    });
    this.setGlobalFunction('load', (L) => this.load(L));
    this.setGlobalFunction('require', (L) => this.require(L));
    lua.lua_newtable(L);
    lua.lua_setglobal(L, to_luastring(MODULE_CACHE));

    // Prelude in Lua: argument-dependent guards are simplest where the arguments are.
    const prelude = `
      local rep, floor, MAX = string.rep, math.floor, ${MAX_STRING_BYTES}
      string.rep = function(s, n, sep)
        local ls = (type(s) == "string" or type(s) == "number") and #tostring(s) or 0
        local lsep = (type(sep) == "string" or type(sep) == "number") and #tostring(sep) or 0
        if type(n) == "number" and n > 0 and (ls + lsep) * n > MAX then
          error("string.rep result longer than " .. MAX .. " bytes", 2)
        end
        return rep(s, n, sep)
      end
      local unpack = table.unpack
      table.unpack = function(t, i, j)
        i = i or 1
        j = j or #t
        if type(i) == "number" and type(j) == "number" and j - i >= 8000 then
          error("too many results to unpack", 2)
        end
        return unpack(t, i, j)
      end
      local reseed = math.randomseed
      math.randomseed = function(x)
        if x ~= nil and type(x) ~= "number" then error("bad argument #1 to 'randomseed' (number expected, got " .. type(x) .. ")", 2) end
        reseed(x)
      end
      local sqrt = math.sqrt
      math.sqrt = function(x)
        if type(x) ~= "number" or x < 0 then return 0.0 end
        return sqrt(x)
      end
    `;
    const loaded = loadChunk(L, prelude, '=prelude');
    if (loaded !== lua.LUA_OK) throw new Error(`prelude: ${lua.lua_tojsstring(L, -1)}`);
    lua.lua_call(L, 0, 0);
  }

  /**
   * The generator under `math.random`: the host's until `math.randomseed(x)`
   * seeds this VM's own (fengari's seeded generator is one per process, so
   * a seed there would be shared by every VM of the worker). The same seed
   * gives the same sequence in any VM, on any node; `math.randomseed()`
   * without a seed goes back to the host's. docs/decisions/0040.
   */
  private installRandom(): void {
    const L = this.L;
    let state: number | null = null;
    lua.lua_getglobal(L, to_luastring('math'));
    const draw = (): number => {
      if (state === null) return Math.random();
      // xorshift32: small, fast, and plenty for game dice (not for secrets).
      let x = state;
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      state = x | 0;
      return (x >>> 0) / 4294967296;
    };
    // Lua 5.3's math.random([m [, n]]) with one difference kept from the
    // reference runtime: arguments that are not numbers (or m < 1 alone) draw
    // a float instead of raising. Written here rather than as a Lua wrapper:
    // games call it per entity per tick, and the wrapper's type() and floor()
    // calls cost more than the draw.
    lua.lua_pushcfunction(L, (L: any) => {
      const top = lua.lua_gettop(L);
      const hasN = top >= 2 && lua.lua_type(L, 2) !== lua.LUA_TNIL;
      if (top < 1 || lua.lua_type(L, 1) !== lua.LUA_TNUMBER || (hasN && lua.lua_type(L, 2) !== lua.LUA_TNUMBER)) {
        lua.lua_pushnumber(L, draw());
        return 1;
      }
      const m: number = lua.lua_tonumber(L, 1);
      if (!hasN && m < 1) {
        lua.lua_pushnumber(L, draw());
        return 1;
      }
      const a = hasN ? Math.trunc(m) : 1;
      const b = hasN ? Math.trunc(lua.lua_tonumber(L, 2)) : Math.floor(m);
      if (a > b) return lauxlib.luaL_error(L, to_luastring(`bad argument #${hasN ? 2 : 1} to 'random' (interval is empty)`));
      pushWhole(L, Math.floor(draw() * (b - a + 1)) + a);
      return 1;
    });
    lua.lua_setfield(L, -2, to_luastring('random'));
    lua.lua_pushcfunction(L, (L: any) => {
      if (lua.lua_isnoneornil(L, 1)) {
        state = null;
        return 0;
      }
      const seed: number = lua.lua_tonumber(L, 1);
      // Whole and fractional parts both count; the mix spreads nearby seeds apart; xorshift needs a non-zero state.
      const mixed = Math.imul((Math.trunc(seed) ^ Math.trunc((seed % 1) * 4294967296)) ^ 0x9e3779b9, 0x85ebca6b);
      state = (mixed ^ (mixed >>> 16)) | 0 || 1;
      return 0;
    });
    lua.lua_setfield(L, -2, to_luastring('randomseed'));
    lua.lua_pop(L, 1);
  }

  private keepOnly(table: string, keep: string[]): void {
    const L = this.L;
    lua.lua_getglobal(L, to_luastring(table));
    const names: string[] = [];
    lua.lua_pushnil(L);
    while (lua.lua_next(L, -2) !== 0) {
      lua.lua_pop(L, 1);
      if (lua.lua_type(L, -1) === lua.LUA_TSTRING) names.push(lua.lua_tojsstring(L, -1));
    }
    for (const name of names) {
      if (keep.includes(name)) continue;
      lua.lua_pushnil(L);
      lua.lua_setfield(L, -2, to_luastring(name));
    }
    lua.lua_pop(L, 1);
  }

  setGlobalFunction(name: string, fn: LuaFunction): void {
    lua.lua_pushcfunction(this.L, fn);
    lua.lua_setglobal(this.L, to_luastring(name));
  }

  /**
   * Charges extra work (bytes built, source compiled) against the running
   * call's budget, and checks every limit: a loop that builds big strings
   * allocates far more between two hooks than the hook could catch.
   */
  charge(L: unknown, instructions: number, freshBytes = 0): void {
    this.remaining -= instructions;
    this.check(L, freshBytes);
  }

  /** Stops the running call if any of its limits is reached. `freshBytes`: just allocated, counted even by a first check. */
  check(L: any, freshBytes = 0): void {
    if (this.exhausted || this.remaining <= 0) this.exhaust(L, 'instructions_exhausted', 'instruction budget exceeded');
    if (Date.now() > this.deadline) this.exhaust(L, 'timeout', 'time budget exceeded');
    if (stackTooDeep(L)) this.exhaust(L, 'heap_exhausted', 'stack overflow (recursion too deep)');
    const heap = heapInUse();
    if (Number.isNaN(this.heapAtStart)) this.heapAtStart = heap - freshBytes;
    if (heap - this.heapAtStart > this.heapBudget) this.exhaust(L, 'heap_exhausted', 'heap budget exceeded');
  }

  /** Takes the running call's heap baseline now if its first check has not (before the host allocates for it). */
  settleHeapBaseline(): void {
    if (Number.isNaN(this.heapAtStart)) this.heapAtStart = heapInUse();
  }

  /** Ends the running call: records why, makes every further instruction raise, raises now. */
  exhaust(L: any, kind: FailureKind, message: string): never {
    this.failure ??= { kind, message };
    this.exhausted = true;
    lua.lua_sethook(this.L, hook, lua.LUA_MASKCOUNT, 1);
    if (L !== this.L) lua.lua_sethook(L, hook, lua.LUA_MASKCOUNT, 1);
    lauxlib.luaL_error(L, to_luastring(this.failure.message));
    throw new Error('unreachable: luaL_error returned');
  }

  /**
   * Calls the function below `nargs` arguments on the stack. On success the
   * results are left on the stack (their count in `results`); on failure the
   * stack is back where it was before the function was pushed.
   */
  call(nargs: number, budget: number, timeLimitMs: number): Outcome {
    const L = this.L;
    const base = lua.lua_gettop(L) - nargs - 1;
    const previous = active;
    active = this;
    this.remaining = budget;
    this.deadline = Math.min(Date.now() + timeLimitMs, this.cap);
    this.waitAllowance = this.bindingWait;
    this.heapAtStart = NaN;
    this.exhausted = false;
    this.failure = null;
    lua.lua_sethook(L, hook, lua.LUA_MASKCOUNT, HOOK_EVERY);
    let status: number;
    try {
      status = lua.lua_pcall(L, nargs, lua.LUA_MULTRET, 0);
    } finally {
      active = previous;
    }
    if (status === lua.LUA_OK && !this.exhausted) {
      releaseDeadSlots?.(L);
      return { ok: true, results: lua.lua_gettop(L) - base };
    }
    const failure = this.failure as { kind: FailureKind; message: string } | null;
    const message = failure?.message ?? errorText(L, -1);
    const kind = failure?.kind ?? 'error';
    lua.lua_settop(L, base);
    releaseDeadSlots?.(L);
    return { ok: false, kind, message };
  }

  /** Compiles text (never binary) onto the stack; a syntax error comes back as a failure. */
  compile(text: string, chunkName: string): { ok: true } | { ok: false; message: string } {
    const L = this.L;
    const status = loadChunk(L, text, chunkName);
    if (status === lua.LUA_OK) return { ok: true };
    const message = errorText(L, -1);
    lua.lua_pop(L, 1);
    return { ok: false, message };
  }

  /** `load(chunk [, name [, mode [, env]]])`, text only, compile cost charged to the budget. */
  private load(L: any): number {
    if (lua.lua_type(L, 1) !== lua.LUA_TSTRING) {
      lua.lua_pushnil(L);
      lua.lua_pushliteral(L, 'load accepts only a string chunk');
      return 2;
    }
    const chunk = lua.lua_tostring(L, 1);
    this.charge(L, chunk.length);
    const name = lua.lua_type(L, 2) === lua.LUA_TSTRING ? lua.lua_tostring(L, 2) : chunk;
    const status = lauxlib.luaL_loadbufferx(L, chunk, null, name, to_luastring('t'));
    if (status !== lua.LUA_OK) {
      lua.lua_pushnil(L);
      lua.lua_insert(L, -2);
      return 2;
    }
    if (!lua.lua_isnoneornil(L, 4)) {
      lua.lua_pushvalue(L, 4);
      if (!lua.lua_setupvalue(L, -2, 1)) lua.lua_pop(L, 1);
    }
    return 1;
  }

  /** The game-directory `require`: modules resolve inside the game directory only. */
  private require(L: any): number {
    if (lua.lua_type(L, 1) !== lua.LUA_TSTRING) return lauxlib.luaL_error(L, to_luastring('require expects a module name string'));
    const name: string = lua.lua_tojsstring(L, 1);
    if (!MODULE_NAME.test(name)) return lauxlib.luaL_error(L, to_luastring(`invalid module name '${name.slice(0, 80)}'`));
    if (lua.lua_getglobal(L, to_luastring(MODULE_CACHE)) !== lua.LUA_TTABLE) {
      return lauxlib.luaL_error(L, to_luastring(`module cache ${MODULE_CACHE} is not a table`));
    }
    const cacheIndex = lua.lua_gettop(L);
    if (lua.lua_getfield(L, cacheIndex, to_luastring(name)) !== lua.LUA_TNIL) return 1;
    lua.lua_pop(L, 1);
    const path = (this.baseDir ? this.baseDir + '/' : '') + name.replace(/\./g, '/') + '.lua';
    const text = this.source.read(path);
    if (text === null) return lauxlib.luaL_error(L, to_luastring(`module '${name}' not found (require_not_found)`));
    this.charge(L, text.length);
    const status = loadChunk(L, text, '@' + path);
    if (status !== lua.LUA_OK) {
      return lauxlib.luaL_error(L, to_luastring(`module '${name}' failed to compile (require_failed): ${errorText(L, -1)}`));
    }
    lua.lua_call(L, 0, 1);
    if (lua.lua_isnil(L, -1)) {
      lua.lua_pop(L, 1);
      lua.lua_pushboolean(L, true);
    }
    lua.lua_pushvalue(L, -1);
    lua.lua_setfield(L, cacheIndex, to_luastring(name));
    return 1;
  }

  /**
   * Compiles and runs a game-directory file's body in this VM (creation and
   * hot reload); leaves the stack empty.
   */
  runFile(file: string, budget: number, timeLimitMs: number): { ok: true } | { ok: false; error: string } {
    const text = this.source.read(file);
    if (text === null) return { ok: false, error: 'script file not found' };
    const compiled = this.compile(text, '@' + file);
    if (!compiled.ok) return { ok: false, error: compiled.message };
    const ran = this.call(0, budget, timeLimitMs);
    if (!ran.ok) return { ok: false, error: ran.message };
    lua.lua_settop(this.L, 0);
    return { ok: true };
  }

  /**
   * Hot reload: re-runs a body with a fresh module cache.
   * The globals are snapshotted first, so a body that fails halfway leaves
   * the VM exactly as it was.
   */
  reevaluate(evaluate: () => { ok: true } | { ok: false; error: string }): { ok: true } | { ok: false; error: string } {
    const L = this.L;
    lua.lua_pushglobaltable(L);
    const snapshot = shallowCopy(L, -1);
    lua.lua_pop(L, 1);
    lua.lua_newtable(L);
    lua.lua_setglobal(L, to_luastring(MODULE_CACHE));
    const result = evaluate();
    if (!result.ok) restoreGlobals(L, snapshot);
    lauxlib.luaL_unref(L, lua.LUA_REGISTRYINDEX, snapshot);
    lua.lua_settop(L, 0);
    return result;
  }

  /** Reads a global for the loader; leaves nothing on the stack. */
  globalType(name: string): number {
    const t = lua.lua_getglobal(this.L, to_luastring(name));
    lua.lua_pop(this.L, 1);
    return t;
  }
}

/** Text of the error value at `index` (Lua errors can be any value). */
export function errorText(L: any, index: number): string {
  const t = lua.lua_type(L, index);
  if (t === lua.LUA_TSTRING || t === lua.LUA_TNUMBER) return String(lua.lua_tojsstring(L, index));
  return `(error object is a ${lua.lua_typename(L, t) ? fengari.to_jsstring(lua.lua_typename(L, t)) : 'unknown'} value)`;
}

/** Registry reference to a shallow copy of the table at `index`. */
function shallowCopy(L: any, index: number): number {
  const source = lua.lua_absindex(L, index);
  lua.lua_newtable(L);
  lua.lua_pushnil(L);
  while (lua.lua_next(L, source) !== 0) {
    lua.lua_pushvalue(L, -2);
    lua.lua_insert(L, -2);
    lua.lua_rawset(L, -4);
  }
  return lauxlib.luaL_ref(L, lua.LUA_REGISTRYINDEX);
}

/** Makes the global table equal to the snapshot again (keys added since are removed). */
function restoreGlobals(L: any, snapshot: number): void {
  lua.lua_pushglobaltable(L);
  const globals = lua.lua_gettop(L);
  lua.lua_newtable(L);
  const added = lua.lua_gettop(L);
  let n = 0;
  lua.lua_pushnil(L);
  while (lua.lua_next(L, globals) !== 0) {
    lua.lua_pop(L, 1);
    lua.lua_pushvalue(L, -1);
    lua.lua_rawseti(L, added, ++n);
  }
  for (let i = 1; i <= n; i++) {
    lua.lua_rawgeti(L, added, i);
    lua.lua_pushnil(L);
    lua.lua_rawset(L, globals);
  }
  lua.lua_rawgeti(L, lua.LUA_REGISTRYINDEX, snapshot);
  lua.lua_pushnil(L);
  while (lua.lua_next(L, -2) !== 0) {
    lua.lua_pushvalue(L, -2);
    lua.lua_insert(L, -2);
    lua.lua_rawset(L, globals);
  }
  lua.lua_settop(L, globals - 1);
}

/** A whole number as Lua's math.floor leaves it: an integer where fengari's (32-bit) integers hold it, else a float. */
function pushWhole(L: any, n: number): void {
  if ((n | 0) === n) lua.lua_pushinteger(L, n);
  else lua.lua_pushnumber(L, n);
}
