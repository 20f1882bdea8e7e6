/**
 * A VM snapshot: what a refused or failed call must not leave behind,
 * and what a bot's `think` must not keep (11).
 *
 * fengari runs one live VM, so "revert the VM" means remembering, before the
 * call, the contents of every table and the upvalues of every Lua function
 * reachable from the globals and the host's state, and writing them back
 * after it. Tables keep their identity (a restored table is the same
 * object, with its old keys, values and metatable), so every reference the
 * script or the host holds stays valid; whatever the call created and hung
 * on those tables simply becomes unreachable again.
 *
 * With the fengari internals the copies are JavaScript arrays and a write
 * back is one Map lookup per entry while nothing changed (a bot is written
 * back after every think); through the public API they are Lua tables,
 * walked with a C call per entry.
 *
 * What it does not reach: values kept only in a coroutine's stack, and the
 * host's side effects (a `game.*` call already made). The walk is bounded:
 * a VM holding more than MAX_ENTRIES entries is not snapshotted at all (the
 * call then runs without a revert, and the caller logs it), so a script
 * cannot make every join cost a second of its worker.
 */
import { internals, type KeptState } from './fengari-internals';
import { lauxlib, lua } from './vm';

/** Table entries and upvalues a snapshot copies at most. */
export const SNAPSHOT_MAX_ENTRIES = 200_000;

/** The objects a walk reached, as `lua_topointer` gives them. */
export type Reached = ReadonlySet<unknown>;

export class VmSnapshot {
  readonly #L: any;
  /** Registry slot of a table: [1] the objects in walk order, [2] what each held, [3] each table's metatable. */
  #ref: number;
  /** Per object: -1 for a table, else the function's upvalue count. */
  readonly #kinds: number[];
  /** With the fengari internals, the copies themselves (and `#ref` holds only the objects). */
  readonly #kept: KeptState | null;

  private constructor(L: any, ref: number, kinds: number[], kept: KeptState | null) {
    this.#L = L;
    this.#ref = ref;
    this.#kinds = kinds;
    this.#kept = kept;
  }

  /**
   * Every table and Lua function reachable from the global table now: a
   * bot VM's library, taken before its script's body runs, which later
   * snapshots of it leave out.
   */
  static reach(L: any): Reached {
    const top = lua.lua_gettop(L);
    const seen = new Set<unknown>();
    VmSnapshot.#walk(L, null, null, seen, false);
    lua.lua_settop(L, top);
    return seen;
  }

  /**
   * Copies the global table and everything reachable from it and from the
   * value at `rootIndex` (the state; null for none), but what `leave` holds
   * (the global table itself is always copied). Null when the VM is over
   * SNAPSHOT_MAX_ENTRIES. Leaves the stack as it found it.
   */
  static take(L: any, rootIndex: number | null, leave: Reached | null = null): VmSnapshot | null {
    const top = lua.lua_gettop(L);
    const root = rootIndex === null ? null : lua.lua_absindex(L, rootIndex);
    const walked = VmSnapshot.#walk(L, root, leave, new Set(), internals === null);
    if (!walked) {
      lua.lua_settop(L, top);
      return null;
    }
    const kept = internals ? internals.keepState(L, walked.objects) : null;
    lua.lua_settop(L, walked.anchor);
    const ref = lauxlib.luaL_ref(L, lua.LUA_REGISTRYINDEX);
    lua.lua_settop(L, top);
    return new VmSnapshot(L, ref, walked.kinds, kept);
  }

  /**
   * The walk: pushes an anchor table holding [1] the objects reached (in
   * walk order), and when `copy` [2] what each held and [3] each table's
   * metatable; returns the stack indexes, or null past the entry bound.
   */
  static #walk(L: any, root: number | null, leave: Reached | null, seen: Set<unknown>, copy: boolean): { anchor: number; objects: number; kinds: number[] } | null {
    if (!lua.lua_checkstack(L, 12)) return null;
    lua.lua_createtable(L, 3, 0);
    const anchor = lua.lua_gettop(L);
    lua.lua_newtable(L);
    const objects = lua.lua_gettop(L);
    // Without `copy` (the fengari internals copy in JavaScript, or `reach`) only the objects are collected.
    const saved = copy ? (lua.lua_newtable(L), lua.lua_gettop(L)) : 0;
    const metas = copy ? (lua.lua_newtable(L), lua.lua_gettop(L)) : 0;

    const kinds: number[] = [];
    let count = 0;
    // Appends the value at `index` to the walk when it is a table or a Lua function not seen yet (nor left out).
    const visit = (index: number, always = false): void => {
      const t = lua.lua_type(L, index);
      if (t !== lua.LUA_TTABLE && (t !== lua.LUA_TFUNCTION || lua.lua_iscfunction(L, index))) return;
      const p = lua.lua_topointer(L, index);
      if (seen.has(p) || (!always && leave?.has(p))) return;
      seen.add(p);
      lua.lua_pushvalue(L, index);
      lua.lua_rawseti(L, objects, ++count);
    };

    lua.lua_pushglobaltable(L);
    visit(-1, true);
    lua.lua_pop(L, 1);
    if (root !== null) visit(root);

    let entries = 0;
    for (let i = 1; i <= count; i++) {
      lua.lua_rawgeti(L, objects, i);
      const object = lua.lua_gettop(L);
      if (lua.lua_type(L, object) === lua.LUA_TTABLE) {
        kinds[i - 1] = -1;
        const into = copy ? (lua.lua_newtable(L), lua.lua_gettop(L)) : 0;
        lua.lua_pushnil(L);
        while (lua.lua_next(L, object) !== 0) {
          visit(-2);
          visit(-1);
          if (copy) {
            lua.lua_pushvalue(L, -2);
            lua.lua_pushvalue(L, -2);
            lua.lua_rawset(L, into);
          }
          lua.lua_pop(L, 1);
          if (++entries > SNAPSHOT_MAX_ENTRIES) return null;
        }
        if (copy) lua.lua_rawseti(L, saved, i);
        if (lua.lua_getmetatable(L, object)) {
          visit(-1);
          if (copy) lua.lua_rawseti(L, metas, i);
        }
      } else {
        const upvalues = copy ? (lua.lua_newtable(L), lua.lua_gettop(L)) : 0;
        let n = 0;
        while (lua.lua_getupvalue(L, object, n + 1) !== null) {
          n++;
          visit(-1);
          if (copy) lua.lua_rawseti(L, upvalues, n);
          else lua.lua_pop(L, 1);
        }
        entries += n;
        kinds[i - 1] = n;
        if (copy) lua.lua_rawseti(L, saved, i);
      }
      lua.lua_settop(L, object - 1);
      if (entries > SNAPSHOT_MAX_ENTRIES) return null;
    }
    lua.lua_pushvalue(L, objects);
    lua.lua_rawseti(L, anchor, 1);
    if (copy) {
      lua.lua_pushvalue(L, saved);
      lua.lua_rawseti(L, anchor, 2);
      lua.lua_pushvalue(L, metas);
      lua.lua_rawseti(L, anchor, 3);
    }
    return { anchor, objects, kinds };
  }

  /** Writes everything back as it was when taken, then releases the snapshot. Leaves the stack as it found it. */
  restore(): void {
    this.rewind();
    this.release();
  }

  /** Writes everything back as it was when taken, and keeps the snapshot to do it again. */
  rewind(): void {
    const L = this.#L;
    if (this.#ref === lua.LUA_NOREF) return;
    if (this.#kept) return internals!.restoreState(L, this.#kept);
    const top = lua.lua_gettop(L);
    lua.lua_checkstack(L, 12);
    lua.lua_rawgeti(L, lua.LUA_REGISTRYINDEX, this.#ref);
    const anchor = lua.lua_gettop(L);
    lua.lua_rawgeti(L, anchor, 1);
    const objects = lua.lua_gettop(L);
    lua.lua_rawgeti(L, anchor, 2);
    const saved = lua.lua_gettop(L);
    lua.lua_rawgeti(L, anchor, 3);
    const metas = lua.lua_gettop(L);
    for (let i = 1; i <= this.#kinds.length; i++) {
      const kind = this.#kinds[i - 1]!;
      lua.lua_rawgeti(L, objects, i);
      const object = lua.lua_gettop(L);
      lua.lua_rawgeti(L, saved, i);
      const copy = lua.lua_gettop(L);
      if (kind < 0) {
        // Keys the call added are collected first: clearing a field while `next` walks past it is not safe in fengari.
        lua.lua_newtable(L);
        const added = lua.lua_gettop(L);
        let n = 0;
        lua.lua_pushnil(L);
        while (lua.lua_next(L, object) !== 0) {
          lua.lua_pop(L, 1);
          lua.lua_pushvalue(L, -1);
          if (lua.lua_rawget(L, copy) === lua.LUA_TNIL) {
            lua.lua_pushvalue(L, -2);
            lua.lua_rawseti(L, added, ++n);
          }
          lua.lua_pop(L, 1);
        }
        for (let k = 1; k <= n; k++) {
          lua.lua_rawgeti(L, added, k);
          lua.lua_pushnil(L);
          lua.lua_rawset(L, object);
        }
        lua.lua_pushnil(L);
        while (lua.lua_next(L, copy) !== 0) {
          lua.lua_pushvalue(L, -2);
          lua.lua_insert(L, -2);
          lua.lua_rawset(L, object);
        }
        lua.lua_rawgeti(L, metas, i);
        lua.lua_setmetatable(L, object);
      } else {
        for (let n = 1; n <= kind; n++) {
          lua.lua_rawgeti(L, copy, n);
          if (lua.lua_setupvalue(L, object, n) === null) lua.lua_pop(L, 1);
        }
      }
      lua.lua_settop(L, object - 1);
    }
    lua.lua_settop(L, top);
  }

  /** Drops the copies (the call is kept). */
  release(): void {
    if (this.#ref === lua.LUA_NOREF) return;
    lauxlib.luaL_unref(this.#L, lua.LUA_REGISTRYINDEX, this.#ref);
    this.#ref = lua.LUA_NOREF;
  }
}
