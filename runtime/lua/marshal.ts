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

/** Lua bytes as a JS string; invalid UTF-8 is repaired, never thrown on. */
export function jsString(bytes: Uint8Array): string {
  return to_jsstring(bytes, 0, bytes.length, true);
}

/** Pushes a JSON value as a Lua value (one stack slot; `null`/`undefined` push nil). */
export function pushJson(L: any, value: unknown, depth = 0): void {
  if (value === null || value === undefined) {
    lua.lua_pushnil(L);
  } else if (typeof value === 'string') {
    lua.lua_pushstring(L, luaString(value));
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
      pushJson(L, item, depth + 1);
      lua.lua_setfield(L, -2, luaString(key));
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

function encode(L: any, index: number, depth: number, ancestors: Set<unknown>): JsonValue | undefined {
  switch (lua.lua_type(L, index)) {
    case lua.LUA_TSTRING:
      return jsString(lua.lua_tostring(L, index));
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
      key = jsString(lua.lua_tostring(L, -2));
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
