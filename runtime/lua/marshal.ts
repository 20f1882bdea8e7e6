/**
 * The one marshalling layer between Lua values and JSON:
 *  - JS -> Lua: `null` becomes an absent key (a hole in an array); arrays
 *    become 1-based sequences; integral numbers become Lua integers (fengari's
 *    are 32-bit: larger integral numbers become floats).
 *  - Lua -> JS: a table whose keys are exactly 1..n is an array, an empty
 *    table is `{}`, any other table an object with string keys (number and
 *    boolean keys are written as strings, other keys dropped); integral
 *    numbers stay integers; functions, threads and userdata are dropped
 *    (`null` inside an array, where dropping would shift the rest); NaN and
 *    infinities become `null`. Nesting deeper than 64 levels is replaced by
 *    the string "too_deep"; a cycle cannot be encoded.
 */
import type { JsonValue } from './api';
import { lua, to_luastring } from './vm';
import fengari from 'fengari';
import lobject from 'fengari/src/lobject.js';
import lstring from 'fengari/src/lstring.js';
import ltable from 'fengari/src/ltable.js';

const { to_jsstring } = fengari;

// Encoding and decoding use fengari's own structures instead of its API: a table is
// a linked list of live entries in insertion order (`f`, `n`), which is the
// order `lua_next` visits, without a stack push, pop and key lookup per
// entry. Values are `TValue`s tagged with the variant type.
type TValue = { type: number; value: any };
type Entry = { key: TValue; value: TValue; n: Entry | undefined };
type Table = { f: Entry | undefined; strong: Map<unknown, Entry> };

const T_BOOLEAN = lua.LUA_TBOOLEAN;
const T_NUMFLT = lua.LUA_TNUMBER;
const T_NUMINT = lua.LUA_TNUMBER | (1 << 4);
const T_SHRSTR = lua.LUA_TSTRING;
const T_LNGSTR = lua.LUA_TSTRING | (1 << 4);
const T_TABLE = lua.LUA_TTABLE;
const NIL: TValue = lobject.luaO_nilobject;

export const MAX_DEPTH = 64;

export class MarshalError extends Error {
  override name = 'MarshalError';
}

// Object keys repeat endlessly (every view has `players`, `x`, `y` ...).
// Encoding each to UTF-8 again is the hot path, so a bounded cache keeps
// the first few thousand distinct keys; client-chosen keys beyond that are
// converted every time rather than growing the cache.
const keyCache = new Map<string, Uint8Array>();
const KEY_CACHE_LIMIT = 4096;

export function luaString(s: string): Uint8Array {
  let bytes = keyCache.get(s);
  if (bytes) return bytes;
  bytes = to_luastring(s) as Uint8Array;
  if (keyCache.size < KEY_CACHE_LIMIT && s.length <= 64) keyCache.set(s, bytes);
  return bytes;
}

/**
 * A fengari string object. Pushing the same object again skips both the
 * UTF-8 encoding and fengari's per-byte key hashing (cached on the object),
 * which otherwise dominate a tick's cost.
 */
export type LuaStringObject = { readonly realstring: Uint8Array };

const interned = new Map<string, LuaStringObject>();

/** A string object for `s`; short strings are interned process-wide (bounded). */
export function stringObject(s: string): LuaStringObject {
  const hit = interned.get(s);
  if (hit) return hit;
  const ts = lstring.luaS_bless(null, to_luastring(s)) as LuaStringObject;
  if (interned.size < KEY_CACHE_LIMIT && s.length <= 64) interned.set(s, ts);
  return ts;
}

/** Pushes a string object made by `stringObject`. The caller guarantees stack room. */
export function pushStringObject(L: any, ts: LuaStringObject): void {
  lobject.pushsvalue2s(L, ts);
}

/** Pushes the global `name` (raw lookup, interned key). */
export function pushGlobal(L: any, name: LuaStringObject): number {
  // Read from the globals table's entries directly (the key's hash is cached
  // on the interned string), so a callback lookup costs one Map get; the
  // script may redefine its callbacks at any time, so nothing is cached.
  const globals = registryValue(L, lua.LUA_RIDX_GLOBALS).value as Table;
  const entry = globals.strong.get(lstring.luaS_hashlongstr(name));
  const value = entry === undefined ? NIL : entry.value;
  lobject.pushobj2s(L, value);
  return value.type & 0x0f;
}

/** Pushes registry slot `ref` (what `lua_rawgeti(L, LUA_REGISTRYINDEX, ref)` does, without the API checks). */
export function pushRegistry(L: any, ref: number): void {
  lobject.pushobj2s(L, registryValue(L, ref));
}

function registryValue(L: any, ref: number): TValue {
  const entry = (L.l_G.l_registry.value as Table).strong.get(ref);
  return entry === undefined ? NIL : entry.value;
}

/** Lua bytes as a JS string; invalid UTF-8 is repaired, never thrown on. */
export function jsString(bytes: Uint8Array): string {
  return to_jsstring(bytes, 0, bytes.length, true);
}

/**
 * Pushes a JSON value as a Lua value (one stack slot; `null`/`undefined` push
 * nil). Tables are filled directly (`luaH_setfrom`), not through the stack.
 * Lua integers are 32-bit in fengari: a larger integral number becomes a
 * float rather than failing the call.
 */
export function pushJson(L: any, value: unknown): void {
  if (!lua.lua_checkstack(L, 1)) throw new MarshalError('Lua stack exhausted while decoding');
  lobject.pushobj2s(L, jsonValue(L, value, 0));
}

const TOO_DEEP: TValue = new lobject.TValue(T_LNGSTR, lstring.luaS_bless(null, to_luastring('too_deep')));

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
      if (depth >= MAX_DEPTH) return TOO_DEEP;
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
  if (keyValues.size < KEY_CACHE_LIMIT && key.length <= 64) keyValues.set(key, tv);
  return tv;
}

/**
 * Converts the Lua value at `index` to JSON. Returns `undefined` for values
 * JSON cannot hold (functions, nil ...), so callers can drop them.
 */
export function toJson(L: any, index: number): JsonValue | undefined {
  const text = toJsonText(L, index);
  return text === undefined ? undefined : (JSON.parse(text) as JsonValue);
}

/**
 * The Lua value at stack `index` as JSON text (exactly `JSON.stringify` of
 * what `toJson` returns), or `undefined` for values JSON cannot hold. The
 * host sends views as text, so they never become JS objects on the way.
 */
export function toJsonText(L: any, index: number): string | undefined {
  const slot: TValue | undefined = index > 0 ? L.stack[L.ci.funcOff + index] : L.stack[L.top + index];
  return slot === undefined ? undefined : valueText(slot, 0);
}


/** A Lua string as JSON: its quoted text, and whether as an object key it keeps its insertion place in JS. */
type StringText = { readonly quoted: string; readonly plainKey: boolean };

// Keys and ids repeat every tick and their string objects live as long as
// the tables holding them, so the quoted form is cached per object.
const stringTexts = new WeakMap<object, StringText>();

function stringText(ts: { realstring: Uint8Array }): StringText {
  let text = stringTexts.get(ts);
  if (text !== undefined) return text;
  const s = jsString(ts.realstring);
  // JS objects list array-index keys first, ascending, and ignore `__proto__`
  // assignments; keys like that take the slow path below to keep JS's shape.
  text = { quoted: JSON.stringify(s), plainKey: s !== '__proto__' && !isArrayIndex(s) };
  if (ts.realstring.length <= 64) stringTexts.set(ts, text);
  return text;
}

function isArrayIndex(s: string): boolean {
  return /^(?:0|[1-9][0-9]{0,9})$/.test(s) && Number(s) < 4294967295;
}

/** Tables being encoded, by depth: a table that is its own ancestor is a cycle. */
const ancestors: Table[] = [];

function valueText(tv: TValue, depth: number): string | undefined {
  switch (tv.type) {
    case T_NUMINT:
      return '' + tv.value;
    case T_NUMFLT:
      return Number.isFinite(tv.value) ? '' + tv.value : 'null';
    case T_SHRSTR:
    case T_LNGSTR:
      return stringText(tv.value).quoted;
    case T_BOOLEAN:
      return tv.value ? 'true' : 'false';
    case T_TABLE:
      return tableText(tv.value, depth);
    default:
      return undefined;
  }
}

function tableText(t: Table, depth: number): string {
  if (depth >= MAX_DEPTH) return '"too_deep"';
  for (let i = 0; i < depth; i++) if (ancestors[i] === t) throw new MarshalError('cyclic table cannot be encoded');
  ancestors[depth] = t;

  // Shape first: an array when the kept keys are exactly the integers 1..n,
  // else an object; `plain` when every key is a string JS keeps in order.
  let n = 0;
  let ints = 0;
  let min = Infinity;
  let max = -Infinity;
  let plain = true;
  for (let e = t.f; e !== undefined; e = e.n) {
    const k = e.key;
    switch (k.type) {
      case T_NUMINT:
        n++;
        ints++;
        if (k.value < min) min = k.value;
        if (k.value > max) max = k.value;
        plain = false;
        break;
      case T_SHRSTR:
      case T_LNGSTR:
        n++;
        if (!stringText(k.value).plainKey) plain = false;
        break;
      case T_NUMFLT:
      case T_BOOLEAN:
        n++;
        plain = false;
        break;
      default:
      // Other keys are dropped and do not count.
    }
  }
  if (n === 0) return '{}';
  const next = depth + 1;

  if (ints === n && min >= 1 && max <= n) {
    let out = '[';
    for (let i = 1; i <= n; i++) {
      const v = valueText((t.strong.get(i) as Entry).value, next);
      out += (i === 1 ? '' : ',') + (v === undefined ? 'null' : v);
    }
    return out + ']';
  }

  if (plain) {
    let out = '{';
    for (let e = t.f; e !== undefined; e = e.n) {
      const type = e.key.type;
      if (type !== T_SHRSTR && type !== T_LNGSTR) continue;
      const v = valueText(e.value, next);
      if (v === undefined) continue;
      out += (out.length === 1 ? '' : ',') + stringText(e.key.value).quoted + ':' + v;
    }
    return out + '}';
  }

  // Mixed keys: a JS object gives exactly JSON.stringify's key order and
  // collisions (1 and "1", "__proto__").
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
        key = jsString(k.value.realstring);
        break;
      case T_BOOLEAN:
        key = k.value ? 'true' : 'false';
        break;
      default:
        continue;
    }
    const v = valueText(e.value, next);
    if (v !== undefined) fields[key] = v;
  }
  let out = '{';
  for (const key of Object.keys(fields)) out += (out.length === 1 ? '' : ',') + JSON.stringify(key) + ':' + fields[key];
  return out + '}';
}

/** True when the value at `index` is a table that encodes as a JSON object (not an array). */
export function isObjectJson(value: JsonValue | undefined): value is Record<string, JsonValue> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
