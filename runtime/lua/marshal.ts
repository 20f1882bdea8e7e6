/**
 * The one marshalling layer between Lua values and JSON:
 *  - JS -> Lua: `null` becomes an absent key (a hole in an array); arrays
 *    become 1-based sequences; integral numbers become Lua integers (fengari's
 *    are 32-bit: larger integral numbers become floats).
 *  - Lua -> JS: a table whose keys are exactly 1..n is an array, an empty
 *    table is `{}` at the top and `[]` nested inside a value, any
 *    other table an object with string keys (number and
 *    boolean keys are written as strings, other keys dropped); integral
 *    numbers stay integers; functions, threads and userdata are dropped
 *    (`null` inside an array, where dropping would shift the rest); NaN and
 *    infinities become `null`. Nesting deeper than 64 levels is replaced by
 *    the string "too_deep"; a cycle cannot be encoded.
 *
 * Each operation has two implementations with the same results: the one
 * below, on fengari's public API, and a faster one over fengari's own tables
 * and strings (fengari-internals.ts), used when the installed fengari is the
 * release it was written for. test/lua-internals.test.ts holds them equal.
 */
import type { JsonValue } from './host-interface';
import { internals, type Box, type EntitySink, type JsonRecord, type LuaStringObject, type WriteLog } from './fengari-internals';
import { MAX_DEPTH, MarshalError, TOO_DEEP, cycleError, emptyTableText, jsString, mixedObjectText, stringText } from './json-text';
import { lua, to_luastring } from './vm';

export { MAX_DEPTH, MarshalError, jsString, type LuaStringObject };
export { asObjectJson, isObjectJson } from './host-interface';

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

/** A string to push again and again (callback names, player ids); short ones are interned process-wide (bounded). */
export const stringObject: (s: string) => LuaStringObject = internals ? internals.stringObject : (s) => luaString(s) as unknown as LuaStringObject;

/** Pushes a string object made by `stringObject`. The caller guarantees stack room. */
export const pushStringObject: (L: any, ts: LuaStringObject) => void = internals
  ? internals.pushStringObject
  : (L, ts) => void lua.lua_pushstring(L, ts as unknown as Uint8Array);

/** Pushes the global `name` (raw lookup: no `__index` on the globals runs); returns its type. */
export const pushGlobal: (L: any, name: LuaStringObject) => number = internals
  ? internals.pushGlobal
  : (L, name) => {
      lua.lua_rawgeti(L, lua.LUA_REGISTRYINDEX, lua.LUA_RIDX_GLOBALS);
      lua.lua_pushstring(L, name as unknown as Uint8Array);
      const type = lua.lua_rawget(L, -2);
      lua.lua_remove(L, -2);
      return type;
    };

/** Pushes registry slot `ref`. */
export const pushRegistry: (L: any, ref: number) => void = internals
  ? internals.pushRegistry
  : (L, ref) => void lua.lua_rawgeti(L, lua.LUA_REGISTRYINDEX, ref);

/**
 * Pushes a JSON value as a Lua value (one stack slot; `null`/`undefined` push
 * nil). Lua integers are 32-bit in fengari: a larger integral number becomes
 * a float rather than failing the call.
 */
export function pushJson(L: any, value: unknown): void {
  if (!lua.lua_checkstack(L, 1)) throw new MarshalError('Lua stack exhausted while decoding');
  if (internals) internals.pushJson(L, value);
  else pushValue(L, value, 0);
}

function pushValue(L: any, value: unknown, depth: number): void {
  switch (typeof value) {
    case 'string':
      lua.lua_pushstring(L, luaString(value));
      return;
    case 'number':
      if ((value | 0) === value) lua.lua_pushinteger(L, value);
      else lua.lua_pushnumber(L, value);
      return;
    case 'boolean':
      lua.lua_pushboolean(L, value);
      return;
    case 'object': {
      if (value === null) return lua.lua_pushnil(L);
      if (depth >= MAX_DEPTH) return void lua.lua_pushstring(L, luaString(TOO_DEEP));
      // The table, a key and a value.
      if (!lua.lua_checkstack(L, 3)) throw new MarshalError('Lua stack exhausted while decoding');
      lua.lua_createtable(L, 0, 0);
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          const item = value[i];
          if (item === null || item === undefined) continue;
          pushValue(L, item, depth + 1);
          lua.lua_rawseti(L, -2, i + 1);
        }
      } else {
        for (const key in value as Record<string, unknown>) {
          const item = (value as Record<string, unknown>)[key];
          if (item === null || item === undefined) continue;
          lua.lua_pushstring(L, luaString(key));
          pushValue(L, item, depth + 1);
          lua.lua_rawset(L, -3);
        }
      }
      return;
    }
    default:
      lua.lua_pushnil(L);
  }
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
 * With `objectOnly` (a view), `undefined` too for what is not written as a
 * JSON object.
 */
export const toJsonText: (L: any, index: number, objectOnly?: boolean) => string | undefined = internals
  ? internals.toJsonText
  : (L, index, objectOnly = false) => {
      if (lua.lua_type(L, index) === lua.LUA_TNONE) return undefined;
      const text = valueText(L, lua.lua_absindex(L, index), 0);
      return objectOnly && text?.charCodeAt(0) !== 123 ? undefined : text;
    };

/** Tables being encoded, by depth: a table that is its own ancestor is a cycle. */
const ancestors: unknown[] = [];

function valueText(L: any, index: number, depth: number): string | undefined {
  switch (lua.lua_type(L, index)) {
    case lua.LUA_TNUMBER: {
      if (lua.lua_isinteger(L, index)) return '' + lua.lua_tointeger(L, index);
      const n: number = lua.lua_tonumber(L, index);
      return Number.isFinite(n) ? '' + n : 'null';
    }
    case lua.LUA_TSTRING:
      return stringText(lua.lua_tostring(L, index)).quoted;
    case lua.LUA_TBOOLEAN:
      return lua.lua_toboolean(L, index) ? 'true' : 'false';
    case lua.LUA_TTABLE:
      return tableText(L, index, depth);
    default:
      return undefined;
  }
}

/** One kept entry of a table: its key as read, and its value's text. */
type Kept = { type: 'int' | 'float' | 'string' | 'boolean'; key: any; text: string | undefined };

function tableText(L: any, index: number, depth: number): string {
  if (depth >= MAX_DEPTH) return `"${TOO_DEEP}"`;
  const t = lua.lua_topointer(L, index);
  for (let i = 0; i < depth; i++) if (ancestors[i] === t) throw cycleError();
  ancestors[depth] = t;
  // The key and value lua_next leaves.
  if (!lua.lua_checkstack(L, 2)) throw new MarshalError('Lua stack exhausted while encoding');

  // One pass in `lua_next` order (insertion order in fengari): the kept keys
  // and their values' text; then the shape, as the key set decides it.
  const kept: Kept[] = [];
  let ints = 0;
  let min = Infinity;
  let max = -Infinity;
  let plain = true;
  const next = depth + 1;
  lua.lua_pushnil(L);
  while (lua.lua_next(L, index) !== 0) {
    const value = lua.lua_gettop(L);
    let entry: Kept | null = null;
    switch (lua.lua_type(L, -2)) {
      case lua.LUA_TNUMBER:
        if (lua.lua_isinteger(L, -2)) {
          const k: number = lua.lua_tointeger(L, -2);
          ints++;
          if (k < min) min = k;
          if (k > max) max = k;
          entry = { type: 'int', key: k, text: undefined };
        } else {
          entry = { type: 'float', key: lua.lua_tonumber(L, -2), text: undefined };
        }
        plain = false;
        break;
      case lua.LUA_TSTRING: {
        // Only a string key is read as a string: lua_tostring would turn a number key into one in place.
        const bytes: Uint8Array = lua.lua_tostring(L, -2);
        if (!stringText(bytes).plainKey) plain = false;
        entry = { type: 'string', key: bytes, text: undefined };
        break;
      }
      case lua.LUA_TBOOLEAN:
        entry = { type: 'boolean', key: lua.lua_toboolean(L, -2), text: undefined };
        plain = false;
        break;
      default:
      // Other keys are dropped and do not count.
    }
    if (entry !== null) {
      entry.text = valueText(L, value, next);
      kept.push(entry);
    }
    lua.lua_pop(L, 1);
  }
  const n = kept.length;
  if (n === 0) return emptyTableText(depth);

  if (ints === n && min >= 1 && max <= n) {
    const texts: (string | undefined)[] = new Array(n);
    for (const e of kept) texts[e.key - 1] = e.text;
    let out = '[';
    for (let i = 0; i < n; i++) out += (i === 0 ? '' : ',') + (texts[i] === undefined ? 'null' : texts[i]);
    return out + ']';
  }

  if (plain) {
    let out = '{';
    for (const e of kept) {
      if (e.text === undefined) continue;
      out += (out.length === 1 ? '' : ',') + stringText(e.key).quoted + ':' + e.text;
    }
    return out + '}';
  }

  const fields: Record<string, string> = {};
  for (const e of kept) {
    let key: string;
    switch (e.type) {
      case 'int':
      case 'float':
        key = String(e.key);
        break;
      case 'string':
        key = jsString(e.key);
        break;
      case 'boolean':
        key = e.key ? 'true' : 'false';
        break;
    }
    if (e.text !== undefined) fields[key] = e.text;
  }
  return mixedObjectText(fields);
}


/**
 * Entries of the table at `index` keyed by strings whose values are tables
 * holding numbers under keys `a` and `b` (a zone's entities and their `x`,
 * `y`), read in place without converting the table.
 */
export const numberPairs: (L: any, index: number, a: LuaStringObject, b: LuaStringObject, inside?: Box) => { id: string; x: number; y: number }[] = internals
  ? internals.numberPairs
  : (L, index, a, b, inside) => {
      const out: { id: string; x: number; y: number }[] = [];
      const table = lua.lua_absindex(L, index);
      lua.lua_pushnil(L);
      while (lua.lua_next(L, table) !== 0) {
        if (lua.lua_type(L, -1) === lua.LUA_TTABLE && lua.lua_type(L, -2) === lua.LUA_TSTRING) {
          const entity = lua.lua_gettop(L);
          pushStringObject(L, a);
          const ta = lua.lua_rawget(L, entity);
          pushStringObject(L, b);
          const tb = lua.lua_rawget(L, entity);
          if (ta === lua.LUA_TNUMBER && tb === lua.LUA_TNUMBER) {
            const x: number = lua.lua_tonumber(L, -2);
            const y: number = lua.lua_tonumber(L, -1);
            if (inside === undefined || !(x >= inside.x0 && x < inside.x1 && y >= inside.y0 && y < inside.y1)) out.push({ id: jsString(lua.lua_tostring(L, entity - 1)), x, y });
          }
          lua.lua_settop(L, entity);
        }
        lua.lua_pop(L, 1);
      }
      return out;
    };


export type { Box, EntitySink, JsonRecord, WriteLog };

/**
 * Reads ahead, across a batch of states about to be called, what the calls
 * will read first: the globals `names` and their upvalues, the stack, the
 * table in registry slot `refs[i]` of `Ls[i]`. Changes nothing; without the
 * internals it does nothing (the public API reads one value at a time).
 */
export const readAhead: (Ls: readonly any[], refs: readonly number[], names: readonly LuaStringObject[]) => void = internals ? internals.readAhead : () => {};

/**
 * The table writes of a call, so that a refused call can be undone in place
 * (`undo` puts back the tables reachable from the table at `index`). Null
 * when the internals are off: callers then copy the table before the call.
 */
export const writeLog: { begin(): void; end(): WriteLog | null; undo(L: any, log: WriteLog, index: number): void } | null = internals
  ? { begin: internals.beginWrites, end: internals.endWrites, undo: internals.undoWrites }
  : null;

/**
 * Compares the entity table at `index` (id → table of fields) with `mirror`
 * (id → fields as JSON), tells `sink` each added entity, changed fields (a
 * field gone reads null) and removed entity, and brings `mirror` up to date.
 * Ids are the table's keys as the JSON text names them; an entity that is not
 * a table, a null field and a field JSON cannot hold are absent.
 */
export const diffEntities: (L: any, index: number, mirror: Map<string, JsonRecord>, sink: EntitySink) => void = internals
  ? internals.diffEntities
  : (L, index, mirror, sink) => {
      let current: Record<string, unknown> = {};
      try {
        const text = toJsonText(L, index);
        const parsed = text === undefined ? null : (JSON.parse(text) as unknown);
        if (Array.isArray(parsed)) parsed.forEach((v, i) => (current[String(i + 1)] = v));
        else if (typeof parsed === 'object' && parsed !== null) current = parsed as Record<string, unknown>;
      } catch (err) {
        if (!(err instanceof MarshalError)) throw err;
      }
      const seen = new Set<string>();
      for (const id in current) {
        const entity = current[id];
        if (typeof entity !== 'object' || entity === null || Array.isArray(entity)) continue;
        seen.add(id);
        const fields: JsonRecord = {};
        for (const k in entity) if ((entity as JsonRecord)[k] !== null) fields[k] = (entity as JsonRecord)[k];
        const before = mirror.get(id);
        mirror.set(id, fields);
        if (before === undefined) {
          sink.added(id, fields);
          continue;
        }
        let changed: JsonRecord | null = null;
        for (const k in fields) {
          const a = fields[k];
          const b = before[k];
          if (a === b || (typeof a === 'object' && b !== undefined && JSON.stringify(a) === JSON.stringify(b))) continue;
          (changed ??= {})[k] = a;
        }
        for (const k in before) if (!(k in fields)) (changed ??= {})[k] = null;
        if (changed !== null) sink.updated(id, changed);
      }
      for (const id of [...mirror.keys()]) {
        if (seen.has(id)) continue;
        mirror.delete(id);
        sink.removed(id);
      }
    };
