/**
 * Every use of fengari beyond its public API, in one place.
 *
 * Most of it is speed, written against one fengari release (WRITTEN_FOR) by
 * reading its source: a call path that clears stack slots without `delete`,
 * Lua <-> JSON marshalling that reads and fills tables directly instead of a
 * stack push, pop and key lookup per entry, and a stack slot count. It
 * depends on private structures (stack arrays, call infos, table entry
 * lists, string objects, module-object functions the interpreter calls
 * through) that a release may change without notice, and a change would not
 * fail loudly: a replaced function would silently stop being called, or run
 * against fields that now mean something else. So none of it runs, and the
 * modules only it uses are not even loaded, unless the installed fengari is
 * exactly WRITTEN_FOR. Otherwise `internals` is null, the callers
 * (marshal.ts, vm.ts) take their public-API paths, which give the same
 * results more slowly, and `reportFengariInternals` says so once in the log.
 *
 * One piece is a limit, not speed, and has no public-API equivalent: the
 * watch on string building (the `..` operator and every luaL_Buffer), which
 * bounds each string a script builds and charges its bytes, and on pattern
 * matching, which charges its steps (docs/decisions/0045). Without it a
 * loop doubling a string exhausts the process's memory between two hooks,
 * and one `string.find` can run for hours. So it is not gated on the
 * version but on behaviour (its modules are loaded on every release): it
 * is installed where its hook points exist, then checked on a scratch
 * state; where it does not see both kinds of string building and the
 * matcher's steps it is removed again and `watchStrings` throws, so no
 * script runs unbounded.
 *
 * SVC_FENGARI_UNPATCHED=1 in the environment shuts the version gate as a
 * different release would. It is not a setting: the differential test and
 * the Lua benchmark set it in a child process to compare both paths on one
 * checkout (the patches are process-wide, so one process cannot hold both).
 */
import fengari from 'fengari';
import lobject from 'fengari/src/lobject.js';
import type { Logger } from '../platform/log';
import { MAX_DEPTH, MarshalError, TOO_DEEP, cycleError, emptyTableText, jsString, mixedObjectText, stringText, type StringText } from './json-text';

/** The fengari release the speed internals were read against and tested on. */
export const WRITTEN_FOR = '0.1.5';

const { lua, lauxlib, lualib, to_luastring } = fengari;

type HostProcess = {
  env?: Record<string, string | undefined>;
  getBuiltinModule?: (name: string) => any;
};
const host = (globalThis as { process?: HostProcess }).process;

/**
 * Node's `require`, for fengari's package.json (the version; fengari's own
 * version constants have lagged behind its releases) and for the modules
 * only the speed internals use: required, not imported, so that a release
 * that moved or removed one shuts the gate instead of stopping the process.
 * The runtime imports nothing from `node:`, so it is reached through the
 * process object; a host without one gets the public API.
 */
const nodeRequire: ((id: string) => any) | null = (() => {
  try {
    return host?.getBuiltinModule?.('node:module')?.createRequire(import.meta.url) ?? null;
  } catch {
    return null;
  }
})();

function required(id: string): any {
  try {
    return nodeRequire?.(id) ?? null;
  } catch {
    return null;
  }
}

export const fengariVersion: string | null = ((): string | null => {
  const version = required('fengari/package.json')?.version;
  return typeof version === 'string' ? version : null;
})();

// Filled only when the gate is open.
let ldo: any;
let lstate: any;
let lstring: any;
let ltable: any;
let lvm: any;

/** Why the speed internals are off, or null when they are in use. */
export const internalsOff: string | null = openGate();

function openGate(): string | null {
  if (host?.env?.SVC_FENGARI_UNPATCHED === '1') return 'forced off by SVC_FENGARI_UNPATCHED=1';
  if (fengariVersion === null) return `the installed fengari's version cannot be read; the internals were written for ${WRITTEN_FOR}`;
  if (fengariVersion !== WRITTEN_FOR) return `fengari ${fengariVersion} is installed, the internals were written for ${WRITTEN_FOR}`;
  // Patching a second copy of fengari would change nothing the VMs run.
  if (required('fengari') !== fengari) return 'the fengari Node resolves is not the one the runtime imported';
  [ldo, lstate, lstring, ltable, lvm] = ['ldo', 'lstate', 'lstring', 'ltable', 'lvm'].map((name) => required(`fengari/src/${name}.js`));
  if (!ldo || !lstate || !lstring || !ltable || !lvm) return 'an internal module of fengari cannot be loaded';
  return null;
}

/** An interned Lua string a caller can push again cheaply; opaque outside this module and marshal.ts. */
export type LuaStringObject = { readonly __luaStringObject: true };

/** Told about every string of a state being built (its byte length), before the script can use it. */
export type StringWatcher = (L: unknown, length: number) => void;
/** `steps` pattern-matching steps ran in state `L`. */
export type StepWatcher = (L: unknown, steps: number) => void;

export interface FengariInternals {
  /** Replaces fengari's call path and its reads by string key (process-wide, once). */
  installFastCalls(): void;
  /** `math.max` (`max`) or `math.min` reading numbers on the stack, `original` for anything else. */
  extremum(original: (L: any) => number, max: boolean): (L: any) => number;
  /**
   * luaL_loadbufferx for text: compiles `text` as chunk `chunkName` onto the
   * stack, or pushes a new closure over the prototypes compiled for the same
   * name and text before in this thread.
   */
  loadChunk(L: any, text: string, chunkName: string): number;
  /** Stack slots thread `L` uses. */
  stackSlots(L: any): number;
  /** Lets go of the values dead slots above `L`'s top still hold (once a call into `L` is over). */
  releaseDeadSlots(L: any): void;
  stringObject(s: string): LuaStringObject;
  /** Pushes a string object; the caller guarantees stack room. */
  pushStringObject(L: any, ts: LuaStringObject): void;
  /** Pushes the global `name` (a raw read); returns its type. */
  pushGlobal(L: any, name: LuaStringObject): number;
  /** Pushes registry slot `ref`. */
  pushRegistry(L: any, ref: number): void;
  /** Pushes a JSON value as one Lua value; the caller guarantees stack room. */
  pushJson(L: any, value: unknown): void;
  /** The value at `index` as JSON text, or undefined for what JSON cannot hold (with `objectOnly`, for anything but an object). */
  toJsonText(L: any, index: number, objectOnly?: boolean): string | undefined;
  /**
   * Entries of the table at `index` keyed by strings whose values are tables
   * with numbers under keys `a` and `b`; with `inside`, only those whose pair
   * lies outside that box.
   */
  numberPairs(L: any, index: number, a: LuaStringObject, b: LuaStringObject, inside?: Box): { id: string; x: number; y: number }[];
  /**
   * Records, as they are now, the tables and Lua functions listed (as a Lua
   * sequence) at `index`: every entry and metatable of each table, every
   * upvalue of each function.
   */
  keepState(L: any, index: number): KeptState;
  /** Puts back what `keepState` recorded. */
  restoreState(L: any, kept: KeptState): void;
  /**
   * Starts recording every table write of this thread (every Lua state: a
   * call runs to its end before another starts) until `endWrites`. A write
   * costs one record while recording, one null test otherwise.
   */
  beginWrites(): void;
  /** Stops recording and answers what was written (null when nothing was). */
  endWrites(): WriteLog | null;
  /**
   * Undoes `log`'s writes on the tables reachable from the table at `index`
   * (the tables as they were before the writes); writes on every other table
   * (globals, tables the call made) stay.
   */
  undoWrites(L: any, log: WriteLog, index: number): void;
  /**
   * Compares the table of entities at `index` (id → table of fields) with
   * `mirror` (id → fields, as JSON), reporting each difference to `sink` and
   * bringing the mirror up to date, reading the Lua tables in place.
   */
  diffEntities(L: any, index: number, mirror: Map<string, JsonRecord>, sink: EntitySink): void;
  /**
   * Reads, for a batch of states about to be called, what the calls will
   * read first (the globals `names`, their upvalues, the stack, the table in
   * registry slot `refs[i]` of `Ls[i]` and the tables in it), one level at a
   * time across the batch; it changes nothing.
   */
  readAhead(Ls: readonly any[], refs: readonly number[], names: readonly LuaStringObject[]): void;
  /**
   * Gives the string keys of a new state's globals and of the tables in them
   * (the standard libraries) one string object per text for the whole thread
   * instead of one per state. Changes no value a script can see. For a state
   * whose script has not run yet: its own tables would fill the shared cache.
   */
  shareKeys(L: any): void;
}

/** A JSON object as the entity diff keeps it. */
export type JsonRecord = { [key: string]: unknown };

/** Told about each difference `diffEntities` finds, in the table's order, removals last. */
export interface EntitySink {
  /** A new entity: its fields (the mirror's own object: read it now, do not keep it). */
  added(id: string, fields: JsonRecord): void;
  /** Fields that changed, a field gone reading null. */
  updated(id: string, changed: JsonRecord): void;
  removed(id: string): void;
}

/** A half-open box: a <= x < b's bounds, x0 <= a < x1 and y0 <= b < y1. */
export interface Box {
  x0: number;
  x1: number;
  y0: number;
  y1: number;
}

/** What `endWrites` answers; opaque outside this module. */
export type WriteLog = { readonly __writeLog: true };

/** What `keepState` recorded; opaque outside this module. */
export type KeptState = { readonly __keptState: true };

let reported = false;

/** Logs, once per process, that the speed internals are off and why. */
export function reportFengariInternals(log: Logger): void {
  if (reported || internalsOff === null) return;
  reported = true;
  log.warn('fengari_internals_off', {
    reason: internalsOff,
    consequence: 'Lua calls and Lua <-> JSON marshalling use the public API only (same results, slower)',
  });
}

function stackSlots(L: any): number {
  return L.top;
}

// A state's stack slots above the top keep their TValue objects (fengari's and
// ours reuse them), and with them whatever a finished call last held there: the
// callee's registers, its temporaries, the table a view was built in. A VM
// runs a callback, then sleeps a whole tick while the lane runs the others, so
// those values outlived every scavenge in between and were copied, then
// promoted, as if live. C Lua's collector sets these slots to nil for the same
// reason. Only values are dropped: the slot objects stay for the next call.
// The walk goes as high as the calls since the last one reached (`svcReach`,
// raised by the call path below), not to the end of the stack: a callback of
// a few registers would otherwise walk all of a VM's 40 slots every time.
function releaseDeadSlots(L: any): void {
  const stack = L.stack;
  const reach: number | undefined = L.svcReach;
  clearSlots(stack, L.top, reach === undefined || reach > stack.length ? stack.length : reach);
  L.svcReach = L.top;
}

/** Sets the slots `from`..`to` (dead ones) to nil in place, keeping their objects. */
function clearSlots(stack: (TValue | undefined)[], from: number, to: number): void {
  for (let i = from; i < to; i++) {
    const slot = stack[i];
    if (slot !== undefined && slot.value !== null) {
      slot.type = LUA_TNIL;
      slot.value = null;
    }
  }
}

// ---- string building --------------------------------------------------

let watcher: StringWatcher = () => {};
let stepWatcher: StepWatcher = () => {};
/** null until the first watchStrings; then '' when the watch works, else why it does not. */
let watchFailure: string | null = null;

/**
 * Pattern-matching steps between two calls of the step watcher: about 15 µs
 * of matching on the machine of 2026-11-25, so the deadline is checked far
 * more often than it needs, while the check's own cost stays out of sight.
 */
export const PATTERN_STEP_CHUNK = 4096;
let stepsLeft = PATTERN_STEP_CHUNK;

/**
 * Sends every string a state builds to `onString`, and every
 * PATTERN_STEP_CHUNK steps of pattern matching (`string.find`, `match`,
 * `gmatch`, `gsub`) to `onSteps`, from now on (process-wide). Throws when
 * this fengari's string building or matching cannot be watched.
 */
export function watchStrings(onString: StringWatcher, onSteps: StepWatcher): void {
  watchFailure ??= installWatch();
  if (watchFailure !== '') throw new Error(`fengari ${fengariVersion ?? '(version unknown)'}: string building cannot be bounded (${watchFailure}); no script may run`);
  watcher = onString;
  stepWatcher = onSteps;
}

/**
 * The matcher of Lua patterns is a backtracking search with no instruction
 * hook inside it: `("a"):rep(1e4):find(".-.-.-b")` runs for hours in one
 * call. Every step that looks at a subject character first reads the match
 * state's `src_end` (the single-character test, the balance scan of `%b`,
 * the loops over start positions), so an accessor on that field counts the
 * steps, and the watcher can stop the call as the hook would. The class is
 * private; a `gmatch` iterator carries an instance as a light userdata.
 */
function installStepWatch(): (() => void) | string {
  const L = lauxlib.luaL_newstate();
  lauxlib.luaL_requiref(L, to_luastring('string'), lualib.luaopen_string, 1);
  lua.lua_settop(L, 0);
  if (lauxlib.luaL_loadstring(L, to_luastring('return string.gmatch("a", "a")')) !== lua.LUA_OK || lua.lua_pcall(L, 0, 1, 0) !== lua.LUA_OK) return 'string.gmatch failed';
  if (lua.lua_getupvalue(L, 1, 3) === null) return 'the gmatch iterator has no third upvalue';
  const state = (lua.lua_touserdata(L, -1) as { ms?: object } | null)?.ms;
  const proto = state ? Object.getPrototypeOf(state) : null;
  if (!proto || proto === Object.prototype || !Object.hasOwn(state!, 'src_end')) return 'no match state with src_end';
  Object.defineProperty(proto, 'src_end', {
    configurable: true,
    get(this: { L: unknown; watchedEnd: number; stepWeight?: number }) {
      stepsLeft -= this.stepWeight ?? 1;
      if (stepsLeft <= 0) {
        const steps = PATTERN_STEP_CHUNK - stepsLeft;
        stepsLeft = PATTERN_STEP_CHUNK;
        stepWatcher(this.L, steps);
      }
      return this.watchedEnd;
    },
    set(this: { watchedEnd: number }, value: number) {
      this.watchedEnd = value;
    },
  });
  // One read may hide more work than one character: a bracket class is
  // scanned whole for every character it is tried on, and a back-reference
  // compares the whole capture. A step of a pattern weighs more the longer
  // the pattern, and much more when it holds a back-reference, so the checks
  // stay milliseconds apart. The matcher sets `p` then `p_end` for each search.
  Object.defineProperty(proto, 'p_end', {
    configurable: true,
    get(this: { watchedPatternEnd: number }) {
      return this.watchedPatternEnd;
    },
    set(this: { p: Uint8Array | null; watchedPatternEnd: number; stepWeight: number }, value: number) {
      this.watchedPatternEnd = value;
      this.stepWeight = stepWeightOf(this.p, value);
    },
  });
  return () => {
    delete proto.src_end;
    delete proto.p_end;
  };
}

/** What one step of `pattern` counts for (see installStepWatch). */
function stepWeightOf(pattern: Uint8Array | null, end: number): number {
  if (!pattern || typeof end !== 'number') return 1;
  let weight = 1 + (end >> 6);
  for (let i = 0; i + 1 < end; i++) {
    if (pattern[i] !== 37 /* % */) continue;
    const next = pattern[i + 1]!;
    if (next >= 49 && next <= 57 /* 1-9 */) return weight + BACK_REFERENCE_WEIGHT;
    i++;
  }
  return weight;
}

/** A back-reference may compare up to a megabyte in one step: check every few steps. */
const BACK_REFERENCE_WEIGHT = PATTERN_STEP_CHUNK / 16;

// The interpreter reaches `setsvalue2s` through the module object when it
// concatenates, and every luaL_Buffer grows by assigning `b`.
function installWatch(): string {
  const Buffer = lauxlib.luaL_Buffer;
  if (typeof lobject?.setsvalue2s !== 'function' || typeof Buffer !== 'function') return 'no setsvalue2s or luaL_Buffer';
  const setsvalue2s = lobject.setsvalue2s;
  lobject.setsvalue2s = function watchedSetsvalue2s(L: any, idx: number, ts: any) {
    watcher(L, ts.realstring.length);
    setsvalue2s(L, idx, ts);
  };
  Object.defineProperty(Buffer.prototype, 'b', {
    configurable: true,
    get(this: { watchedBuffer: Uint8Array }) {
      return this.watchedBuffer;
    },
    set(this: { L: unknown; watchedBuffer: Uint8Array }, value: Uint8Array) {
      if (value && this.L) watcher(this.L, value.length);
      this.watchedBuffer = value;
    },
  });
  let steps: (() => void) | string;
  try {
    steps = installStepWatch();
  } catch (err) {
    steps = `the matcher's steps cannot be watched: ${(err as Error).message}`;
  }
  const failure = typeof steps === 'string' ? steps : probeWatch();
  if (failure !== '') {
    lobject.setsvalue2s = setsvalue2s;
    delete Buffer.prototype.b;
    if (typeof steps !== 'string') steps();
  }
  return failure;
}

/** Builds one string each way on a scratch state; '' when the watch saw both. */
function probeWatch(): string {
  const seen: number[] = [];
  watcher = (_L, length) => void seen.push(length);
  try {
    const L = lauxlib.luaL_newstate();
    lauxlib.luaL_requiref(L, to_luastring('string'), lualib.luaopen_string, 1);
    const run = (code: string, nargs: number): string | null => {
      if (lauxlib.luaL_loadstring(L, to_luastring(code)) !== lua.LUA_OK) return lua.lua_tojsstring(L, -1);
      if (nargs) lua.lua_insert(L, -1 - nargs);
      return lua.lua_pcall(L, nargs, 1, 0) === lua.LUA_OK ? null : lua.lua_tojsstring(L, -1);
    };
    lua.lua_settop(L, 0);
    const rep = run('return string.rep("x", 5000)', 0);
    if (rep !== null) return `string.rep failed: ${rep}`;
    if (!seen.some((n) => n >= 5000)) return 'luaL_Buffer growth is not seen';
    seen.length = 0;
    const concat = run('local a = ... return a .. "yz"', 1);
    if (concat !== null) return `concatenation failed: ${concat}`;
    if (!seen.includes(5002)) return 'concatenation is not seen';
    let steps = 0;
    let stateSeen = true;
    stepWatcher = (stepL, n) => {
      steps += n;
      stateSeen &&= stepL === L;
    };
    // About 90,000 reads: from every start position the search scans to the end, reading twice a character.
    const search = run('return string.find(string.rep("a", 300), ".-b")', 0);
    if (search !== null) return `string.find failed: ${search}`;
    if (steps < 2 * PATTERN_STEP_CHUNK) return 'pattern matching steps are not seen';
    if (!stateSeen) return 'pattern matching steps do not name their Lua state';
    return '';
  } catch (err) {
    return `probe threw: ${(err as Error).message}`;
  } finally {
    watcher = () => {};
    stepWatcher = () => {};
  }
}

// ---- the call path ----------------------------------------------------
//
// fengari clears every stack slot above the top with `delete L.stack[i]`: on
// each call (the caller's frame is cut down to the arguments, then the
// callee's frame is grown with fresh slots) and on each return (the callee's
// frame is cut down to the results). V8 runs each element `delete` in its
// runtime, and once a stack array is old and sparse it turns into a
// dictionary, so every register access becomes a hash lookup. Profiles of the
// demo arena put more than half of a callback's cost there.
//
// These replacements of `adjust_top`, `luaD_precall`, `luaD_poscall`,
// `luaD_call` and `luaD_callnoyield` are fengari's own code with
// `stack[i] = undefined` for `delete stack[i]` (a plain store; the slot is
// equally dead and holds nothing). The interpreter (lvm.js) and the API
// (lapi.js) reach them through the module object, so installing them once
// covers every state. Rare paths (vararg functions, `__call`, call and
// return hooks, C-stack overflow) go to the originals unchanged.

const LUA_TNIL = 0;
const LUA_TLIGHTUSERDATA = 2;
const LUA_TLCL = 6;
const LUA_TLCF = 6 | (1 << 4);
const LUA_TCCL = 6 | (2 << 4);
const LUA_MULTRET = -1;
const LUA_MINSTACK = 20;
const LUAI_MAXCCALLS = 200;
const LUA_MASKCALL = 1 << 0;
const LUA_MASKRET = 1 << 1;
const LUA_MASKLINE = 1 << 2;

let fastCalls = false;

function installFastCalls(): void {
  if (fastCalls) return;
  fastCalls = true;
  const { TValue, setobjs2s } = lobject;
  const original = {
    precall: ldo.luaD_precall as (L: any, off: number, nresults: number) => boolean,
    poscall: ldo.luaD_poscall as (L: any, ci: any, firstResult: number, nres: number) => boolean,
    call: ldo.luaD_call as (L: any, off: number, nresults: number) => void,
  };

  // Slots above the top keep their TValue objects, set to nil in place when the top goes down
  // (their values let go) and again when it comes back up. OP_CALL lowers the top to a call's
  // arguments and raises it to the frame's size again after every call, so deleting the slots, as
  // fengari does, made a new object for every free register of the frame per call: most of what
  // a script's tick allocated. No closure holds such an object: an open
  // upvalue is the object of a live local, which lies below any call's first register and below
  // the top while its frame runs, and luaF_close gives the slots fresh objects when a frame with
  // closures returns, a block with captured locals ends, or an error unwinds.
  function adjustTop(L: any, newtop: number): void {
    const stack = L.stack;
    // Lowered, the slots let go of their values (see releaseDeadSlots).
    clearSlots(stack, newtop, L.top);
    if (newtop > L.svcReach) L.svcReach = newtop;
    for (let top: number = L.top; top < newtop; top++) {
      const slot = stack[top];
      if (slot === undefined) stack[top] = new TValue(LUA_TNIL, null);
      else {
        slot.type = LUA_TNIL;
        slot.value = null;
      }
    }
    L.top = newtop;
  }

  function moveresults(L: any, firstResult: number, res: number, nres: number, wanted: number): boolean {
    const stack = L.stack;
    switch (wanted) {
      case 0:
        break;
      case 1:
        if (nres === 0) stack[res].setnilvalue();
        else setobjs2s(L, res, firstResult);
        break;
      case LUA_MULTRET: {
        for (let i = 0; i < nres; i++) setobjs2s(L, res + i, firstResult + i);
        L.top = res + nres;
        return false;
      }
      default: {
        let i;
        if (wanted <= nres) {
          for (i = 0; i < wanted; i++) setobjs2s(L, res + i, firstResult + i);
        } else {
          for (i = 0; i < nres; i++) setobjs2s(L, res + i, firstResult + i);
          for (; i < wanted; i++) {
            if (res + i >= L.top) stack[res + i] = new TValue(LUA_TNIL, null);
            else stack[res + i].setnilvalue();
          }
        }
        break;
      }
    }
    L.top = res + wanted;
    return true;
  }

  // A returning call leaves its CallInfo linked after its caller's, for the next call from there to
  // take (C Lua keeps its whole list): fengari unlinks it, so every call made a new one, most of
  // what a call into a JS function allocated. Only that one is kept, the ones after it let go, so a
  // deep recursion does not keep its CallInfos once it returned. The call that takes it sets every
  // field a call reads; the fields only a yield or a protected call reads (continuation, context,
  // error handler) are set by whatever makes them read, as in C Lua.
  function nextCI(L: any): any {
    const ci = L.ci.next;
    if (ci === null) return lstate.luaE_extendCI(L);
    L.ci = ci;
    return ci;
  }

  function poscall(L: any, ci: any, firstResult: number, nres: number): boolean {
    if (L.hookmask & (LUA_MASKRET | LUA_MASKLINE)) return original.poscall(L, ci, firstResult, nres);
    const res: number = ci.funcOff;
    const wanted: number = ci.nresults;
    // What a JS function pushed lies up to here (see releaseDeadSlots).
    if (L.top > L.svcReach) L.svcReach = L.top;
    L.ci = ci.previous;
    ci.next = null;
    return moveresults(L, firstResult, res, nres, wanted);
  }

  function precall(L: any, off: number, nresults: number): boolean {
    const func = L.stack[off];
    if (L.hookmask & LUA_MASKCALL) return original.precall(L, off, nresults);
    switch (func.type) {
      case LUA_TCCL:
      case LUA_TLCF: {
        const f = func.type === LUA_TCCL ? func.value.f : func.value;
        ldo.luaD_checkstack(L, LUA_MINSTACK);
        const ci = nextCI(L);
        ci.funcOff = off;
        ci.nresults = nresults;
        ci.func = func;
        ci.top = L.top + LUA_MINSTACK;
        ci.callstatus = 0;
        const n = f(L);
        if (typeof n !== 'number' || n < 0 || (n | 0) !== n) throw Error('invalid return value from JS function (expected integer)');
        if (!(n < L.top - L.ci.funcOff)) throw Error('not enough elements in the stack');
        poscall(L, ci, L.top - n, n);
        return true;
      }
      case LUA_TLCL: {
        const p = func.value.p;
        if (p.is_vararg) return original.precall(L, off, nresults);
        let n = L.top - off - 1;
        const fsize: number = p.maxstacksize;
        ldo.luaD_checkstack(L, fsize);
        for (; n < p.numparams; n++) L.stack[L.top++] = new TValue(LUA_TNIL, null);
        const base = off + 1;
        const ci = nextCI(L);
        ci.funcOff = off;
        ci.nresults = nresults;
        ci.func = func;
        ci.l_base = base;
        ci.top = base + fsize;
        adjustTop(L, ci.top);
        ci.l_code = p.code;
        ci.l_savedpc = 0;
        ci.callstatus = lstate.CIST_LUA;
        return false;
      }
      default:
        return original.precall(L, off, nresults);
    }
  }

  function call(L: any, off: number, nresults: number): void {
    // The original raises the C-stack overflow error.
    if (L.nCcalls + 1 >= LUAI_MAXCCALLS) return original.call(L, off, nresults);
    L.nCcalls++;
    if (!precall(L, off, nresults)) lvm.luaV_execute(L);
    L.nCcalls--;
  }

  // A read with a string key (a field, a global, a method name: most reads a script makes) goes
  // straight to the key's cached hash; fengari's own first asks whether the key is nil or NaN and
  // switches over every key type to find the same hash.
  const get = ltable.luaH_get as (L: any, t: Table, key: TValue) => TValue;
  ltable.luaH_get = (L: any, t: Table, key: TValue): TValue => {
    if (key.type !== T_SHRSTR && key.type !== T_LNGSTR) return get(L, t, key);
    const ts = key.value as TString;
    const e = t.strong.get(ts.hash ?? lstring.luaS_hashlongstr(ts));
    return e === undefined ? NIL : e.value;
  };

  ldo.adjust_top = adjustTop;
  ldo.luaD_poscall = poscall;
  ldo.luaD_precall = precall;
  ldo.luaD_call = call;
  ldo.luaD_callnoyield = (L: any, off: number, nresults: number) => {
    L.nny++;
    call(L, off, nresults);
    L.nny--;
  };
}

/**
 * `math.max` (or `math.min`) over numbers, read on the stack: Lua 5.3's
 * own compares its arguments pairwise through the API, each comparison
 * finding both values by index and dispatching on their types. Anything
 * but numbers (strings compare too, tables by `__lt`, and no argument is
 * an error) goes to `original`. Ties keep the first, and NaN never wins a
 * comparison, as in Lua's.
 */
function extremum(original: (L: any) => number, max: boolean): (L: any) => number {
  return (L: any): number => {
    const stack = L.stack;
    const first: number = L.ci.funcOff + 1;
    const top: number = L.top;
    if (top <= first) return original(L);
    let best: TValue = stack[first];
    if (best.type !== T_NUMINT && best.type !== T_NUMFLT) return original(L);
    for (let i = first + 1; i < top; i++) {
      const v: TValue = stack[i];
      if (v.type !== T_NUMINT && v.type !== T_NUMFLT) return original(L);
      if (max ? best.value < v.value : v.value < best.value) best = v;
    }
    // The slot above the top holds nothing live (see adjustTop): reuse its object.
    const slot: TValue | undefined = stack[top];
    if (slot === undefined) stack[top] = new lobject.TValue(best.type, best.value);
    else {
      slot.type = best.type;
      slot.value = best.value;
    }
    L.top = top + 1;
    return 1;
  };
}

// ---- marshalling ------------------------------------------------------
//
// A table is a linked list of live entries in insertion order (`f`, `n`),
// which is the order `lua_next` visits, plus a Map from key to entry
// (`strong`). Values are `TValue`s tagged with the variant type.

type TValue = { type: number; value: any };
type Entry = { key: TValue; value: TValue; n: Entry | undefined };
type Table = { f: Entry | undefined; strong: Map<unknown, Entry> };
type TString = { realstring: Uint8Array; hash: string | null };

const T_BOOLEAN = lua.LUA_TBOOLEAN;
const T_NUMFLT = lua.LUA_TNUMBER;
const T_NUMINT = lua.LUA_TNUMBER | (1 << 4);
const T_SHRSTR = lua.LUA_TSTRING;
const T_LNGSTR = lua.LUA_TSTRING | (1 << 4);
const T_TABLE = lua.LUA_TTABLE;
/** Bounds the interned strings and key values: client-chosen keys beyond it are built every time. */
const CACHE_LIMIT = 4096;

let NIL: TValue;
let TOO_DEEP_VALUE: TValue;

// Pushing the same string object again skips both the UTF-8 encoding and
// fengari's per-byte key hashing (cached on the object), which otherwise
// dominate a tick's cost.
const interned = new Map<string, TString>();

function stringObject(s: string): LuaStringObject {
  const hit = interned.get(s);
  if (hit) return hit as unknown as LuaStringObject;
  const ts = lstring.luaS_bless(null, to_luastring(s)) as TString;
  if (interned.size < CACHE_LIMIT && s.length <= 64) interned.set(s, ts);
  return ts as unknown as LuaStringObject;
}

function pushStringObject(L: any, ts: LuaStringObject): void {
  lobject.pushsvalue2s(L, ts);
}

function pushGlobal(L: any, name: LuaStringObject): number {
  // The key's hash is cached on the interned string, so a callback lookup
  // costs one Map get; the script may redefine its callbacks at any time, so
  // nothing is cached here.
  const globals = registryValue(L, lua.LUA_RIDX_GLOBALS).value as Table;
  const entry = globals.strong.get(lstring.luaS_hashlongstr(name));
  const value = entry === undefined ? NIL : entry.value;
  lobject.pushobj2s(L, value);
  return value.type & 0x0f;
}

function pushRegistry(L: any, ref: number): void {
  lobject.pushobj2s(L, registryValue(L, ref));
}

function registryValue(L: any, ref: number): TValue {
  const entry = (L.l_G.l_registry.value as Table).strong.get(ref);
  return entry === undefined ? NIL : entry.value;
}

function pushJson(L: any, value: unknown): void {
  lobject.pushobj2s(L, jsonValue(L, value, 0));
}

/** A JSON value as a TValue; the caller copies it (fengari copies on store and push). */
function jsonValue(L: any, value: unknown, depth: number): TValue {
  switch (typeof value) {
    case 'string':
      return new lobject.TValue(T_LNGSTR, value.length <= 64 ? stringObject(value) : lstring.luaS_bless(null, to_luastring(value)));
    case 'number':
      return new lobject.TValue((value | 0) === value ? T_NUMINT : T_NUMFLT, value);
    case 'boolean':
      return new lobject.TValue(T_BOOLEAN, value);
    case 'object': {
      if (value === null) return NIL;
      if (depth >= MAX_DEPTH) return TOO_DEEP_VALUE;
      const t = ltable.luaH_new(L);
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          const item = value[i];
          if (item === null || item === undefined) continue;
          ltable.luaH_setint(t, i + 1, jsonValue(L, item, depth + 1));
        }
      } else {
        for (const key in value as Record<string, unknown>) {
          const item = (value as Record<string, unknown>)[key];
          if (item === null || item === undefined) continue;
          ltable.luaH_setfrom(L, t, keyValue(key), jsonValue(L, item, depth + 1));
        }
      }
      // As lua_rawset does: keys such as "__index" must not hit a stale metamethod cache.
      ltable.invalidateTMcache(t);
      return new lobject.TValue(T_TABLE, t);
    }
    default:
      return NIL;
  }
}

// Input keys repeat on every frame ("dx", "dy" ...): their key TValues are
// kept (fengari copies keys on insert, so sharing them is safe), bounded.
const keyValues = new Map<string, TValue>();

function keyValue(key: string): TValue {
  let tv = keyValues.get(key);
  if (tv !== undefined) return tv;
  tv = new lobject.TValue(T_LNGSTR, key.length <= 64 ? stringObject(key) : lstring.luaS_bless(null, to_luastring(key))) as TValue;
  if (keyValues.size < CACHE_LIMIT && key.length <= 64) keyValues.set(key, tv);
  return tv;
}

function toJsonText(L: any, index: number, objectOnly = false): string | undefined {
  const slot: TValue | undefined = index > 0 ? L.stack[L.ci.funcOff + index] : L.stack[L.top + index];
  if (slot === undefined) return undefined;
  // Decided from the keys, not from the text's first character: reading a character of the text joins its pieces into one string, and the frame built around it is joined again when it crosses to the main thread.
  if (objectOnly && (slot.type !== T_TABLE || sequenceLength(slot.value as Table) > 0)) return undefined;
  return textOf(slot, 0);
}

/** Decoded entity ids: the same id string object comes back every tick. */
const decodedKeys = new WeakMap<TString, string>();

function numberPairs(L: any, index: number, a: LuaStringObject, b: LuaStringObject, inside?: Box): { id: string; x: number; y: number }[] {
  const out: { id: string; x: number; y: number }[] = [];
  const slot: TValue | undefined = index > 0 ? L.stack[L.ci.funcOff + index] : L.stack[L.top + index];
  if (slot === undefined || slot.type !== T_TABLE) return out;
  const ha = lstring.luaS_hashlongstr(a);
  const hb = lstring.luaS_hashlongstr(b);
  for (let e = (slot.value as Table).f; e !== undefined; e = e.n) {
    const k = e.key;
    if ((k.type !== T_SHRSTR && k.type !== T_LNGSTR) || e.value.type !== T_TABLE) continue;
    const fields = (e.value.value as Table).strong;
    const va = fields.get(ha)?.value;
    const vb = fields.get(hb)?.value;
    if (!va || !vb || (va.type !== T_NUMINT && va.type !== T_NUMFLT) || (vb.type !== T_NUMINT && vb.type !== T_NUMFLT)) continue;
    if (inside !== undefined && va.value >= inside.x0 && va.value < inside.x1 && vb.value >= inside.y0 && vb.value < inside.y1) continue;
    const ts = k.value as TString;
    let id = decodedKeys.get(ts);
    if (id === undefined) {
      id = jsString(ts.realstring);
      decodedKeys.set(ts, id);
    }
    out.push({ id, x: va.value, y: vb.value });
  }
  return out;
}

/** Tables being encoded, by depth: a table that is its own ancestor is a cycle. */
const ancestors: Table[] = [];

// A value's JSON is written as UTF-8 into one buffer, kept between texts, and
// decoded once into a flat string. Joining pieces with `+` built a rope of
// small strings, several per entry (some 1.4 KB of garbage for a 200-byte
// view), which the crossing to the main thread then copied into one string
// again (decision 0078).
let bytes = new Uint8Array(4096);
/** Where the next byte goes. */
let at = 0;
// ignoreBOM keeps a leading U+FEFF as text (a JSON text never starts with one, but the decoder must not judge).
const utf8 = new TextDecoder('utf-8', { ignoreBOM: true });
const utf8Out = new TextEncoder();
/** Past this, a text's buffer is let go once the text is made, so that one large state does not pin its size. */
const KEPT_BUFFER = 64 * 1024;

function room(n: number): void {
  if (at + n <= bytes.length) return;
  let size = bytes.length * 2;
  while (size < at + n) size *= 2;
  const grown = new Uint8Array(size);
  grown.set(bytes.subarray(0, at));
  bytes = grown;
}

function putByte(b: number): void {
  if (at === bytes.length) room(1);
  bytes[at++] = b;
}

/** `s` is all ASCII. */
function putAscii(s: string): void {
  const n = s.length;
  room(n);
  for (let i = 0; i < n; i++) bytes[at + i] = s.charCodeAt(i);
  at += n;
}

function putText(s: string, ascii: boolean): void {
  if (ascii) return putAscii(s);
  room(s.length * 3);
  at += utf8Out.encodeInto(s, bytes.subarray(at)).written;
}

/** The JSON text of a value, or undefined for a value JSON cannot hold; written after whatever is being written, which it leaves as it was. */
function textOf(tv: TValue, depth: number): string | undefined {
  const start = at;
  try {
    return putValue(tv, depth) ? utf8.decode(bytes.subarray(start, at)) : undefined;
  } finally {
    at = start;
    if (start === 0 && bytes.length > KEPT_BUFFER) bytes = new Uint8Array(4096);
  }
}

/** Writes the value's JSON; false, having written nothing, for a value JSON cannot hold. */
function putValue(tv: TValue, depth: number): boolean {
  switch (tv.type) {
    case T_NUMINT: {
      const v = tv.value as number;
      if (v >= 0 && v < 10) putByte(48 + v);
      else putAscii('' + v);
      return true;
    }
    case T_NUMFLT:
      putAscii(Number.isFinite(tv.value) ? '' + tv.value : 'null');
      return true;
    case T_SHRSTR:
    case T_LNGSTR: {
      const text = luaStringText(tv.value as TString);
      putText(text.quoted, text.ascii);
      return true;
    }
    case T_BOOLEAN:
      putAscii(tv.value ? 'true' : 'false');
      return true;
    case T_TABLE:
      putTable(tv.value, depth);
      return true;
    default:
      return false;
  }
}

/** A Lua string's JSON text, kept on the string itself (a property read, where the shared cache is a WeakMap lookup), for short strings. */
function luaStringText(ts: TString & { json?: StringText }): StringText {
  const cached = ts.json;
  if (cached !== undefined) return cached;
  const text = stringText(ts.realstring);
  if (ts.realstring.length <= 64) ts.json = text;
  return text;
}

const TOO_DEEP_TEXT = `"${TOO_DEEP}"`;

function putTable(t: Table, depth: number): void {
  if (depth >= MAX_DEPTH) return putAscii(TOO_DEEP_TEXT);
  for (let i = 0; i < depth; i++) if (ancestors[i] === t) throw cycleError();
  ancestors[depth] = t;

  // Most tables a script sends are records with plain string keys (views,
  // payloads): written in one pass over the entries. The first key of any
  // other kind hands the table to the pass that works out its shape.
  const next = depth + 1;
  const open = at;
  putByte(0x7b);
  let keys = false;
  let wrote = false;
  for (let e = t.f; e !== undefined; e = e.n) {
    const type = e.key.type;
    if (type === T_SHRSTR || type === T_LNGSTR) {
      const key = luaStringText(e.key.value as TString);
      if (!key.plainKey) {
        at = open;
        return putShapedTable(t, depth);
      }
      keys = true;
      const mark = at;
      if (wrote) putByte(0x2c);
      putText(key.quoted, key.ascii);
      putByte(0x3a);
      if (!putValue(e.value, next)) {
        at = mark;
        continue;
      }
      wrote = true;
    } else if (type === T_NUMINT || type === T_NUMFLT || type === T_BOOLEAN) {
      at = open;
      return putShapedTable(t, depth);
    }
    // Other keys are dropped and do not count.
  }
  if (keys) putByte(0x7d);
  else {
    at = open;
    putAscii(emptyTableText(depth));
  }
}

/** n when a table's kept keys are exactly the integers 1..n, so that it is written as a JSON array; else 0. */
function sequenceLength(t: Table): number {
  let n = 0;
  let max = 0;
  for (let e = t.f; e !== undefined; e = e.n) {
    const k = e.key;
    switch (k.type) {
      case T_NUMINT:
        if (k.value < 1) return 0;
        n++;
        if (k.value > max) max = k.value;
        break;
      case T_SHRSTR:
      case T_LNGSTR:
      case T_NUMFLT:
      case T_BOOLEAN:
        return 0;
      default:
      // Other keys are dropped and do not count.
    }
  }
  return max <= n ? n : 0;
}

/** A table with a key other than a plain string: an array when the kept keys are exactly 1..n, else an object in JSON.stringify's key order. */
function putShapedTable(t: Table, depth: number): void {
  const n = sequenceLength(t);
  const next = depth + 1;

  if (n > 0) {
    putByte(0x5b);
    for (let i = 1; i <= n; i++) {
      if (i > 1) putByte(0x2c);
      if (!putValue((t.strong.get(i) as Entry).value, next)) putAscii('null');
    }
    return putByte(0x5d);
  }

  const fields: Record<string, string> = {};
  for (let e = t.f; e !== undefined; e = e.n) {
    const k = e.key;
    let key: string;
    switch (k.type) {
      case T_NUMINT:
      case T_NUMFLT:
        key = String(k.value);
        break;
      case T_SHRSTR:
      case T_LNGSTR:
        key = jsString((k.value as TString).realstring);
        break;
      case T_BOOLEAN:
        key = k.value ? 'true' : 'false';
        break;
      default:
        continue;
    }
    const v = textOf(e.value, next);
    if (v !== undefined) fields[key] = v;
  }
  putText(mixedObjectText(fields), false);
}

// A VM snapshot (snapshot.ts) written back after a refused join or a failed
// call, and after every think of a bot. Through the public API that is a
// walk of every kept table with a C call per entry, which cost more than a
// think itself; here it is one Map lookup per entry while nothing changed.

type Upvalues = TValue[];
interface KeptTable {
  t: Table & { metatable: unknown };
  metatable: unknown;
  hashes: unknown[];
  keys: TValue[];
  types: number[];
  values: unknown[];
  /** The recorded hashes as a set, built the first time the table is found changed. */
  index: Set<unknown> | null;
}
interface KeptFunc {
  upvalues: Upvalues;
  slots: TValue[];
  types: number[];
  values: unknown[];
}
interface Kept {
  tables: KeptTable[];
  funcs: KeptFunc[];
}

/** The values of a Lua sequence at `index` (1, 2, ... up to the first hole). */
function sequence(L: any, index: number): unknown[] {
  const slot: TValue | undefined = index > 0 ? L.stack[L.ci.funcOff + index] : L.stack[L.top + index];
  const out: unknown[] = [];
  if (slot === undefined || slot.type !== T_TABLE) return out;
  const t = slot.value as Table;
  for (let i = 1; ; i++) {
    const e = t.strong.get(i);
    if (e === undefined) return out;
    out.push(e.value.value);
  }
}

function keepState(L: any, index: number): KeptState {
  const kept: Kept = { tables: [], funcs: [] };
  for (const object of sequence(L, index)) {
    if (object instanceof ltable.Table) {
      const t = object as KeptTable['t'];
      const k: KeptTable = { t, metatable: t.metatable, hashes: [], keys: [], types: [], values: [], index: null };
      for (const [hash, e] of t.strong) {
        k.hashes.push(hash);
        k.keys.push(new lobject.TValue(e.key.type, e.key.value));
        k.types.push(e.value.type);
        k.values.push(e.value.value);
      }
      kept.tables.push(k);
    } else if (object instanceof lobject.LClosure) {
      const upvalues = (object as { upvals: Upvalues }).upvals;
      if (upvalues.length === 0) continue;
      kept.funcs.push({ upvalues, slots: [...upvalues], types: upvalues.map((u) => u.type), values: upvalues.map((u) => u.value) });
    }
  }
  return kept as unknown as KeptState;
}

function restoreState(L: any, state: KeptState): void {
  const kept = state as unknown as Kept;
  for (const k of kept.tables) {
    const t = k.t;
    let same = t.metatable === k.metatable && t.strong.size === k.hashes.length;
    for (let i = 0; same && i < k.hashes.length; i++) {
      const e = t.strong.get(k.hashes[i]);
      // Object.is: -0 is not 0 to a script (1/x), and a NaN is unchanged, not changed on every call.
      same = e !== undefined && e.value.type === k.types[i] && Object.is(e.value.value, k.values[i]);
    }
    if (same) continue;
    t.metatable = k.metatable;
    const index = (k.index ??= new Set(k.hashes));
    const added: TValue[] = [];
    for (const [hash, e] of t.strong) if (!index.has(hash)) added.push(e.key);
    for (const key of added) ltable.luaH_setfrom(L, t, key, NIL);
    for (let i = 0; i < k.hashes.length; i++) {
      const e = t.strong.get(k.hashes[i]);
      if (e === undefined) {
        ltable.luaH_setfrom(L, t, k.keys[i], new lobject.TValue(k.types[i], k.values[i]));
      } else {
        e.value.type = k.types[i]!;
        e.value.value = k.values[i];
      }
    }
    // As lua_rawset and lua_setmetatable do: a table used as a metatable must not keep a stale cache.
    ltable.invalidateTMcache(t);
  }
  for (const f of kept.funcs) {
    for (let i = 0; i < f.slots.length; i++) {
      const slot = f.slots[i]!;
      if (f.upvalues[i] !== slot) f.upvalues[i] = slot;
      if (slot.type !== f.types[i] || !Object.is(slot.value, f.values[i])) {
        slot.type = f.types[i]!;
        slot.value = f.values[i];
      }
    }
  }
}

// ---- the write log ----------------------------------------------------
//
// A zone's `handle_input` gets the live entity table and a refused input must
// leave it as it was. Copying the table before every input cost more than the
// inputs themselves (a 500-player world copies its zones 10,000 times a
// second); recording the writes an input makes costs what the input writes.
// Every table write the interpreter and the API make goes through
// ltable.luaH_setfrom or ltable.luaH_setint, called through the module
// object, so wrapping those two sees all of them. Metatables set by a call
// are not recorded (lua_setmetatable writes the field directly).

/** Flat records: table, key (a copy), the value's type and value before the write (type -1: absent). */
let writes: unknown[] | null = null;
let setfrom: (L: any, t: Table, key: TValue, value: TValue) => void;
let setint: (t: Table, key: number, value: TValue) => void;

function installWriteLog(): void {
  setfrom = newKeysWithoutClear(ltable.luaH_setfrom);
  setint = newIntKeysWithoutClear(ltable.luaH_setint);
  ltable.luaH_setfrom = (L: any, t: Table, key: TValue, value: TValue): void => {
    const hash = writes === null ? null : hashOf(key);
    if (hash !== null) {
      const e = t.strong.get(hash);
      writes!.push(t, new lobject.TValue(key.type, key.value), e === undefined ? -1 : e.value.type, e === undefined ? undefined : e.value.value);
    }
    setfrom(L, t, key, value);
  };
  ltable.luaH_setint = (t: Table, key: number, value: TValue): void => {
    if (writes !== null) {
      const e = t.strong.get(key);
      writes.push(t, key, e === undefined ? -1 : e.value.type, e === undefined ? undefined : e.value.value);
    }
    setint(t, key, value);
  };
}

// A new key goes through ltable.js's `add`, which empties the table's list
// of deleted entries (kept so that `next` can step past a key deleted during
// a traversal) with Map.clear: a fresh backing store even when the list is
// empty, as it nearly always is, at 40-170 ns a key. A view of four fields
// made twice a tick paid it eight times. These writes add string and integer
// keys themselves, clearing only a list that holds something; every other
// write (an existing key, a deletion, any other key type) is fengari's own.

type DeadList = { size: number; clear(): void };
type WritableTable = Table & { l: Entry | undefined; dead_strong: DeadList; dead_weak: unknown };

/** A write of `value` (not nil) under `hash`: the live entry's value in place, as ltable.js does, or a new entry appended. */
function writeKey(t: WritableTable, hash: unknown, keyType: number, keyValue: unknown, value: TValue): void {
  const e = t.strong.get(hash);
  if (e !== undefined) {
    e.value.type = value.type;
    e.value.value = value.value;
    return;
  }
  if (t.dead_strong.size !== 0) t.dead_strong.clear();
  t.dead_weak = undefined;
  const prev = t.l;
  // The shape of ltable.js's entries, so that every table's entries stay one hidden class.
  const entry = { key: new lobject.TValue(keyType, keyValue), value: new lobject.TValue(value.type, value.value), p: prev, n: undefined };
  if (!t.f) t.f = entry;
  if (prev) prev.n = entry;
  t.strong.set(hash, entry);
  t.l = entry;
}

function newKeysWithoutClear(original: (L: any, t: Table, key: TValue, value: TValue) => void): (L: any, t: Table, key: TValue, value: TValue) => void {
  return (L, t, key, value) => {
    const type = key.type;
    if ((type !== T_SHRSTR && type !== T_LNGSTR && type !== T_NUMINT) || value.type === LUA_TNIL) return original(L, t, key, value);
    writeKey(t as WritableTable, type === T_NUMINT ? key.value : lstring.luaS_hashlongstr(key.value), type, key.value, value);
  };
}

function newIntKeysWithoutClear(original: (t: Table, key: number, value: TValue) => void): (t: Table, key: number, value: TValue) => void {
  return (t, key, value) => {
    if (value.type === LUA_TNIL) return original(t, key, value);
    writeKey(t as WritableTable, key, T_NUMINT, key, value);
  };
}

/** fengari's key hash (ltable.js's table_hash, which it does not export); null for the keys a write refuses. */
function hashOf(key: TValue): unknown {
  switch (key.type) {
    case LUA_TNIL:
      return null;
    case T_SHRSTR:
    case T_LNGSTR:
      return lstring.luaS_hashlongstr(key.value);
    case T_NUMFLT:
      return Number.isNaN(key.value) ? null : key.value;
    case LUA_TLIGHTUSERDATA:
      return typeof key.value === 'string' ? '*' + key.value : typeof key.value === 'number' ? '#' + key.value : key.value;
    default:
      return key.value;
  }
}

function beginWrites(): void {
  writes = [];
}

function endWrites(): WriteLog | null {
  const log = writes;
  writes = null;
  return log !== null && log.length > 0 ? (log as unknown as WriteLog) : null;
}

function putBack(L: any, t: Table, key: unknown, type: number, value: unknown): void {
  const tv = type === -1 ? NIL : new lobject.TValue(type, value);
  if (typeof key === 'number') setint(t, key, tv);
  else setfrom(L, t, key as TValue, tv);
  ltable.invalidateTMcache(t);
}

function undoWrites(L: any, log: WriteLog, index: number): void {
  const w = log as unknown as unknown[];
  // What every written slot holds now, for the tables that keep their writes.
  const now: unknown[] = [];
  for (let i = 0; i < w.length; i += 4) {
    const t = w[i] as Table;
    const key = w[i + 1];
    const e = t.strong.get(typeof key === 'number' ? key : hashOf(key as TValue));
    now.push(e === undefined ? -1 : e.value.type, e === undefined ? undefined : e.value.value);
  }
  for (let i = w.length - 4; i >= 0; i -= 4) putBack(L, w[i] as Table, w[i + 1], w[i + 2] as number, w[i + 3]);
  const slot: TValue | undefined = index > 0 ? L.stack[L.ci.funcOff + index] : L.stack[L.top + index];
  const kept = new Set<Table>();
  if (slot !== undefined && slot.type === T_TABLE) reachable(slot.value as Table, kept);
  for (let i = 0, j = 0; i < w.length; i += 4, j += 2) {
    const t = w[i] as Table;
    if (!kept.has(t)) putBack(L, t, w[i + 1], now[j] as number, now[j + 1]);
  }
}

/** Every table reachable from `t` through keys and values (metatables are not followed: they are not recorded either). */
function reachable(t: Table, seen: Set<Table>): void {
  const stack = [t];
  seen.add(t);
  while (stack.length > 0) {
    const table = stack.pop()!;
    for (let e = table.f; e !== undefined; e = e.n) {
      if (e.value.type === T_TABLE && !seen.has(e.value.value)) {
        seen.add(e.value.value);
        stack.push(e.value.value);
      }
      if (e.key.type === T_TABLE && !seen.has(e.key.value)) {
        seen.add(e.key.value);
        stack.push(e.key.value);
      }
    }
  }
}

// ---- entity diffs -------------------------------------------------------
//
// A zone's broadcast compares its entities with what it last sent. Reading
// the Lua tables in place, field by field, replaces encoding the whole table
// as text and parsing it back on every broadcast: an unchanged number costs
// one comparison, and only what changed becomes a JS value.

// Keyed by fengari's own key hash (a JS string it caches on the Lua string), which a Map finds faster than an object key.
const decodedStrings = new Map<string, string>();

function luaStringOf(ts: TString & { hash: string | null }): string {
  const hash: string = ts.hash ?? lstring.luaS_hashlongstr(ts);
  let s = decodedStrings.get(hash);
  if (s === undefined) {
    s = jsString(ts.realstring);
    if (decodedStrings.size < CACHE_LIMIT * 4 && ts.realstring.length <= 64) decodedStrings.set(hash, s);
  }
  return s;
}

/** The text a nested field value was last seen as, so an unchanged table is one encode and a string compare. */
const nestedTexts = new WeakMap<object, string>();

/** A key as the JSON object the text encoders make would name it, or undefined for keys they drop. */
function keyName(k: TValue): string | undefined {
  switch (k.type) {
    case T_SHRSTR:
    case T_LNGSTR:
      return luaStringOf(k.value as TString);
    case T_NUMINT:
    case T_NUMFLT:
      return String(k.value);
    case T_BOOLEAN:
      return k.value ? 'true' : 'false';
    default:
      return undefined;
  }
}

const UNCHANGED = Symbol('unchanged');
/** How many fields a mirror record holds, kept on it under a symbol (not enumerable as JSON, not counted by a walk). */
const SIZE = Symbol('size');
/** A mirror record's view of its entity table's entries at the last walk (diffEntities). */
const RAW = Symbol('raw');
/** The last entity walk that met a mirror record. */
const STAMP = Symbol('stamp');
let walks = 0;

/**
 * A field's value as JSON, or UNCHANGED when it equals `before`; undefined for
 * values JSON cannot hold (the field is then absent, as in the text encoders).
 */
function fieldValue(tv: TValue, before: unknown): unknown {
  switch (tv.type) {
    case T_NUMINT:
      return tv.value === before ? UNCHANGED : tv.value;
    case T_NUMFLT: {
      const v = Number.isFinite(tv.value) ? tv.value : null;
      return v === before ? UNCHANGED : v;
    }
    case T_BOOLEAN:
      return tv.value === before ? UNCHANGED : tv.value;
    case T_SHRSTR:
    case T_LNGSTR: {
      const v = luaStringOf(tv.value as TString);
      return v === before ? UNCHANGED : v;
    }
    case T_TABLE: {
      let text: string | undefined;
      try {
        // Depth 2, as inside the entity table's text: an empty table is `[]`.
        text = textOf(tv, 2);
      } catch (err) {
        if (!(err instanceof MarshalError)) throw err;
      }
      // A table JSON cannot hold (a cycle) is left as it was sent, or absent.
      if (text === undefined) return before === undefined ? undefined : UNCHANGED;
      if (typeof before === 'object' && before !== null && nestedTexts.get(before) === text) return UNCHANGED;
      const v = JSON.parse(text) as unknown;
      if (typeof v === 'object' && v !== null) nestedTexts.set(v, text);
      return v;
    }
    default:
      return undefined;
  }
}

function diffEntities(L: any, index: number, mirror: Map<string, JsonRecord>, sink: EntitySink): void {
  const slot: TValue | undefined = index > 0 ? L.stack[L.ci.funcOff + index] : L.stack[L.top + index];
  const table = slot !== undefined && slot.type === T_TABLE ? (slot.value as Table) : undefined;
  // Each walk stamps the records it meets (a symbol property: no Set of ids per walk); an unstamped record's entity is gone.
  const stamp = ++walks;
  for (let e = table?.f; e !== undefined; e = e.n) {
    if (e.value.type !== T_TABLE) continue;
    const id = keyName(e.key);
    if (id === undefined) continue;
    const fields = (e.value.value as Table);
    const before = mirror.get(id) as (JsonRecord & { [STAMP]?: number }) | undefined;
    if (before === undefined) {
      const record: JsonRecord = {};
      for (let f = fields.f; f !== undefined; f = f.n) {
        const name = keyName(f.key);
        if (name === undefined || name === '__proto__') continue;
        const v = fieldValue(f.value, undefined);
        if (v !== undefined && v !== null) record[name] = v;
      }
      let size = 0;
      for (const _ in record) size++;
      (record as { [SIZE]?: number })[SIZE] = size;
      (record as { [STAMP]?: number })[STAMP] = stamp;
      mirror.set(id, record);
      sink.added(id, record);
      continue;
    }
    // Two keys naming one id (1 and "1"): the first one met stands, as in the text encoders' objects.
    if (before[STAMP] === stamp) continue;
    before[STAMP] = stamp;
    let changed: JsonRecord | null = null;
    // Fields met (all now in the record), and how the record's size moved.
    let met = 0;
    let grown = 0;
    // What each entry of the table held at the last walk (its key and value objects as fengari keeps them, and
    // whether it was a field of the record): an entry that still holds the very same number, boolean or string
    // is unchanged without decoding its name or looking it up.
    const raw = ((before as { [RAW]?: unknown[] })[RAW] ??= []);
    let j = 0;
    for (let f = fields.f; f !== undefined; f = f.n, j += 4) {
      const type = f.value.type;
      if (raw[j] === f.key.value && raw[j + 1] === type && raw[j + 2] === f.value.value && type !== T_TABLE && j < raw.length) {
        if (raw[j + 3] === true) met++;
        continue;
      }
      raw[j] = f.key.value;
      raw[j + 1] = type;
      raw[j + 2] = f.value.value;
      raw[j + 3] = false;
      const name = keyName(f.key);
      if (name === undefined || name === '__proto__') continue;
      const was = before[name];
      const v = fieldValue(f.value, was);
      if (v === UNCHANGED) {
        met++;
        raw[j + 3] = true;
        continue;
      }
      if (v === undefined || v === null) {
        if (was !== undefined) {
          delete before[name];
          grown--;
          (changed ??= {})[name] = null;
        }
        continue;
      }
      met++;
      raw[j + 3] = true;
      if (was === undefined) grown++;
      before[name] = v;
      (changed ??= {})[name] = v;
    }
    if (raw.length > j) raw.length = j;
    let size = (before as { [SIZE]?: number })[SIZE];
    if (size === undefined) {
      size = 0;
      for (const _ in before) size++;
    } else {
      size += grown;
    }
    if (size !== met) {
      // Fields gone since the last look: the ones this walk did not meet.
      const names = new Set<string>();
      for (let f = fields.f; f !== undefined; f = f.n) {
        const name = keyName(f.key);
        if (name !== undefined) names.add(name);
      }
      size = 0;
      for (const name in before) {
        if (names.has(name)) {
          size++;
          continue;
        }
        delete before[name];
        (changed ??= {})[name] = null;
      }
    }
    (before as { [SIZE]?: number })[SIZE] = size;
    if (changed !== null) sink.updated(id, changed);
  }
  for (const [id, record] of mirror) {
    if ((record as { [STAMP]?: number })[STAMP] === stamp) continue;
    mirror.delete(id);
    sink.removed(id);
  }
}

// ---- compiled chunks shared by every state --------------------------------
//
// Every match of a mode runs the same files, and each state compiled its own
// copy: a prototype tree of instruction objects and constants per VM. A
// lane's matches run a few at a time between sleeps of its thread, and what
// a sleeping thread had in the CPU's caches is gone when it wakes; with one
// copy per VM every tick fetched its function's code from memory again.
// Prototypes are not changed by running them, so one compiled tree serves
// every state of the thread, each with a closure and _ENV of its own.
// docs/decisions/0074.

type Proto = { upvalues: unknown[]; cache: unknown };

/** Compiled chunks by name and text, least recently used first. */
const chunks = new Map<string, Proto>();
/**
 * Bound the cache: an edited file's old text and code stay until pushed out,
 * and code takes about ten times the memory of its text. A game directory
 * holds far less; a chunk pushed out is compiled again on its next load.
 */
const CHUNKS_MAX = 256;
const CHUNK_TEXT_LIMIT = 8 * 1024 * 1024;
let chunkText = 0;

// ---- shared keys ----------------------------------------------------------
//
// fengari makes each state its own string object for every key it sets: a
// new byte array, with its own ArrayBuffer, per name of every library
// function, and a key text built a byte at a time (luaS_hash), which V8 keeps
// as a tree of one small string per byte. A state's libraries alone held
// some 700 heap objects and 33 KB of them, which every full collection of a
// lane with thousands of VMs marked again. Strings are immutable in Lua, so
// every state of a thread can share one string object per text, with its key
// text made once, flat (decision 0077).

/** A key text as luaS_hash writes it ('|' and each byte in hex, unpadded), made in one piece. */
const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16));
function flatHash(bytes: Uint8Array): string {
  const parts: string[] = new Array(bytes.length + 1);
  parts[0] = '|';
  for (let i = 0; i < bytes.length; i++) parts[i + 1] = HEX[bytes[i]!]!;
  return parts.join('');
}

/** The thread's shared key strings by key text, bounded as the other caches here. */
const sharedKeys = new Map<string, TString>();

function sharedKey(ts: TString): TString {
  const text = flatHash(ts.realstring);
  let shared = sharedKeys.get(text);
  if (shared === undefined) {
    if (sharedKeys.size >= CACHE_LIMIT) return ts;
    shared = ts;
    shared.hash = text;
    sharedKeys.set(text, shared);
  }
  return shared;
}

function shareKeys(L: any): void {
  const seen = new Set<Table>();
  const walk = (t: Table, level: number): void => {
    if (seen.has(t)) return;
    seen.add(t);
    let rekeyed: Map<unknown, string> | null = null;
    for (let e = t.f; e !== undefined; e = e.n) {
      const k = e.key;
      if (k.type === T_SHRSTR || k.type === T_LNGSTR) {
        const own = k.value as TString;
        const shared = sharedKey(own);
        if (shared !== own) {
          (rekeyed ??= new Map()).set(lstring.luaS_hashlongstr(own), shared.hash!);
          k.value = shared;
        }
      }
      if (level === 0 && e.value.type === T_TABLE) walk(e.value.value as Table, 1);
    }
    // The index again with each key's text in its one flat copy (equal texts: every lookup finds what
    // it found), built whole: deleting and re-adding keys would grow the old index's backing store.
    if (rekeyed !== null) {
      const index = new Map<unknown, Entry>();
      for (const [key, entry] of t.strong) index.set(rekeyed.get(key) ?? key, entry);
      t.strong = index;
    }
  };
  walk(registryValue(L, lua.LUA_RIDX_GLOBALS).value as Table, 0);
}

// ---- reading ahead ------------------------------------------------------
//
// A lane ticks each match once every 100 ms, between the ticks of hundreds
// of others, so what a tick reads of its VM (registry, globals, callbacks,
// stack, state) has left the CPU's caches since its last tick, and each read
// waits for the memory the previous one found. Reading the same objects for
// every VM of a batch first, one level at a time across the batch, issues
// the batch's misses side by side (no VM's read waits for another's), and
// the calls that follow find them cached (decision 0076).

/** Stack slots a call's first instructions write into (the callback, its arguments, its registers). */
const SLOTS_AHEAD = 12;
/** Entries of a state's tables read ahead per VM: a small state whole, a large one its first tables. */
const ENTRIES_AHEAD = 32;
const T_LCL = lua.LUA_TFUNCTION;
/** What the reads added up to, kept so that the compiler drops none of them as unused. */
const readings = { sum: 0 };

function readAhead(Ls: readonly any[], refs: readonly number[], names: readonly LuaStringObject[]): void {
  const n = Ls.length;
  const maps: (Map<unknown, Entry> | undefined)[] = new Array(n);
  const globals: (Map<unknown, Entry> | undefined)[] = new Array(n);
  const cursor: (Entry | undefined)[] = new Array(n);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const L = Ls[i];
    maps[i] = L.l_G.l_registry.value.strong;
    sum += L.top + L.ci.funcOff;
  }
  for (let i = 0; i < n; i++) {
    const stack = Ls[i].stack as (TValue | undefined)[];
    const end = Math.min(SLOTS_AHEAD, stack.length);
    for (let j = 0; j < end; j++) sum += stack[j]?.type ?? 0;
  }
  for (let i = 0; i < n; i++) {
    const registry = maps[i]!;
    const g = registry.get(lua.LUA_RIDX_GLOBALS)?.value;
    globals[i] = g !== undefined && g.type === T_TABLE ? (g.value as Table).strong : undefined;
    const state = registry.get(refs[i])?.value;
    cursor[i] = state !== undefined && state.type === T_TABLE ? (state.value as Table).f : undefined;
  }
  for (const name of names) {
    const hash = lstring.luaS_hashlongstr(name);
    for (let i = 0; i < n; i++) {
      const f = globals[i]?.get(hash)?.value;
      if (f === undefined || f.type !== T_LCL) continue;
      const upvals = f.value.upvals as TValue[];
      for (let j = 0; j < upvals.length; j++) sum += upvals[j]!.type;
    }
  }
  readings.sum = sum + readTables(cursor);
}

/** Walks the tables from each VM's first entry, one entry of every VM per round, breadth first, ENTRIES_AHEAD entries a VM at most. */
function readTables(cursor: (Entry | undefined)[]): number {
  const n = cursor.length;
  const queued: Table[][] = Array.from({ length: n }, () => []);
  const left: number[] = new Array(n).fill(ENTRIES_AHEAD);
  let sum = 0;
  for (let busy = true; busy; ) {
    busy = false;
    for (let i = 0; i < n; i++) {
      let e = cursor[i];
      if (e === undefined) {
        const next = left[i]! > 0 ? queued[i]!.pop() : undefined;
        if (next === undefined || next.f === undefined) continue;
        e = next.f;
      }
      busy = true;
      sum += e.key.type;
      if (e.value.type === T_TABLE) queued[i]!.push(e.value.value as Table);
      cursor[i] = --left[i]! > 0 ? e.n : undefined;
    }
  }
  return sum;
}

function loadChunk(L: any, text: string, chunkName: string): number {
  const key = chunkName + '\u0000' + text;
  const p = chunks.get(key);
  if (p === undefined) {
    const status = lauxlib.luaL_loadbufferx(L, to_luastring(text), null, to_luastring(chunkName), to_luastring('t'));
    if (status === lua.LUA_OK && key.length <= CHUNK_TEXT_LIMIT) keepChunk(key, L.stack[L.top - 1].value.p);
    return status;
  }
  chunks.delete(key);
  chunks.set(key, p);
  const cl = new lobject.LClosure(L, p.upvalues.length);
  cl.p = p;
  for (let i = 0; i < cl.nupvalues; i++) cl.upvals[i] = new lobject.TValue(LUA_TNIL, null);
  // As lua_load: the first upvalue of a main chunk is its _ENV, the globals.
  if (cl.nupvalues >= 1) cl.upvals[0].setfrom(registryValue(L, lua.LUA_RIDX_GLOBALS));
  // As the parser pushes its closure: the stack grows if it must.
  ldo.luaD_inctop(L);
  L.stack[L.top - 1].setclLvalue(cl);
  return lua.LUA_OK;
}

function keepChunk(key: string, p: Proto): void {
  unshareClosures(p);
  chunks.set(key, p);
  chunkText += key.length;
  for (const [old] of chunks) {
    if (chunkText <= CHUNK_TEXT_LIMIT && chunks.size <= CHUNKS_MAX) break;
    chunks.delete(old);
    chunkText -= old.length;
  }
}

/**
 * fengari, as Lua 5.3, hands out the last closure made from a prototype
 * again when its upvalues are the same ones, which for a function with none
 * would be the closure another state made: one state's function in another,
 * and a dead match's upvalues kept alive by the cache. Shared prototypes
 * cache nothing (Lua 5.4 dropped the cache too): each state makes its own.
 */
function unshareClosures(p: Proto & { p?: Proto[] }): void {
  Object.defineProperty(p, 'cache', { get: () => null, set: () => {} });
  for (const inner of p.p ?? []) unshareClosures(inner);
}

// Last, so that everything it touches is initialised.
/** The speed internals, or null when the gate is shut. */
export const internals: FengariInternals | null = internalsOff === null ? speedInternals() : null;

function speedInternals(): FengariInternals {
  NIL = lobject.luaO_nilobject;
  TOO_DEEP_VALUE = new lobject.TValue(T_LNGSTR, lstring.luaS_bless(null, to_luastring(TOO_DEEP)));
  installWriteLog();
  return { installFastCalls, extremum, loadChunk, stackSlots, releaseDeadSlots, stringObject, pushStringObject, pushGlobal, pushRegistry, pushJson, toJsonText, numberPairs, keepState, restoreState, beginWrites, endWrites, undoWrites, diffEntities, readAhead, shareKeys };
}
