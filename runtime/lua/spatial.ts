/**
 * `game.spatial.*`: radius, rectangle and nearest-neighbour queries over a
 * script's entity tables, and the zone-only forms over a zone's own entities
 * and the mirrors its neighbours keep in its border band.
 *
 * These run inside a script's instruction budget, over tables of hundreds to
 * thousands of entities, many times a tick. So an entity table is walked in
 * place with lua_next, x/y/type are raw reads with interned keys (the key's
 * hash is cached on the string object), nothing is marshalled to JSON, and a
 * capped, ordered query keeps its best matches in a JS heap so that rows are
 * built only for matches that can still make the cut. The count hook sees
 * none of this work, so each walk is charged to the budget by the host's
 * `charge`, which also checks the deadline between two queries of a loop.
 * Wrong arguments answer `{error = "..."}` instead of raising, as every
 * `game.*` function does.
 */
import type { JsonObject, JsonValue } from './host-interface';
import { jsString, luaString, pushJson, pushStringObject, stringObject } from './marshal';
import { lua, type LuaFunction } from './vm';

/** What a zone VM offers the zone-only forms. */
export interface ZoneSpatial {
  /** Pushes the calling zone's current entity table (keyed by entity id) onto the Lua stack, or nil. */
  pushOwnEntities(L: any): void;
  /** Copies of entities the eight touching zones mirror into this zone's border band (empty when border_band is 0). */
  mirrors(): { id: string; entity: JsonObject }[];
}

/**
 * Charges a walk against the running call's budget; may raise to end the call
 * (Sandbox.charge does both).
 */
export type Charge = (L: any, instructions: number) => void;

/**
 * Instructions charged per entity or mirror a query looks at: a walk costs
 * about half what the same loop written in Lua costs, and that loop runs
 * some 15 instructions an entity.
 */
export const ENTITY_COST = 8;

const T_NIL = lua.LUA_TNIL;
const T_NUMBER = lua.LUA_TNUMBER;
const T_STRING = lua.LUA_TSTRING;
const T_TABLE = lua.LUA_TTABLE;

const KEY = {
  x: stringObject('x'),
  y: stringObject('y'),
  type: stringObject('type'),
  id: stringObject('id'),
  entity: stringObject('entity'),
  distance: stringObject('distance'),
  error: stringObject('error'),
  sort: stringObject('sort'),
  exclude: stringObject('exclude'),
  max_results: stringObject('max_results'),
};

/** How results are ordered: as the table walk meets them, or by distance. */
type Order = 'any' | 'nearest' | 'farthest';

interface Options {
  /** Accepted `type` values, as bytes for Lua strings and as text for mirrors; null accepts every entity. */
  types: Uint8Array[] | null;
  typeNames: Set<string> | null;
  /** Ids left out, as text (a number id as JS writes it). */
  exclude: Set<string> | null;
  max: number;
  order: Order;
}

const NO_OPTIONS: Options = { types: null, typeNames: null, exclude: null, max: Infinity, order: 'any' };

/** A circle (distance measured from its centre) or an axis-aligned rectangle (no distance). */
interface Shape {
  circle: boolean;
  cx: number;
  cy: number;
  r: number;
  x1: number;
  y1: number;
  x2: number;
  y2: number;
}

function circle(cx: number, cy: number, r: number): Shape {
  return { circle: true, cx, cy, r, x1: 0, y1: 0, x2: 0, y2: 0 };
}

function rect(ax: number, ay: number, bx: number, by: number): Shape {
  return { circle: false, cx: 0, cy: 0, r: 0, x1: Math.min(ax, bx), y1: Math.min(ay, by), x2: Math.max(ax, bx), y2: Math.max(ay, by) };
}

/** Distance from the shape's centre when (x, y) is inside it (0 for a rectangle), else -1. */
function within(shape: Shape, x: number, y: number): number {
  if (shape.circle) {
    const dx = x - shape.cx;
    const dy = y - shape.cy;
    const d = Math.sqrt(dx * dx + dy * dy);
    return d <= shape.r ? d : -1;
  }
  return x >= shape.x1 && x <= shape.x2 && y >= shape.y1 && y <= shape.y2 ? 0 : -1;
}

function envelope(L: any, message: string): number {
  lua.lua_createtable(L, 0, 1);
  pushStringObject(L, KEY.error);
  lua.lua_pushstring(L, luaString(message));
  lua.lua_rawset(L, -3);
  return 1;
}

function isNumber(L: any, index: number): boolean {
  return lua.lua_type(L, index) === T_NUMBER;
}

/** Text of an id as opts.exclude compares it: a number id as JS writes it, so 7 and "7" are the same id. */
function idText(L: any, index: number): string | null {
  switch (lua.lua_type(L, index)) {
    case T_STRING:
      return jsString(lua.lua_tostring(L, index));
    case T_NUMBER:
      return String(lua.lua_tonumber(L, index));
    default:
      return null;
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The opts table at `index` (nil or absent: no options), or the envelope's message. */
function readOptions(L: any, index: number, signature: string): Options | string {
  const t = lua.lua_type(L, index);
  if (t === lua.LUA_TNONE || t === T_NIL) return NO_OPTIONS;
  if (t !== T_TABLE) return `${signature}: opts must be a table`;
  const opts = lua.lua_absindex(L, index);
  const options: Options = { types: null, typeNames: null, exclude: null, max: Infinity, order: 'any' };

  pushStringObject(L, KEY.type);
  const types = lua.lua_rawget(L, opts);
  if (types !== T_NIL) {
    const list = stringList(L, lua.lua_gettop(L), types, false);
    if (list === null) {
      lua.lua_pop(L, 1);
      return `${signature}: opts.type must be a string or an array of strings`;
    }
    options.types = list.map((s) => s.bytes);
    options.typeNames = new Set(list.map((s) => s.text));
  }
  lua.lua_pop(L, 1);

  pushStringObject(L, KEY.exclude);
  const exclude = lua.lua_rawget(L, opts);
  if (exclude !== T_NIL) {
    const list = stringList(L, lua.lua_gettop(L), exclude, true);
    if (list === null) {
      lua.lua_pop(L, 1);
      return `${signature}: opts.exclude must be an id or an array of ids`;
    }
    options.exclude = new Set(list.map((s) => s.text));
  }
  lua.lua_pop(L, 1);

  pushStringObject(L, KEY.max_results);
  const max = lua.lua_rawget(L, opts);
  if (max !== T_NIL) {
    const n = max === T_NUMBER ? (lua.lua_tonumber(L, -1) as number) : NaN;
    lua.lua_pop(L, 1);
    if (!Number.isInteger(n) || n < 0) return `${signature}: opts.max_results must be a non-negative integer`;
    options.max = n;
  } else {
    lua.lua_pop(L, 1);
  }

  pushStringObject(L, KEY.sort);
  const sort = lua.lua_rawget(L, opts);
  if (sort !== T_NIL) {
    const name = sort === T_STRING ? jsString(lua.lua_tostring(L, -1)) : null;
    lua.lua_pop(L, 1);
    if (name === 'nearest') options.order = 'nearest';
    else if (name === 'farthest') options.order = 'farthest';
    else return `${signature}: opts.sort must be "nearest" or "farthest"`;
  } else {
    lua.lua_pop(L, 1);
  }
  return options;
}

/** A string (or, for ids, a number) or an array of them, at absolute `index`; null when it is neither. */
function stringList(L: any, index: number, type: number, numbers: boolean): { bytes: Uint8Array; text: string }[] | null {
  const one = (i: number, t: number) => {
    if (t === T_STRING) {
      const bytes: Uint8Array = lua.lua_tostring(L, i);
      return { bytes, text: jsString(bytes) };
    }
    if (numbers && t === T_NUMBER) return { bytes: new Uint8Array(0), text: String(lua.lua_tonumber(L, i)) };
    return null;
  };
  if (type !== T_TABLE) {
    const item = one(index, type);
    return item === null ? null : [item];
  }
  const list: { bytes: Uint8Array; text: string }[] = [];
  for (let i = 1; ; i++) {
    const t = lua.lua_rawgeti(L, index, i);
    if (t === T_NIL) {
      lua.lua_pop(L, 1);
      return list;
    }
    const item = one(-1, t);
    lua.lua_pop(L, 1);
    if (item === null) return null;
    list.push(item);
  }
}

/** True when the entity table at absolute `index` passes opts.type. */
function typeMatches(L: any, index: number, types: Uint8Array[]): boolean {
  pushStringObject(L, KEY.type);
  let ok = false;
  if (lua.lua_rawget(L, index) === T_STRING) {
    const bytes: Uint8Array = lua.lua_tostring(L, -1);
    for (const t of types) {
      if (sameBytes(bytes, t)) {
        ok = true;
        break;
      }
    }
  }
  lua.lua_pop(L, 1);
  return ok;
}

/**
 * The matches a query keeps, as (distance, slot) pairs; a slot numbers a
 * match in walk order. Unordered, the first `cap` matches are kept (which
 * ones come back is unspecified then, so the walk may stop there). Ordered,
 * the best `cap` so far are kept in a heap whose root is the worst of them,
 * so a match that cannot make the cut is known before its type or id is
 * read, and before its row is built.
 */
class Kept {
  readonly distances: number[] = [];
  readonly slots: number[] = [];

  constructor(
    readonly order: Order,
    readonly cap: number,
  ) {}

  get full(): boolean {
    return this.distances.length >= this.cap;
  }

  /** Whether a match at distance `d`, later in the walk than every kept one, would be kept. */
  wants(d: number): boolean {
    if (this.distances.length < this.cap) return true;
    if (this.order === 'any' || this.cap === 0) return false;
    const worst = this.distances[0] as number;
    // On a tie the earlier match stays.
    return this.order === 'nearest' ? d < worst : d > worst;
  }

  /** Keeps a match `wants` accepted. */
  add(d: number, slot: number): void {
    const { distances, slots } = this;
    if (this.order === 'any') {
      distances.push(d);
      slots.push(slot);
      return;
    }
    let i: number;
    if (distances.length < this.cap) {
      i = distances.length;
      distances.push(d);
      slots.push(slot);
      while (i > 0) {
        const parent = (i - 1) >> 1;
        if (!this.worse(i, parent)) break;
        this.swap(i, parent);
        i = parent;
      }
      return;
    }
    distances[0] = d;
    slots[0] = slot;
    i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= distances.length) break;
      const right = left + 1;
      const child = right < distances.length && this.worse(right, left) ? right : left;
      if (!this.worse(child, i)) break;
      this.swap(child, i);
      i = child;
    }
  }

  /** Indexes into distances/slots in the order asked for (unordered matches are kept in walk order). */
  ranked(): number[] {
    const picked = new Array<number>(this.distances.length);
    for (let i = 0; i < picked.length; i++) picked[i] = i;
    if (this.order !== 'any') picked.sort((a, b) => (this.worse(a, b) ? 1 : this.worse(b, a) ? -1 : 0));
    return picked;
  }

  /** Whether kept match `i` ranks after kept match `j`. */
  private worse(i: number, j: number): boolean {
    const di = this.distances[i] as number;
    const dj = this.distances[j] as number;
    if (di !== dj) return this.order === 'nearest' ? di > dj : di < dj;
    return (this.slots[i] as number) > (this.slots[j] as number);
  }

  private swap(i: number, j: number): void {
    const { distances, slots } = this;
    const d = distances[i] as number;
    distances[i] = distances[j] as number;
    distances[j] = d;
    const s = slots[i] as number;
    slots[i] = slots[j] as number;
    slots[j] = s;
  }
}

/** What each result table carries: `{ id, entity, distance }`, `{ id, entity }` or `{ id, x, y }`. */
type Row = 'entity_distance' | 'entity' | 'position';

/**
 * Walks the entity table at absolute `entities` and builds the result row of
 * each kept match at once, while its key, entity and coordinates are on the
 * stack, storing it at its slot in the table at absolute `rows`.
 */
function collect(L: any, entities: number, rows: number, shape: Shape, options: Options, kept: Kept, row: Row): number {
  if (kept.cap === 0) return 0;
  const { types, exclude } = options;
  lua.lua_pushnil(L);
  const key = lua.lua_gettop(L);
  const value = key + 1;
  let slot = 0;
  let walked = 0;
  while (lua.lua_next(L, entities) !== 0) {
    walked++;
    if (lua.lua_type(L, value) === T_TABLE) {
      pushStringObject(L, KEY.x);
      const xType = lua.lua_rawget(L, value);
      pushStringObject(L, KEY.y);
      const yType = lua.lua_rawget(L, value);
      if (xType === T_NUMBER && yType === T_NUMBER) {
        const d = within(shape, lua.lua_tonumber(L, value + 1), lua.lua_tonumber(L, value + 2));
        if (
          d >= 0 &&
          kept.wants(d) &&
          (types === null || typeMatches(L, value, types)) &&
          (exclude === null || !exclude.has(idText(L, key) ?? ''))
        ) {
          slot++;
          lua.lua_createtable(L, 0, 3);
          pushStringObject(L, KEY.id);
          lua.lua_pushvalue(L, key);
          lua.lua_rawset(L, -3);
          if (row === 'position') {
            // The entity's own values, so an integer coordinate stays an integer.
            pushStringObject(L, KEY.x);
            lua.lua_pushvalue(L, value + 1);
            lua.lua_rawset(L, -3);
            pushStringObject(L, KEY.y);
            lua.lua_pushvalue(L, value + 2);
            lua.lua_rawset(L, -3);
          } else {
            pushStringObject(L, KEY.entity);
            lua.lua_pushvalue(L, value);
            lua.lua_rawset(L, -3);
            if (row === 'entity_distance') {
              pushStringObject(L, KEY.distance);
              lua.lua_pushnumber(L, d);
              lua.lua_rawset(L, -3);
            }
          }
          lua.lua_rawseti(L, rows, slot);
          kept.add(d, slot);
          if (kept.order === 'any' && kept.full) {
            lua.lua_settop(L, key - 1);
            return walked;
          }
        }
      }
    }
    lua.lua_settop(L, key);
  }
  return walked;
}

/**
 * Runs a query over the entity table at absolute `entities` and pushes its
 * result array. Unordered, the rows are already the array; ordered, they are
 * copied into a new one by rank (rows of matches that fell out of a capped
 * heap are left behind).
 */
function queryTable(L: any, entities: number, shape: Shape, options: Options, kept: Kept, row: Row, charge: Charge | undefined): number {
  lua.lua_createtable(L, 0, 0);
  const rows = lua.lua_gettop(L);
  const walked = collect(L, entities, rows, shape, options, kept, row);
  charge?.(L, walked * ENTITY_COST);
  if (kept.order === 'any') return 1;
  const picked = kept.ranked();
  lua.lua_createtable(L, picked.length, 0);
  for (let k = 0; k < picked.length; k++) {
    lua.lua_rawgeti(L, rows, kept.slots[picked[k] as number] as number);
    lua.lua_rawseti(L, rows + 1, k + 1);
  }
  return 1;
}

/** Runs a query over the zone's mirrors and pushes its result array (entities are fresh tables). */
function queryMirrors(L: any, zone: ZoneSpatial, shape: Shape, options: Options, kept: Kept, row: Row, charge: Charge | undefined): number {
  const mirrors = kept.cap === 0 ? [] : zone.mirrors();
  let walked = 0;
  for (let slot = 0; slot < mirrors.length; slot++) {
    walked++;
    const { entity, id } = mirrors[slot] as { id: string; entity: JsonObject };
    const { x, y, type } = entity as { x?: JsonValue; y?: JsonValue; type?: JsonValue };
    if (typeof x !== 'number' || typeof y !== 'number') continue;
    const d = within(shape, x, y);
    if (d < 0 || !kept.wants(d)) continue;
    if (options.typeNames !== null && (typeof type !== 'string' || !options.typeNames.has(type))) continue;
    if (options.exclude !== null && options.exclude.has(id)) continue;
    kept.add(d, slot);
    if (kept.order === 'any' && kept.full) break;
  }
  charge?.(L, walked * ENTITY_COST);
  const picked = kept.ranked();
  lua.lua_createtable(L, picked.length, 0);
  for (let k = 0; k < picked.length; k++) {
    const i = picked[k] as number;
    const mirror = mirrors[kept.slots[i] as number] as { id: string; entity: JsonObject };
    lua.lua_createtable(L, 0, 3);
    pushStringObject(L, KEY.id);
    pushStringObject(L, stringObject(mirror.id));
    lua.lua_rawset(L, -3);
    pushStringObject(L, KEY.entity);
    pushJson(L, mirror.entity);
    lua.lua_rawset(L, -3);
    if (row === 'entity_distance') {
      pushStringObject(L, KEY.distance);
      lua.lua_pushnumber(L, kept.distances[i] as number);
      lua.lua_rawset(L, -3);
    }
    lua.lua_rawseti(L, -2, k + 1);
  }
  return 1;
}

/** The numbers at stack `first`.. named `names`, or the envelope's message naming the first that is not one. */
function numbers(L: any, first: number, names: string[], signature: string): number[] | string {
  const out: number[] = [];
  for (let i = 0; i < names.length; i++) {
    if (!isNumber(L, first + i)) return `${signature}: ${names[i]} must be a number`;
    out.push(lua.lua_tonumber(L, first + i));
  }
  return out;
}

/** x and y of the table argument at `index`, or the envelope's message. */
function point(L: any, index: number, name: string, signature: string): { x: number; y: number } | string {
  if (lua.lua_type(L, index) !== T_TABLE) return `${signature}: ${name} must be a table with numeric x and y`;
  const t = lua.lua_absindex(L, index);
  pushStringObject(L, KEY.x);
  const xt = lua.lua_rawget(L, t);
  pushStringObject(L, KEY.y);
  const yt = lua.lua_rawget(L, t);
  const x = lua.lua_tonumber(L, -2) as number;
  const y = lua.lua_tonumber(L, -1) as number;
  lua.lua_pop(L, 2);
  if (xt !== T_NUMBER) return `${signature}: ${name}.x must be a number`;
  if (yt !== T_NUMBER) return `${signature}: ${name}.y must be a number`;
  return { x, y };
}

function distanceBetween(a: { x: number; y: number }, b: { x: number; y: number }): number {
  const dx = a.x - b.x;
  const dy = a.y - b.y;
  return Math.sqrt(dx * dx + dy * dy);
}

const SIG = {
  queryRadiusTable: 'game.spatial.query_radius(entities, x, y, r[, opts])',
  queryRadiusZone: 'game.spatial.query_radius(x, y, r)',
  queryRect: 'game.spatial.query_rect(x1, y1, x2, y2)',
  nearest: 'game.spatial.nearest(entities, x, y, n[, opts])',
  neighboursRadius: 'game.spatial.neighbours_radius(x, y, r[, opts])',
  neighboursRect: 'game.spatial.neighbours_rect(x1, y1, x2, y2[, opts])',
  inRange: 'game.spatial.in_range(a, b, range)',
  distance: 'game.spatial.distance(a, b)',
};

const OUTSIDE_ZONE = 'is only available in a zone script';
const ARG1_QUERY_RADIUS =
  'game.spatial.query_radius: argument 1 must be an entity table (query_radius(entities, x, y, r[, opts])) or x (query_radius(x, y, r))';

/** Pushes the zone's own entity table; false (nothing pushed) when the zone has none. */
function pushOwn(L: any, zone: ZoneSpatial): boolean {
  zone.pushOwnEntities(L);
  if (lua.lua_type(L, -1) === T_TABLE) return true;
  lua.lua_pop(L, 1);
  return false;
}

function emptyArray(L: any): number {
  lua.lua_createtable(L, 0, 0);
  return 1;
}

/**
 * Pushes a new `spatial` table (to be stored as game.spatial) onto L's stack. `zone` is null outside a zone VM.
 * `charge` receives the cost of every walk (ENTITY_COST per entity or mirror looked at); the host passes
 * `(L, n) => sandbox.charge(L, n)`. Without it the walks are free and only the count hook checks the deadline.
 */
export function pushSpatialTable(L: any, zone: ZoneSpatial | null, charge?: Charge): void {
  const functions: Record<string, LuaFunction> = {
    query_radius: (L) => {
      const first = lua.lua_type(L, 1);
      if (first === T_TABLE) {
        const args = numbers(L, 2, ['x', 'y', 'r'], SIG.queryRadiusTable);
        if (typeof args === 'string') return envelope(L, args);
        const options = readOptions(L, 5, SIG.queryRadiusTable);
        if (typeof options === 'string') return envelope(L, options);
        lua.lua_settop(L, 1);
        const kept = new Kept(options.order, options.max);
        return queryTable(L, 1, circle(args[0] as number, args[1] as number, args[2] as number), options, kept, 'entity_distance', charge);
      }
      if (first !== T_NUMBER) {
        return envelope(L, ARG1_QUERY_RADIUS);
      }
      const args = numbers(L, 1, ['x', 'y', 'r'], SIG.queryRadiusZone);
      if (typeof args === 'string') return envelope(L, args);
      if (zone === null) return envelope(L, `${SIG.queryRadiusZone} ${OUTSIDE_ZONE}`);
      lua.lua_settop(L, 0);
      if (!pushOwn(L, zone)) return emptyArray(L);
      return queryTable(L, 1, circle(args[0] as number, args[1] as number, args[2] as number), NO_OPTIONS, new Kept('any', Infinity), 'position', charge);
    },

    query_rect: (L) => {
      const args = numbers(L, 1, ['x1', 'y1', 'x2', 'y2'], SIG.queryRect);
      if (typeof args === 'string') return envelope(L, args);
      if (zone === null) return envelope(L, `${SIG.queryRect} ${OUTSIDE_ZONE}`);
      lua.lua_settop(L, 0);
      if (!pushOwn(L, zone)) return emptyArray(L);
      const shape = rect(args[0] as number, args[1] as number, args[2] as number, args[3] as number);
      return queryTable(L, 1, shape, NO_OPTIONS, new Kept('any', Infinity), 'position', charge);
    },

    nearest: (L) => {
      if (lua.lua_type(L, 1) !== T_TABLE) return envelope(L, `${SIG.nearest}: entities must be a table`);
      const args = numbers(L, 2, ['x', 'y', 'n'], SIG.nearest);
      if (typeof args === 'string') return envelope(L, args);
      const options = readOptions(L, 5, SIG.nearest);
      if (typeof options === 'string') return envelope(L, options);
      const n = (args[2] as number) >= 1 ? Math.floor(args[2] as number) : 0;
      lua.lua_settop(L, 1);
      // Closest first whatever opts.sort says: that is what nearest means.
      const kept = new Kept('nearest', Math.min(n, options.max));
      return queryTable(L, 1, circle(args[0] as number, args[1] as number, Infinity), options, kept, 'entity_distance', charge);
    },

    neighbours_radius: (L) => {
      const args = numbers(L, 1, ['x', 'y', 'r'], SIG.neighboursRadius);
      if (typeof args === 'string') return envelope(L, args);
      const options = readOptions(L, 4, SIG.neighboursRadius);
      if (typeof options === 'string') return envelope(L, options);
      if (zone === null) return envelope(L, `${SIG.neighboursRadius} ${OUTSIDE_ZONE}`);
      const kept = new Kept(options.order, options.max);
      return queryMirrors(L, zone, circle(args[0] as number, args[1] as number, args[2] as number), options, kept, 'entity_distance', charge);
    },

    neighbours_rect: (L) => {
      const args = numbers(L, 1, ['x1', 'y1', 'x2', 'y2'], SIG.neighboursRect);
      if (typeof args === 'string') return envelope(L, args);
      const options = readOptions(L, 5, SIG.neighboursRect);
      if (typeof options === 'string') return envelope(L, options);
      if (zone === null) return envelope(L, `${SIG.neighboursRect} ${OUTSIDE_ZONE}`);
      const shape = rect(args[0] as number, args[1] as number, args[2] as number, args[3] as number);
      // A rectangle has no centre to sort by; opts.sort is ignored here.
      return queryMirrors(L, zone, shape, options, new Kept('any', options.max), 'entity', charge);
    },

    in_range: (L) => {
      const a = point(L, 1, 'a', SIG.inRange);
      if (typeof a === 'string') return envelope(L, a);
      const b = point(L, 2, 'b', SIG.inRange);
      if (typeof b === 'string') return envelope(L, b);
      if (!isNumber(L, 3)) return envelope(L, `${SIG.inRange}: range must be a number`);
      lua.lua_pushboolean(L, distanceBetween(a, b) <= (lua.lua_tonumber(L, 3) as number));
      return 1;
    },

    distance: (L) => {
      const a = point(L, 1, 'a', SIG.distance);
      if (typeof a === 'string') return envelope(L, a);
      const b = point(L, 2, 'b', SIG.distance);
      if (typeof b === 'string') return envelope(L, b);
      lua.lua_pushnumber(L, distanceBetween(a, b));
      return 1;
    },
  };

  lua.lua_createtable(L, 0, 8);
  for (const [name, fn] of Object.entries(functions)) {
    pushStringObject(L, stringObject(name));
    lua.lua_pushcfunction(L, fn);
    lua.lua_rawset(L, -3);
  }
}
