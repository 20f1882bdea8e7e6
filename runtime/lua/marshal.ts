/**
 * The one marshalling layer between Lua values and JSON (decision 10):
 *  - JS -> Lua: `null` becomes an absent key (a hole in an array); arrays
 *    become 1-based sequences; integral numbers become Lua integers.
 *  - Lua -> JS: a table whose keys are exactly 1..n is an array, an empty
 *    table is `{}`, any other table an object with string keys (number and
 *    boolean keys are written as strings, other keys dropped); integral
 *    numbers stay integers; functions, threads and userdata are dropped
 *    (`null` inside an array, where dropping would shift the rest); NaN and
 *    infinities become `null`. Nesting deeper than 64 levels is replaced by
 *    the string "too_deep" (lua-scripting 5.4); a cycle cannot be encoded.
 */
import type { JsonValue } from './api';
import { lua, to_luastring } from './vm';
import fengari from 'fengari';
import lobject from 'fengari/src/lobject.js';
import lstring from 'fengari/src/lstring.js';

const { to_jsstring } = fengari;

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

export function pushString(L: any, s: string): void {
  if (s.length <= 64) lobject.pushsvalue2s(L, stringObject(s));
  else lua.lua_pushstring(L, to_luastring(s));
}

/** Pushes the global `name` (raw lookup, interned key). */
export function pushGlobal(L: any, name: LuaStringObject): number {
  lua.lua_rawgeti(L, lua.LUA_REGISTRYINDEX, lua.LUA_RIDX_GLOBALS);
  lobject.pushsvalue2s(L, name);
  const type = lua.lua_rawget(L, -2);
  lua.lua_remove(L, -2);
  return type;
}

/** Lua bytes as a JS string; invalid UTF-8 is repaired, never thrown on. */
export function jsString(bytes: Uint8Array): string {
  return to_jsstring(bytes, 0, bytes.length, true);
}

/** Pushes a JSON value as a Lua value (one stack slot; `null`/`undefined` push nil). */
export function pushJson(L: any, value: unknown, depth = 0): void {
  if (value === null || value === undefined) {
    lua.lua_pushnil(L);
  } else if (typeof value === 'string') {
    pushString(L, value);
  } else if (typeof value === 'number') {
    if (Number.isInteger(value) && Number.isSafeInteger(value)) lua.lua_pushinteger(L, value);
    else lua.lua_pushnumber(L, value);
  } else if (typeof value === 'boolean') {
    lua.lua_pushboolean(L, value);
  } else if (depth >= MAX_DEPTH) {
    lua.lua_pushstring(L, luaString('too_deep'));
  } else if (Array.isArray(value)) {
    lua.lua_checkstack(L, 3);
    lua.lua_createtable(L, value.length, 0);
    for (let i = 0; i < value.length; i++) {
      const item = value[i];
      if (item === null || item === undefined) continue;
      pushJson(L, item, depth + 1);
      lua.lua_rawseti(L, -2, i + 1);
    }
  } else if (typeof value === 'object') {
    lua.lua_checkstack(L, 3);
    lua.lua_createtable(L, 0, 4);
    for (const key in value as Record<string, unknown>) {
      const item = (value as Record<string, unknown>)[key];
      if (item === null || item === undefined) continue;
      pushString(L, key);
      pushJson(L, item, depth + 1);
      lua.lua_rawset(L, -3);
    }
  } else {
    lua.lua_pushnil(L);
  }
}

/**
 * Converts the Lua value at `index` to JSON. Returns `undefined` for values
 * JSON cannot hold (functions, nil ...), so callers can drop them.
 */
export function toJson(L: any, index: number): JsonValue | undefined {
  return encode(L, lua.lua_absindex(L, index), 0, new Set());
}

// Decoded short strings, keyed by fengari's string object: keys and ids
// repeat every tick, and the objects themselves live as long as the tables.
const decoded = new WeakMap<object, string>();

/** The string at absolute stack `index` as JS, through the decode cache when short. */
function stringAt(L: any, index: number): string {
  const ts = L.stack[L.ci.funcOff + index].value;
  const bytes: Uint8Array = ts.realstring;
  if (bytes.length > 64) return jsString(bytes);
  let s = decoded.get(ts);
  if (s === undefined) {
    s = jsString(bytes);
    decoded.set(ts, s);
  }
  return s;
}

function encode(L: any, index: number, depth: number, ancestors: Set<unknown>): JsonValue | undefined {
  switch (lua.lua_type(L, index)) {
    case lua.LUA_TSTRING:
      return stringAt(L, index);
    case lua.LUA_TNUMBER: {
      const n = lua.lua_tonumber(L, index);
      return Number.isFinite(n) ? n : null;
    }
    case lua.LUA_TBOOLEAN:
      return lua.lua_toboolean(L, index);
    case lua.LUA_TTABLE:
      return encodeTable(L, index, depth, ancestors);
    default:
      return undefined;
  }
}

function encodeTable(L: any, index: number, depth: number, ancestors: Set<unknown>): JsonValue {
  if (depth >= MAX_DEPTH) return 'too_deep';
  const identity = lua.lua_topointer(L, index);
  if (ancestors.has(identity)) throw new MarshalError('cyclic table cannot be encoded');
  ancestors.add(identity);
  if (!lua.lua_checkstack(L, 4)) throw new MarshalError('Lua stack exhausted while encoding');

  // One pass collects entries; the shape (array or object) is decided after.
  const keys: (string | number)[] = [];
  const values: (JsonValue | undefined)[] = [];
  let sequence = true;
  lua.lua_pushnil(L);
  while (lua.lua_next(L, index) !== 0) {
    const keyType = lua.lua_type(L, -2);
    let key: string | number | null = null;
    if (keyType === lua.LUA_TNUMBER) {
      if (lua.lua_isinteger(L, -2)) key = lua.lua_tointeger(L, -2) as number;
      else {
        key = String(lua.lua_tonumber(L, -2));
        sequence = false;
      }
    } else if (keyType === lua.LUA_TSTRING) {
      key = stringAt(L, lua.lua_gettop(L) - 1);
      sequence = false;
    } else if (keyType === lua.LUA_TBOOLEAN) {
      key = lua.lua_toboolean(L, -2) ? 'true' : 'false';
      sequence = false;
    }
    if (key !== null) {
      keys.push(key);
      values.push(encode(L, lua.lua_gettop(L), depth + 1, ancestors));
    }
    lua.lua_pop(L, 1);
  }
  ancestors.delete(identity);

  const n = keys.length;
  if (n === 0) return {};
  if (sequence) {
    // Keys are integers; a sequence exactly when they are 1..n.
    const out: JsonValue[] = new Array(n);
    let exact = true;
    for (let i = 0; i < n; i++) {
      const k = keys[i] as number;
      if (k < 1 || k > n) {
        exact = false;
        break;
      }
      const v = values[i];
      out[k - 1] = v === undefined ? null : v;
    }
    if (exact) {
      for (let i = 0; i < n; i++) if (!(i in out)) return objectOf(keys, values);
      return out;
    }
  }
  return objectOf(keys, values);
}

function objectOf(keys: (string | number)[], values: (JsonValue | undefined)[]): JsonValue {
  const out: Record<string, JsonValue> = {};
  for (let i = 0; i < keys.length; i++) {
    const v = values[i];
    if (v !== undefined) out[String(keys[i])] = v;
  }
  return out;
}

/** True when the value at `index` is a table that encodes as a JSON object (not an array). */
export function isObjectJson(value: JsonValue | undefined): value is Record<string, JsonValue> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
