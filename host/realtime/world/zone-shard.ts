/**
 * The zones of one world that one script lane runs: their VMs, the inputs and
 * effects waiting for their next step, and the services their scripts call.
 * A world on one lane has one shard, inside its WorldRun; a world spread over
 * several lanes has one on each (decision 0067): the run on the home lane
 * keeps the world VM and everything world-wide, and tells the others, over a
 * channel between the lanes, what to step, put and take (zone-stripes.ts).
 *
 * A shard's step only produces: what the zones' scripts asked of the world
 * (spawns, despawns, effects for other zones, broadcasts) and which entities
 * left their zone's square come back per zone, and the run acts on them in
 * its zones' order, so the order of everything a world does is the same
 * however its zones are placed.
 */
import type { RateLimiter } from '../../../runtime/contracts/context';
import type { IdSource } from '../../../runtime/platform/ids';
import type { LogFields, Logger } from '../../../runtime/platform/log';
import type { Budgets, FailureKind, JsonObject, JsonValue, ModeInfo, ScriptBindings, ScriptServices, ScriptSource, TerrainAccess, WorldSettings, ZoneServices } from '../../../runtime/lua/host-interface';
import { lua } from '../../../runtime/lua/vm';
import { asObjectJson, isObjectJson, type EntitySink, type JsonRecord } from '../../../runtime/lua/marshal';
import type { ZoneSpatial } from '../../../runtime/lua/spatial';
import { ZoneVm, type ZoneInput } from '../../../runtime/lua/world';

/** A zone's coordinates packed in one number (grids are at most 1000 a side). */
export type ZoneKey = number;
export const keyOf = (x: number, y: number): ZoneKey => x * 4096 + y;
export const coordsOf = (key: ZoneKey): [number, number] => [Math.floor(key / 4096), key % 4096];

/** At most this many `game.zone.apply` sends per calling zone per tick. */
const EFFECTS_PER_TICK = 64;
/** A zone whose callbacks hit a limit this many ticks in a row sits out a growing number of ticks. */
const ZONE_BACKOFF_MAX_TICKS = 128;

/** One spawn template: the entity's fields, and for the reference's `{type, base_state}` shape the type that wins over overrides. */
export interface SpawnTemplate {
  fields: JsonObject;
  type?: JsonValue;
}

/**
 * `spawn_templates({})` as `game.zone.spawn` lays it out. A template with a
 * `base_state` table is the reference runtime's shape: the entity is that
 * table's fields (so a script reads `e.health`), then the overrides, then
 * the template's `type`. Any other template is flat: its own fields, then
 * the overrides.
 */
export function spawnTemplates(declared: JsonValue | undefined): Record<string, SpawnTemplate> {
  const out: Record<string, SpawnTemplate> = {};
  if (!isObjectJson(declared)) return out;
  for (const [id, t] of Object.entries(declared)) {
    const template = asObjectJson(t);
    if (!template) continue;
    const base = isObjectJson(template.base_state) ? template.base_state : null;
    out[id] = base ? { fields: base, type: template.type } : { fields: template };
  }
  return out;
}

/** An entity whose position left its zone's square after a step; `entity`: its fields, for a zone on another lane. */
export interface Stray {
  id: string;
  x: number;
  y: number;
  entity?: JsonObject;
}

/** What one zone's step asked of the world, in the order its scripts asked. */
export interface ZoneStepOut {
  key: ZoneKey;
  /** Each input player's highest consumed `seq`. */
  consumed: [string, number][];
  /** `world.<leaf>` frames for every player of the world. */
  sends: string[];
  spawns: { id: string; entity: JsonObject }[];
  despawns: string[];
  /** `game.zone.apply` effects for entities of touching zones: they reach the target's next step, wherever it runs. */
  effects: [ZoneKey, JsonObject][];
  strays: Stray[];
}

/** What a shard sees of the world beyond its own zones' VMs. */
export interface ShardView {
  /** The zone that last published an entity, as far as this shard can see (its own zones and those touching them). */
  locate(id: string): ZoneKey | undefined;
  /** Whether a zone runs, here or on another lane. */
  running(key: ZoneKey): boolean;
  /** A zone's entities as it last published them (for the border mirrors), or undefined. */
  published(key: ZoneKey): Iterable<[string, JsonRecord]> | undefined;
  /** Changes whenever anything `published` answers may have changed. */
  epoch(): number;
  templates(): Record<string, SpawnTemplate>;
}

/** What every VM of a world gets from the lane it runs on. */
export interface WorldScriptOptions {
  worldId: string;
  mode: ModeInfo;
  source: ScriptSource;
  budgets: Budgets;
  failingTicksMax: number;
  log: Logger;
  limits: RateLimiter;
  ids: IdSource;
  bindings: ScriptBindings;
  /** `game.send` from any of the world's VMs. */
  send(playerId: string, message: JsonValue): void;
  /** Every failed callback of the world's VMs (ScriptServices.failed). */
  failed?(kind: FailureKind): void;
  /** A zone's `handle_input` failed on a player's input (ScriptServices.scriptError). */
  scriptError?: ScriptServices['scriptError'];
}

export interface ShardOptions extends WorldScriptOptions {
  terrain: TerrainAccess | null;
  view: ShardView;
}

interface ShardZone {
  key: ZoneKey;
  x: number;
  y: number;
  vm: ZoneVm;
  /** Players whose entity this zone holds. */
  players: Set<string>;
  inputs: ZoneInput[];
  /** Effects for the zone's next step. */
  effects: JsonObject[];
  /** Consecutive ticks with a callback stopped by a limit, and ticks left to sit out. */
  failing: number;
  resting: number;
  /** `game.zone.apply` sends this tick. */
  applied: number;
  /** What this tick's callbacks asked for so far. */
  out: ZoneStepOut | null;
}

export class ZoneShard {
  readonly #o: ShardOptions;
  readonly #settings: WorldSettings;
  readonly #zones = new Map<ZoneKey, ShardZone>();
  readonly #mirrorLists = new Map<ZoneKey, { epoch: number; list: { id: string; entity: JsonObject }[] }>();

  constructor(options: ShardOptions) {
    this.#o = options;
    this.#settings = options.mode.world!;
  }

  get size(): number {
    return this.#zones.size;
  }

  keys(): IterableIterator<ZoneKey> {
    return this.#zones.keys();
  }

  has(key: ZoneKey): boolean {
    return this.#zones.has(key);
  }

  /** Starts a zone's VM; false (logged) when its script does not load. */
  open(key: ZoneKey, zoneState: JsonValue | undefined, entities?: Record<string, JsonObject>): boolean {
    if (this.#zones.has(key)) return true;
    const [x, y] = coordsOf(key);
    let vm: ZoneVm;
    try {
      vm = ZoneVm.create({
        source: this.#o.source,
        mode: this.#o.mode,
        worldId: this.#o.worldId,
        zone: [x, y],
        services: this.#services(key),
        budgets: this.#o.budgets,
        zoneState,
        entities,
      });
    } catch (err) {
      this.#o.log.warn('zone_start_failed', { world_id: this.#o.worldId, zone: `${x},${y}`, message: (err as Error).message });
      return false;
    }
    this.#zones.set(key, { key, x, y, vm, players: new Set(), inputs: [], effects: [], failing: 0, resting: 0, applied: 0, out: null });
    return true;
  }

  close(key: ZoneKey): void {
    this.#zones.get(key)?.vm.close();
    this.#zones.delete(key);
  }

  closeAll(): void {
    for (const zone of this.#zones.values()) zone.vm.close();
    this.#zones.clear();
  }

  put(key: ZoneKey, id: string, entity: JsonObject, player: boolean): void {
    const zone = this.#zones.get(key);
    if (!zone) return;
    zone.vm.put(id, entity);
    if (player) zone.players.add(id);
  }

  take(key: ZoneKey, id: string): JsonObject | null {
    const zone = this.#zones.get(key);
    if (!zone) return null;
    zone.players.delete(id);
    return zone.vm.take(id);
  }

  hasPlayer(key: ZoneKey, id: string): boolean {
    return this.#zones.get(key)?.players.has(id) ?? false;
  }

  /** A despawn whose entity no zone published yet: the first of this shard's zones holding it (not as a player) lets it go. */
  despawnAnywhere(id: string): boolean {
    for (const zone of this.#zones.values()) if (!zone.players.has(id) && zone.vm.take(id)) return true;
    return false;
  }

  input(key: ZoneKey, input: ZoneInput): void {
    this.#zones.get(key)?.inputs.push(input);
  }

  effect(key: ZoneKey, effect: JsonObject): void {
    this.#zones.get(key)?.effects.push(effect);
  }

  /** Whether a zone holds entities or its state asks to stay hot: not a zone to stop. */
  busy(key: ZoneKey): boolean {
    const zone = this.#zones.get(key);
    return zone !== undefined && (zone.vm.hasEntities() || zone.vm.keepHot());
  }

  diff(key: ZoneKey, baseline: Map<string, JsonRecord>, sink: EntitySink): void {
    this.#zones.get(key)?.vm.diff(baseline, sink);
  }

  /** Milliseconds the zones spent undoing refused inputs since the last ask. */
  takeUndoMs(): number {
    let ms = 0;
    for (const zone of this.#zones.values()) {
      ms += zone.vm.undoMs;
      zone.vm.undoMs = 0;
    }
    return ms;
  }

  /**
   * Steps every zone, then finds the entities that left their zone's square;
   * `withData`: a stray carries its fields (the run that moves it is on
   * another lane). Answers the zones that produced anything, in zone order.
   */
  step(tick: number, withData: boolean): ZoneStepOut[] {
    for (const zone of [...this.#zones.values()]) this.#stepZone(zone, tick);
    const n = this.#settings.grid_size;
    const size = this.#settings.zone_size;
    const outs: ZoneStepOut[] = [];
    for (const zone of this.#zones.values()) {
      // Only entities outside the zone's square can have left it; the grid's edge zones reach to infinity.
      const box = {
        x0: zone.x === 0 ? -Infinity : zone.x * size,
        x1: zone.x === n - 1 ? Infinity : (zone.x + 1) * size,
        y0: zone.y === 0 ? -Infinity : zone.y * size,
        y1: zone.y === n - 1 ? Infinity : (zone.y + 1) * size,
      };
      const positions = zone.vm.positions(box);
      if (positions.length > 0) {
        const out = outOf(zone);
        for (const p of positions) {
          const stray: Stray = p;
          if (withData) stray.entity = zone.vm.peek(p.id) ?? {};
          out.strays.push(stray);
        }
      }
      if (zone.out !== null) outs.push(zone.out);
      zone.out = null;
    }
    return outs;
  }

  #stepZone(zone: ShardZone, tick: number): void {
    zone.applied = 0;
    const cold = zone.players.size === 0;
    if (cold && tick % this.#settings.cold_tick_divisor !== 0 && zone.effects.length === 0) return;
    if (zone.resting > 0) {
      zone.resting--;
      zone.inputs.length = 0;
      zone.effects.length = 0;
      return;
    }
    const inputs = zone.inputs.splice(0);
    const effects = zone.effects.splice(0);
    zone.vm.takeLimitFailure();
    const { consumed } = zone.vm.tick(inputs, effects);
    if (consumed.size > 0) outOf(zone).consumed.push(...consumed);
    const failure = zone.vm.takeLimitFailure();
    zone.failing = failure ? zone.failing + 1 : 0;
    if (failure && zone.failing >= this.#o.failingTicksMax) {
      // Contained: the zone sits out a growing number of ticks; the rest of the world keeps its cadence.
      zone.resting = Math.min(ZONE_BACKOFF_MAX_TICKS, 2 ** Math.min(7, zone.failing - this.#o.failingTicksMax + 1));
      this.#o.log.warn('zone_script_budget', {
        world_id: this.#o.worldId,
        zone: `${zone.x},${zone.y}`,
        callback: failure.callback,
        reason_class: failure.kind,
        failing_ticks: zone.failing,
        rest_ticks: zone.resting,
      });
    }
  }

  /** Every zone's entities (its players left out: they come back by joining) and state. */
  snapshot(tick: number): { x: number; y: number; entities: Record<string, JsonObject>; zone_state: JsonValue; tick: number }[] {
    const out = [];
    for (const zone of this.#zones.values()) {
      const entities = JSON.parse(zone.vm.entitiesText()) as Record<string, JsonObject>;
      for (const id of zone.players) delete entities[id];
      out.push({ x: zone.x, y: zone.y, entities, zone_state: zone.vm.stateJson(), tick });
    }
    return out;
  }

  #services(key: ZoneKey): ZoneServices {
    const o = this.#o;
    const view = o.view;
    const [x, y] = coordsOf(key);
    const zoneOut = (): ZoneStepOut | null => {
      const zone = this.#zones.get(key);
      return zone ? outOf(zone) : null;
    };
    const spatial: ZoneSpatial = {
      pushOwnEntities: (L: any) => {
        const zone = this.#zones.get(key);
        if (zone) zone.vm.pushEntitiesOnto(L);
        else lua.lua_pushnil(L);
      },
      mirrors: () => this.#mirrors(key),
    };
    return {
      ...vmServices(o, { world_id: o.worldId, zone: `${x},${y}` }),
      ...(o.scriptError ? { scriptError: o.scriptError } : {}),
      broadcast: (leaf, payload) => void zoneOut()?.sends.push(broadcastText(leaf, payload)),
      terrain: o.terrain,
      spawn: (template, sx, sy, overrides) => {
        const t = view.templates()[template];
        const out = zoneOut();
        if (!t || !out) return false;
        // Unique across restarts: a recovered world's entities keep the ids they were saved with.
        const id = `${template}-${o.ids.uuid()}`;
        out.spawns.push({ id, entity: { ...t.fields, ...overrides, ...(t.type !== undefined ? { type: t.type } : {}), x: sx, y: sy } });
        return true;
      },
      despawn: (id) => void zoneOut()?.despawns.push(id),
      apply: (entityId, event) => {
        const zone = this.#zones.get(key);
        const target = view.locate(entityId);
        if (!zone || target === undefined || target === key || zone.applied >= EFFECTS_PER_TICK) return false;
        const [tx, ty] = coordsOf(target);
        if (Math.abs(tx - x) > 1 || Math.abs(ty - y) > 1 || !view.running(target)) return false;
        zone.applied++;
        outOf(zone).effects.push([target, { entity_id: entityId, event }]);
        return true;
      },
      spatial,
    };
  }

  /**
   * Entities of the touching zones within `border_band` of this zone's edges,
   * as last published. Published entities change only at a broadcast, so the
   * list is made once per zone per broadcast, however many queries ask.
   */
  #mirrors(key: ZoneKey): { id: string; entity: JsonObject }[] {
    const band = this.#settings.border_band * this.#settings.zone_size;
    if (band <= 0) return [];
    const view = this.#o.view;
    const cached = this.#mirrorLists.get(key);
    if (cached !== undefined && cached.epoch === view.epoch()) return cached.list;
    const [x, y] = coordsOf(key);
    const size = this.#settings.zone_size;
    const left = x * size - band;
    const right = (x + 1) * size + band;
    const top = y * size - band;
    const bottom = (y + 1) * size + band;
    const out: { id: string; entity: JsonObject }[] = [];
    for (let dx = -1; dx <= 1; dx++) {
      for (let dy = -1; dy <= 1; dy++) {
        if ((dx === 0 && dy === 0) || x + dx < 0 || y + dy < 0) continue;
        const published = view.published(keyOf(x + dx, y + dy));
        if (!published) continue;
        for (const [id, entity] of published) {
          const ex = entity.x;
          const ey = entity.y;
          if (typeof ex === 'number' && typeof ey === 'number' && ex >= left && ex < right && ey >= top && ey < bottom) out.push({ id, entity: entity as JsonObject });
        }
      }
    }
    this.#mirrorLists.set(key, { epoch: view.epoch(), list: out });
    return out;
  }
}

/** What every VM of a world gets from its options, whichever VM it is; its log lines carry `fields`. */
export function vmServices(o: WorldScriptOptions, fields: LogFields): Pick<ScriptServices, 'log' | 'limits' | 'clock' | 'ids' | 'bindings' | 'send' | 'failed'> {
  return {
    log: o.log.child(fields),
    limits: o.limits,
    clock: { now: () => Date.now() },
    ids: o.ids,
    bindings: o.bindings,
    send: o.send,
    ...(o.failed ? { failed: o.failed } : {}),
  };
}

/** A `world.<leaf>` frame for everyone in the world (`game.broadcast` from any of its VMs). */
export function broadcastText(leaf: string, payload: JsonObject): string {
  return `{"type":${JSON.stringify(`world.${leaf}`)},"payload":${JSON.stringify(payload)}}`;
}

function outOf(zone: ShardZone): ZoneStepOut {
  return (zone.out ??= { key: zone.key, consumed: [], sends: [], spawns: [], despawns: [], effects: [], strays: [] });
}
