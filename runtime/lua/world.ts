/**
 * A world mode's VMs: one world VM owning the global state, and one zone VM
 * per running zone owning that zone's entity table and zone state. Both run
 * the same mode script; the host (host/realtime/world/) decides which
 * callbacks run when, moves entities between zones and turns entity tables
 * into `world.tick` deltas.
 */
import { type CallResult, type JoinResult, type JsonObject, type JsonValue, type MatchOutcome, type ModeInfo, type ScriptSource, type Budgets, type WorldServices, type ZoneServices } from './host-interface';
import { RegistrySlot, ScriptInstance } from './instance';
import { diffEntities, isObjectJson, MarshalError, numberPairs, pushJson, pushStringObject, stringObject, toJson, toJsonText, writeLog, type Box, type EntitySink, type JsonRecord, type LuaStringObject, type WriteLog } from './marshal';
import { installGameTable } from './game-table';
import { lua } from './vm';


type WorldCallback =
  | 'init'
  | 'join'
  | 'leave'
  | 'spawn_position'
  | 'post_tick'
  | 'generate_world'
  | 'phases'
  | 'spawn_templates'
  | 'terrain_provider'
  | 'on_zone_loaded'
  | 'on_zone_unloaded'
  | 'on_world_recovered'
  | 'on_phase_started'
  | 'on_phase_ended';

type ZoneCallback = 'zone_tick' | 'handle_input' | 'handle_effects';

const NAMES = {
  init: stringObject('init'),
  join: stringObject('join'),
  leave: stringObject('leave'),
  spawn_position: stringObject('spawn_position'),
  post_tick: stringObject('post_tick'),
  generate_world: stringObject('generate_world'),
  phases: stringObject('phases'),
  spawn_templates: stringObject('spawn_templates'),
  terrain_provider: stringObject('terrain_provider'),
  on_zone_loaded: stringObject('on_zone_loaded'),
  on_zone_unloaded: stringObject('on_zone_unloaded'),
  on_world_recovered: stringObject('on_world_recovered'),
  zone_tick: stringObject('zone_tick'),
  handle_input: stringObject('handle_input'),
  handle_effects: stringObject('handle_effects'),
  _finished: stringObject('_finished'),
  _result: stringObject('_result'),
  _vote: stringObject('_vote'),
  _keep_hot: stringObject('_keep_hot'),
  x: stringObject('x'),
  y: stringObject('y'),
};

/** The reference's per-callback ceilings for the world callbacks that have no tick to share. */
const DECLARATION_MS = 2000;
const GENERATE_MS = 5000;
const SPAWN_MS = 100;

export interface WorldVmOptions {
  source: ScriptSource;
  mode: ModeInfo;
  worldId: string;
  services: WorldServices;
  budgets?: Partial<Budgets>;
}

/** What `post_tick` left on the state. */
export interface PostTick {
  call: CallResult;
  finished: MatchOutcome | null;
  /** `_vote`: a vote config as JSON, or null. */
  vote: JsonValue;
}

export class WorldVm extends ScriptInstance<WorldCallback> {
  readonly worldId: string;
  readonly mode: ModeInfo;
  private readonly state: RegistrySlot;
  private readonly ids = new Map<string, LuaStringObject>();

  private constructor(options: WorldVmOptions) {
    super({ source: options.source, file: options.mode.file, services: options.services, budgets: options.budgets, logFields: { world_id: options.worldId, mode: options.mode.name } });
    this.worldId = options.worldId;
    this.mode = options.mode;
    this.state = new RegistrySlot(this.L);
    installGameTable(this.sandbox, { kind: 'world', worldId: this.worldId, mode: this.mode.name, file: this.mode.file, services: options.services });
  }

  /** Builds the VM and runs the body; throws naming the script when the body does not load. */
  static create(options: WorldVmOptions): WorldVm {
    const vm = new WorldVm(options);
    const loaded = vm.evaluate();
    if (!loaded.ok) throw new Error(`${options.mode.file}: ${loaded.error}`);
    return vm;
  }

  /**
   * An optional declaration (`phases`, `spawn_templates`, `terrain_provider`)
   * called with an empty table before `init`, so the state it could touch
   * does not exist yet: what it returns, as JSON, or undefined.
   */
  declaration(name: 'phases' | 'spawn_templates' | 'terrain_provider'): JsonValue | undefined {
    this.sandbox.cap = Infinity;
    if (!this.pushCallback(NAMES[name])) return undefined;
    pushJson(this.L, {});
    return this.valueCall(name, 1, this.budgets.heavy, Math.max(this.budgets.heavyMs, DECLARATION_MS));
  }

  /** `generate_world(seed, {})`: per-zone seeds keyed `"x,y"`, or {} without the callback. */
  generateWorld(seed: number): JsonObject {
    this.sandbox.cap = Infinity;
    if (!this.pushCallback(NAMES.generate_world)) return {};
    pushJson(this.L, seed);
    pushJson(this.L, {});
    const value = this.valueCall('generate_world', 2, this.budgets.heavy * 5, Math.max(this.budgets.heavyMs, GENERATE_MS));
    return isObjectJson(value) ? value : {};
  }

  init(): CallResult {
    this.sandbox.cap = Infinity;
    if (!this.pushCallback(NAMES.init)) return this.fail('init', 'error', 'the script defines no init function');
    pushJson(this.L, { ...this.mode.operator, lua_script: this.mode.file, match_id: this.worldId, mode: this.mode.name });
    return this.stateCall('init', 1, this.budgets.heavy, this.budgets.heavyMs);
  }

  /**
   * `join(player_id, state[, ctx])`. As for matches (our choice where the
   * reference's worlds have no refusal path): nil or false [, reason]
   * refuses the player.
   */
  join(playerId: string, ctx: JsonObject): JoinResult {
    return this.joinCall('join', this.idOf(playerId), ctx, this.state);
  }

  leave(playerId: string): CallResult {
    const id = this.idOf(playerId);
    this.ids.delete(playerId);
    this.sandbox.cap = Infinity;
    if (!this.pushCallback(NAMES.leave)) return { ok: true };
    pushStringObject(this.L, id);
    this.state.push();
    return this.stateCall('leave', 2, this.budgets.light, this.budgets.lightMs);
  }

  /** `spawn_position(player_id, state)`: missing or non-number fields become 0, a failed call (0, 0). */
  spawnPosition(playerId: string): { x: number; y: number } {
    const L = this.L;
    this.sandbox.cap = Infinity;
    if (!this.pushCallback(NAMES.spawn_position)) return { x: 0, y: 0 };
    pushStringObject(L, this.idOf(playerId));
    this.state.push();
    const out = this.sandbox.call(2, this.budgets.light, Math.min(this.budgets.lightMs, SPAWN_MS));
    if (!out.ok) {
      this.fail('spawn_position', out.kind, out.message);
      return { x: 0, y: 0 };
    }
    let at = { x: 0, y: 0 };
    if (out.results > 0 && lua.lua_type(L, -out.results) === lua.LUA_TTABLE) at = positionOf(L, lua.lua_gettop(L) - out.results + 1);
    lua.lua_settop(L, 0);
    return at;
  }

  /**
   * Hot reload at the start of a world tick, before its zones step, so what
   * the edit declares holds for the whole tick; true when the new body was
   * taken (a broken file keeps the old code and answers false).
   */
  reloadIfStale(): boolean {
    return this.stale() && this.reload().ok;
  }

  /** `post_tick(tick, state)` under the tick's own deadline; then `_finished`/`_result` and `_vote`. */
  postTick(tick: number): PostTick {
    if (this.stale()) this.reevaluate();
    this.sandbox.cap = Date.now() + this.budgets.heavyMs;
    let call: CallResult = { ok: true };
    if (this.pushCallback(NAMES.post_tick)) {
      pushJson(this.L, tick);
      this.state.push();
      call = this.stateCall('post_tick', 2, this.budgets.heavy, this.budgets.heavyMs);
    }
    const finished = this.finished();
    return { call, finished, vote: finished ? null : this.stateField(NAMES._vote) };
  }

  /** `on_zone_loaded(cx, cy, state)` → the zone's initial `zone_state` (and optionally a new state). */
  zoneLoaded(cx: number, cy: number): JsonValue | undefined {
    const L = this.L;
    this.sandbox.cap = Infinity;
    if (!this.pushCallback(NAMES.on_zone_loaded)) return undefined;
    pushJson(L, cx);
    pushJson(L, cy);
    this.state.push();
    const out = this.sandbox.call(3, this.budgets.light, this.budgets.lightMs);
    if (!out.ok) {
      this.fail('on_zone_loaded', out.kind, out.message);
      return undefined;
    }
    const base = lua.lua_gettop(L) - out.results + 1;
    if (out.results >= 2 && lua.lua_type(L, base + 1) === lua.LUA_TTABLE) {
      lua.lua_pushvalue(L, base + 1);
      this.state.store();
    }
    const zoneState = out.results >= 1 ? this.json('on_zone_loaded', base) : undefined;
    lua.lua_settop(L, 0);
    return zoneState;
  }

  zoneUnloaded(cx: number, cy: number): void {
    this.sandbox.cap = Infinity;
    if (!this.pushCallback(NAMES.on_zone_unloaded)) return;
    pushJson(this.L, cx);
    pushJson(this.L, cy);
    this.state.push();
    this.stateCall('on_zone_unloaded', 3, this.budgets.light, this.budgets.lightMs);
  }

  /** `on_world_recovered(snapshot, state)` after a restart brought a persistent world back. */
  recovered(snapshot: JsonObject): void {
    this.sandbox.cap = Infinity;
    if (!this.pushCallback(NAMES.on_world_recovered)) return;
    pushJson(this.L, snapshot);
    this.state.push();
    this.stateCall('on_world_recovered', 2, this.budgets.heavy, Math.max(this.budgets.heavyMs, DECLARATION_MS));
  }

  phase(callback: 'on_phase_started' | 'on_phase_ended', name: string): CallResult {
    return this.phaseCall(callback, name, this.state);
  }

  finished(): MatchOutcome | null {
    if (this.stateField(NAMES._finished) !== true) return null;
    const result = this.stateField(NAMES._result);
    return { result: isObjectJson(result) ? result : {} };
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.ids.clear();
    this.state.clear();
  }

  private idOf(playerId: string): LuaStringObject {
    let id = this.ids.get(playerId);
    if (!id) {
      id = stringObject(playerId);
      this.ids.set(playerId, id);
    }
    return id;
  }

  private stateField(key: LuaStringObject): JsonValue {
    if (this.state.empty) return null;
    const L = this.L;
    this.state.push();
    pushStringObject(L, key);
    lua.lua_rawget(L, -2);
    let value: JsonValue = null;
    try {
      value = toJson(L, -1) ?? null;
    } catch (err) {
      if (!(err instanceof MarshalError)) throw err;
    }
    lua.lua_settop(L, 0);
    return value;
  }

  private stateCall(callback: WorldCallback, nargs: number, budget: number, ms: number): CallResult {
    const out = this.tableCall(callback, this.state, nargs, budget, ms);
    lua.lua_settop(this.L, 0);
    return out.ok ? { ok: true } : out;
  }

  /** A call whose first result is read as JSON. */
  private valueCall(callback: WorldCallback, nargs: number, budget: number, ms: number): JsonValue | undefined {
    const out = this.sandbox.call(nargs, budget, ms);
    if (!out.ok) {
      this.fail(callback, out.kind, out.message);
      return undefined;
    }
    const value = out.results > 0 ? this.json(callback, lua.lua_gettop(this.L) - out.results + 1) : undefined;
    lua.lua_settop(this.L, 0);
    return value;
  }

  private json(callback: WorldCallback, index: number): JsonValue | undefined {
    try {
      return toJson(this.L, index);
    } catch (err) {
      if (!(err instanceof MarshalError)) throw err;
      this.report(callback, 'malformed', err.message);
      return undefined;
    }
  }
}

/** Reads `x`/`y` of the table at `index`; anything but a number is 0. */
function positionOf(L: any, index: number): { x: number; y: number } {
  const read = (key: LuaStringObject) => {
    pushStringObject(L, key);
    const n = lua.lua_rawget(L, index) === lua.LUA_TNUMBER ? lua.lua_tonumber(L, -1) : 0;
    lua.lua_pop(L, 1);
    return Number.isFinite(n) ? n : 0;
  };
  return { x: read(NAMES.x), y: read(NAMES.y) };
}

export interface ZoneVmOptions {
  source: ScriptSource;
  mode: ModeInfo;
  worldId: string;
  zone: readonly [number, number];
  services: ZoneServices;
  budgets?: Partial<Budgets>;
  /** The initial zone state (`generate_world`'s `game_state`, `on_zone_loaded`, a snapshot); nil without one. */
  zoneState?: JsonValue;
  /** Entities the zone starts with (a snapshot). */
  entities?: Record<string, JsonObject>;
}

/** One input of a tick, and the `seq` its frame carried (null without one). */
export interface ZoneInput {
  playerId: string;
  input: JsonObject;
  seq: number | null;
}

export class ZoneVm extends ScriptInstance<ZoneCallback> {
  readonly zone: readonly [number, number];
  private readonly entities: RegistrySlot;
  private readonly zoneState: RegistrySlot;
  /** Milliseconds spent putting refused inputs' writes back, for the tick's cost split. */
  undoMs = 0;

  private constructor(options: ZoneVmOptions) {
    const label = `${options.zone[0]},${options.zone[1]}`;
    super({ source: options.source, file: options.mode.file, services: options.services, budgets: options.budgets, logFields: { world_id: options.worldId, zone: label, mode: options.mode.name } });
    this.zone = options.zone;
    this.entities = new RegistrySlot(this.L);
    this.zoneState = new RegistrySlot(this.L);
    installGameTable(this.sandbox, { kind: 'zone', worldId: options.worldId, mode: options.mode.name, file: options.mode.file, services: options.services });
    pushJson(this.L, options.entities ?? {});
    // An empty JSON object decodes as an empty Lua table either way.
    this.entities.store();
    if (options.zoneState !== undefined && options.zoneState !== null) {
      pushJson(this.L, options.zoneState);
      this.zoneState.store();
    }
  }

  static create(options: ZoneVmOptions): ZoneVm {
    const vm = new ZoneVm(options);
    const loaded = vm.evaluate();
    if (!loaded.ok) throw new Error(`${options.mode.file}: ${loaded.error}`);
    return vm;
  }

  /**
   * One zone tick's script steps, under one deadline: `zone_tick`, then the
   * inputs in arrival order, then the effects neighbours sent. Answers each
   * input player's consumed `seq` (the frame's own, or the one the script
   * returned).
   */
  tick(inputs: readonly ZoneInput[], effects: readonly JsonObject[]): { call: CallResult; consumed: Map<string, number> } {
    if (this.stale()) {
      this.sandbox.cap = Infinity;
      this.reevaluate();
    }
    this.sandbox.cap = Date.now() + this.budgets.heavyMs;
    let call: CallResult = { ok: true };
    if (this.pushCallback(NAMES.zone_tick)) {
      this.entities.push();
      this.zoneState.push();
      const out = this.tableCall('zone_tick', this.entities, 2, this.budgets.heavy, this.budgets.heavyMs);
      if (out.ok && out.results >= 2) {
        const second = lua.lua_gettop(this.L) - out.results + 2;
        if (lua.lua_type(this.L, second) !== lua.LUA_TNIL) {
          lua.lua_pushvalue(this.L, second);
          this.zoneState.store();
        }
      }
      lua.lua_settop(this.L, 0);
      call = out.ok ? { ok: true } : out;
    }
    const consumed = new Map<string, number>();
    for (const input of inputs) {
      const seq = this.input(input);
      if (seq !== null) consumed.set(input.playerId, Math.max(consumed.get(input.playerId) ?? -1, seq));
    }
    if (effects.length > 0) this.effects(effects);
    return { call, consumed };
  }

  /**
   * `handle_input(player_id, input, entities)`. A rejected input (an error,
   * nothing or a non-table returned) leaves the entity table as it was
   * before the call: the writes the call made to it (and to the tables it
   * reaches) are undone in place. Globals the call changed are not restored
   * (decision 0038). Without fengari's internals the table is copied as JSON
   * text before the call and put back from it instead.
   */
  private input({ playerId, input, seq }: ZoneInput): number | null {
    const L = this.L;
    if (!this.pushCallback(NAMES.handle_input)) return seq;
    let before: string | undefined;
    if (writeLog === null) {
      this.entities.push();
      before = this.text(-1);
      lua.lua_pop(L, 1);
    }
    pushStringObject(L, stringObject(playerId));
    pushJson(L, input);
    this.entities.push();
    writeLog?.begin();
    let out: ReturnType<typeof this.sandbox.call>;
    let log: WriteLog | null = null;
    try {
      out = this.sandbox.call(3, this.budgets.light, this.budgets.lightMs);
    } finally {
      log = writeLog?.end() ?? null;
    }
    let consumed = seq;
    if (out.ok && out.results >= 1 && lua.lua_type(L, -out.results) === lua.LUA_TTABLE) {
      if (out.results >= 2) {
        const second = lua.lua_gettop(L) - out.results + 2;
        const t = lua.lua_type(L, second);
        if (t === lua.LUA_TNUMBER) {
          const n = lua.lua_tonumber(L, second);
          if (Number.isInteger(n) && n >= 0 && n <= Number.MAX_SAFE_INTEGER) consumed = n;
          else this.services.log.warn('world_consumed_seq_refused', { zone: this.label(), value: n });
        } else if (t !== lua.LUA_TNIL) {
          this.services.log.warn('world_consumed_seq_refused', { zone: this.label(), value: typeName(t) });
        }
      }
      lua.lua_pushvalue(L, -out.results);
      this.entities.store();
    } else {
      lua.lua_settop(L, 0);
      const t0 = performance.now();
      if (log !== null) {
        this.entities.push();
        writeLog!.undo(L, log, -1);
        lua.lua_settop(L, 0);
      } else if (before !== undefined) {
        pushJson(L, JSON.parse(before));
        this.entities.store();
      }
      this.undoMs += performance.now() - t0;
      const failed = out.ok ? this.fail('handle_input', 'malformed', 'handle_input must return the entity table') : this.fail('handle_input', out.kind, out.message);
      if (!failed.ok) this.tellPlayer(playerId, 'handle_input', failed.message);
    }
    lua.lua_settop(L, 0);
    return consumed;
  }

  private effects(effects: readonly JsonObject[]): void {
    if (!this.pushCallback(NAMES.handle_effects)) {
      this.report('handle_effects', 'error', `${effects.length} effects dropped: the script defines no handle_effects`);
      return;
    }
    pushJson(this.L, effects);
    this.entities.push();
    this.tableCall('handle_effects', this.entities, 2, this.budgets.light, this.budgets.lightMs);
    lua.lua_settop(this.L, 0);
  }

  /** The entity table as JSON text keyed by id (`{}` when it cannot be encoded). */
  entitiesText(): string {
    this.entities.push();
    const text = this.text(-1);
    lua.lua_settop(this.L, 0);
    return text !== undefined && text.charCodeAt(0) === 123 ? text : '{}';
  }

  /**
   * Compares the entity table with `mirror` (what the zone last published),
   * telling `sink` what was added, changed and removed, and updates `mirror`.
   */
  diff(mirror: Map<string, JsonRecord>, sink: EntitySink): void {
    this.entities.push();
    diffEntities(this.L, -1, mirror, sink);
    lua.lua_settop(this.L, 0);
  }

  /** The live entity table, for the spatial queries' zone forms. */
  pushEntitiesOnto(L: any): void {
    this.entities.pushOnto(L);
  }

  /**
   * Every entity with numeric `x` and `y` outside `box` (all of them without
   * one), read in place: the engine's zone crossings look at nothing else.
   */
  positions(box?: Box): { id: string; x: number; y: number }[] {
    this.entities.push();
    const out = numberPairs(this.L, -1, NAMES.x, NAMES.y, box);
    lua.lua_settop(this.L, 0);
    return out;
  }

  /** Whether the entity table holds any entry. */
  hasEntities(): boolean {
    this.entities.push();
    lua.lua_pushnil(this.L);
    const any = lua.lua_next(this.L, -2) !== 0;
    lua.lua_settop(this.L, 0);
    return any;
  }

  /** Removes an entity, answering its fields (null when the zone has no such entity). */
  take(id: string): JsonObject | null {
    return this.read(id, true);
  }

  /** An entity's fields, left in place (null when the zone has no such entity). */
  peek(id: string): JsonObject | null {
    return this.read(id, false);
  }

  private read(id: string, remove: boolean): JsonObject | null {
    const L = this.L;
    this.entities.push();
    pushJson(L, id);
    lua.lua_rawget(L, -2);
    let entity: JsonObject | null = null;
    if (lua.lua_type(L, -1) === lua.LUA_TTABLE) {
      const value = this.safeJson(-1);
      entity = isObjectJson(value) ? value : {};
      lua.lua_pop(L, 1);
      if (remove) {
        pushJson(L, id);
        lua.lua_pushnil(L);
        lua.lua_rawset(L, -3);
      }
    }
    lua.lua_settop(L, 0);
    return entity;
  }

  /** Adds (or replaces) an entity. */
  put(id: string, entity: JsonObject): void {
    const L = this.L;
    this.entities.push();
    pushJson(L, id);
    pushJson(L, entity);
    lua.lua_rawset(L, -3);
    lua.lua_settop(L, 0);
  }

  /** The zone state as JSON (null without one), for snapshots. */
  stateJson(): JsonValue {
    this.zoneState.push();
    const value = this.safeJson(-1) ?? null;
    lua.lua_settop(this.L, 0);
    return value;
  }

  /** `_keep_hot = true` in the zone state vetoes stopping an idle zone. */
  keepHot(): boolean {
    if (this.zoneState.empty) return false;
    const L = this.L;
    this.zoneState.push();
    let hot = false;
    if (lua.lua_type(L, -1) === lua.LUA_TTABLE) {
      pushStringObject(L, NAMES._keep_hot);
      hot = lua.lua_rawget(L, -2) === lua.LUA_TBOOLEAN && lua.lua_toboolean(L, -1);
    }
    lua.lua_settop(L, 0);
    return hot;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.entities.clear();
    this.zoneState.clear();
  }

  private label(): string {
    return `${this.zone[0]},${this.zone[1]}`;
  }

  private text(index: number): string | undefined {
    try {
      return toJsonText(this.L, index);
    } catch (err) {
      if (!(err instanceof MarshalError)) throw err;
      return undefined;
    }
  }

  private safeJson(index: number): JsonValue | undefined {
    const text = this.text(index);
    return text === undefined ? undefined : (JSON.parse(text) as JsonValue);
  }
}

function typeName(t: number): string {
  return t === lua.LUA_TSTRING ? 'string' : t === lua.LUA_TTABLE ? 'table' : t === lua.LUA_TBOOLEAN ? 'boolean' : 'other';
}
