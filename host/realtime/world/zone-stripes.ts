/**
 * A world whose zones are spread over several script lanes (decision 0067).
 * The zones are cut into stripes along x, one per lane; stripe 0 is the home
 * lane's, where the WorldRun keeps the world VM, the players and what every
 * zone published. Every other stripe is a ZoneShard on its own lane, driven
 * by the messages below over a channel between the two lanes (ScriptPool.link;
 * the main thread carries none of them).
 *
 * A tick is two rounds: `step` (the stripe's queued puts, takes and inputs,
 * then its zones' steps; back come what the scripts asked of the world and
 * the entities that left their squares) and, on broadcast ticks, `publish`
 * (the moves the run decided, then every zone's differences since its last
 * broadcast). Between the two no script of the stripe runs, so a stray read
 * in the first round is moved in the second exactly as a single lane moves it.
 */
import type { JsonObject, JsonValue, ModeInfo } from '../../../runtime/lua/host-interface';
import type { EntitySink, JsonRecord } from '../../../runtime/lua/marshal';
import type { ZoneSnapshot } from '../../../runtime/worlds/worlds';
import type { LaneContext } from '../lanes/runner';
import { WorldVm, type ZoneInput } from '../../../runtime/lua/world';
import { spawnTemplates, vmServices, ZoneShard, type SpawnTemplate, type WorldScriptOptions, type ZoneKey, type ZoneStepOut } from './zone-shard';
import { TerrainStore, terrainProvider } from './terrain';

/** What the run asks of a stripe's zones between two rounds, applied in order before the next round's work. */
export type StripeOp =
  | { op: 'open'; key: ZoneKey; zoneState?: JsonValue; entities?: Record<string, JsonObject> }
  | { op: 'close'; key: ZoneKey }
  | { op: 'put'; key: ZoneKey; id: string; entity: JsonObject; player: boolean }
  | { op: 'take'; key: ZoneKey; id: string }
  /** A despawn of an entity no zone published yet: whichever of the stripe's zones holds it. */
  | { op: 'despawn'; id: string }
  | { op: 'input'; key: ZoneKey; input: ZoneInput }
  | { op: 'effect'; key: ZoneKey; effect: JsonObject };

/**
 * A zone of another stripe touching this one: every id it published (for
 * `game.zone.apply`), and those of its entities near the facing edge (for
 * the border mirrors), in its order.
 */
export type ForeignZone = [ZoneKey, string[], [string, JsonRecord][]];

/** A zone's differences at a publish: parallel lists of ops, ids and fields. */
export type ZoneRecords = [ZoneKey, ('a' | 'u' | 'r')[], string[], (JsonRecord | null)[]];

export type ToStripe =
  | { t: 'open'; mode: ModeInfo; seed: number; terrain: JsonValue | undefined; templates: Record<string, SpawnTemplate> }
  | { t: 'step'; tick: number; ops: StripeOp[]; foreign: ForeignZone[] | null; templates: Record<string, SpawnTemplate> | null }
  | { t: 'publish'; ops: StripeOp[] }
  | { t: 'snapshot'; tick: number; ops: StripeOp[] }
  | { t: 'close' };

export type FromStripe =
  /** `busy`: zones with entities or kept hot (lazy worlds only); `lost`: zones whose VM did not start; `ms`: the lane's time on the round. */
  | { t: 'stepped'; zones: ZoneStepOut[]; lost: ZoneKey[]; busy: ZoneKey[] | null; ms: number }
  | { t: 'published'; zones: ZoneRecords[]; lost: ZoneKey[]; busy: ZoneKey[] | null; ms: number }
  | { t: 'snapshot'; zones: ZoneSnapshot[] };

/** A world's VMs' services on `lane`: their lines, sends and failures travel as the lane's events. */
export function worldScriptOptions(lane: LaneContext, worldId: string, mode: ModeInfo): WorldScriptOptions {
  return {
    worldId,
    mode,
    source: lane.source,
    budgets: lane.budgets,
    failingTicksMax: lane.failingTicksMax,
    log: lane.log,
    limits: lane.limits,
    ids: lane.ids,
    bindings: lane.bindings,
    send: (playerId, message) => lane.emit({ kind: 'lane', k: 'send', playerId, message }),
    failed: lane.failed,
    scriptError: (playerId, error) => lane.emit({ kind: 'lane', k: 'script_error', playerId, error }),
  };
}

/** The pool id of a world's stripe `s` (s ≥ 1). */
export const stripeId = (worldId: string, s: number): string => `${worldId}~${s}`;

/** The world a stripe's pool id belongs to, or null for any other id. */
export function worldOfStripe(id: string): string | null {
  const at = id.lastIndexOf('~');
  return at > 0 ? id.slice(0, at) : null;
}

/** The stripe column `x` falls in when a grid `n` wide is cut into `k`. */
export const stripeOf = (x: number, n: number, k: number): number => Math.floor((x * k) / n);

/** The first and last column of stripe `s`. */
export function stripeColumns(s: number, n: number, k: number): [number, number] {
  let first = -1;
  let last = -1;
  for (let x = 0; x < n; x++) {
    if (stripeOf(x, n, k) !== s) continue;
    if (first < 0) first = x;
    last = x;
  }
  return [first, last];
}

/** One stripe of a world on a lane other than its home. */
export class LaneStripe {
  readonly #shard: ZoneShard;
  readonly #lazy: boolean;
  /** Each zone's entities as it last published them: what its next differences are taken against. */
  readonly #baselines = new Map<ZoneKey, Map<string, JsonRecord>>();
  /** The zone of this stripe that last published each entity. */
  readonly #entityZone = new Map<string, ZoneKey>();
  /** Touching zones of other stripes, as the run last sent them. */
  #foreign = new Map<ZoneKey, [string, JsonRecord][]>();
  #foreignIds = new Map<string, ZoneKey>();
  #epoch = 0;
  #templates: Record<string, SpawnTemplate>;
  #lost: ZoneKey[] = [];
  readonly #script: WorldScriptOptions;
  /** The script's revision on this lane when the stripe opened, then when it last tried to read an edit's declarations. */
  #triedAt: unknown;
  /** Reads the declarations of an edit this lane took (#takeEdit); made at the first one. */
  #declarations: WorldVm | null = null;

  constructor(lane: LaneContext, worldId: string, open: Extract<ToStripe, { t: 'open' }>) {
    this.#templates = open.templates;
    this.#script = worldScriptOptions(lane, worldId, open.mode);
    this.#triedAt = lane.source.revision?.(open.mode.file);
    this.#lazy = open.mode.world!.lazy_zones;
    const terrain = terrainProvider(open.terrain, lane.source, open.seed);
    const store = terrain.ok && terrain.provider ? new TerrainStore(terrain.provider, open.mode.world!.grid_size) : null;
    this.#shard = new ZoneShard({
      ...this.#script,
      terrain: store ? { get: (cx, cy) => store.get(cx, cy), preload: (list) => void store.preload(list) } : null,
      view: {
        locate: (id) => this.#entityZone.get(id) ?? this.#foreignIds.get(id),
        running: (key) => this.#shard.has(key) || this.#foreign.has(key),
        published: (key) => (this.#shard.has(key) ? this.#baselines.get(key) : this.#foreign.get(key)),
        epoch: () => this.#epoch,
        templates: () => this.#templates,
      },
    });
  }

  /** Runs one message; answers what goes back to the home lane (nothing for `close`). */
  handle(msg: ToStripe): FromStripe | null {
    const t0 = performance.now();
    switch (msg.t) {
      case 'step': {
        this.#apply(msg.ops);
        if (msg.templates && this.#declarations === null) this.#templates = msg.templates;
        this.#takeEdit();
        if (msg.foreign) this.#setForeign(msg.foreign);
        const zones = this.#shard.step(msg.tick, true);
        this.#shard.takeUndoMs();
        return { t: 'stepped', zones, lost: this.#takeLost(), busy: this.#busy(), ms: performance.now() - t0 };
      }
      case 'publish': {
        this.#apply(msg.ops);
        const zones = this.#publish();
        return { t: 'published', zones, lost: this.#takeLost(), busy: this.#busy(), ms: performance.now() - t0 };
      }
      case 'snapshot':
        this.#apply(msg.ops);
        return { t: 'snapshot', zones: this.#shard.snapshot(msg.tick) };
      case 'open':
      case 'close':
        return null;
    }
  }

  /**
   * This lane's zones take an edit of the script when this lane's watcher
   * sees it, which may be a tick before or after the home lane's does. The
   * templates they spawn from must be the edit's from the first tick they
   * run its code, so once this lane has seen an edit they are read here, from
   * a VM of the script as this lane has it, not taken from the home lane.
   */
  #takeEdit(): void {
    const file = this.#script.mode.file;
    const vm = this.#declarations;
    if (vm === null) {
      // Made once per revision: a broken edit is not compiled again on every tick.
      const revision = this.#script.source.revision?.(file);
      if (revision === this.#triedAt) return;
      this.#triedAt = revision;
      try {
        this.#declarations = WorldVm.create({
          source: this.#script.source,
          mode: this.#script.mode,
          worldId: this.#script.worldId,
          services: { ...vmServices(this.#script, { world_id: this.#script.worldId }), broadcast: () => {}, terrain: null },
          budgets: this.#script.budgets,
        });
      } catch {
        // A broken edit: the zones keep their old code too (ScriptInstance.reevaluate), and the templates with it.
        return;
      }
    } else if (!vm.reloadIfStale()) return;
    this.#templates = spawnTemplates(this.#declarations!.declaration('spawn_templates'));
  }

  close(): void {
    this.#declarations?.close();
    this.#shard.closeAll();
  }

  #apply(ops: StripeOp[]): void {
    const shard = this.#shard;
    for (const o of ops) {
      switch (o.op) {
        case 'open':
          if (!shard.open(o.key, o.zoneState, o.entities)) this.#lost.push(o.key);
          break;
        case 'close':
          shard.close(o.key);
          break;
        case 'put':
          shard.put(o.key, o.id, o.entity, o.player);
          break;
        case 'take':
          shard.take(o.key, o.id);
          break;
        case 'despawn':
          shard.despawnAnywhere(o.id);
          break;
        case 'input':
          shard.input(o.key, o.input);
          break;
        case 'effect':
          shard.effect(o.key, o.effect);
          break;
      }
    }
  }

  /** Every zone's differences against its baseline, the baselines brought up to date. */
  #publish(): ZoneRecords[] {
    const out: ZoneRecords[] = [];
    for (const key of this.#shard.keys()) {
      let baseline = this.#baselines.get(key);
      if (!baseline) this.#baselines.set(key, (baseline = new Map()));
      const record: ZoneRecords = [key, [], [], []];
      this.#shard.diff(key, baseline, recordingSink(record, this.#entityZone));
      if (record[1].length > 0) out.push(record);
    }
    this.#epoch++;
    return out;
  }

  #setForeign(foreign: ForeignZone[]): void {
    this.#foreign = new Map();
    this.#foreignIds = new Map();
    for (const [key, ids, near] of foreign) {
      this.#foreign.set(key, near);
      for (const id of ids) this.#foreignIds.set(id, key);
    }
    this.#epoch++;
  }

  #busy(): ZoneKey[] | null {
    if (!this.#lazy) return null;
    const busy: ZoneKey[] = [];
    for (const key of this.#shard.keys()) if (this.#shard.busy(key)) busy.push(key);
    return busy;
  }

  #takeLost(): ZoneKey[] {
    const lost = this.#lost;
    this.#lost = [];
    return lost;
  }
}

/** A sink that writes a zone's differences into `records`, keeping `entityZone` (where each entity was last published) in step. */
export function recordingSink(records: ZoneRecords, entityZone: Map<string, ZoneKey>): EntitySink {
  const [key, ops, ids, fields] = records;
  return {
    added(id, f) {
      entityZone.set(id, key);
      ops.push('a');
      ids.push(id);
      fields.push(f);
    },
    updated(id, changed) {
      ops.push('u');
      ids.push(id);
      fields.push(changed);
    },
    removed(id) {
      if (entityZone.get(id) === key) entityZone.delete(id);
      ops.push('r');
      ids.push(id);
      fields.push(null);
    },
  };
}

/** Applies a zone's records (from another lane) to the run's copy of what it published. */
export function replayRecords(entities: Map<string, JsonRecord>, [, ops, ids, fields]: ZoneRecords, sink: EntitySink): void {
  for (let i = 0; i < ops.length; i++) {
    const id = ids[i]!;
    const f = fields[i]!;
    if (ops[i] === 'a') {
      entities.set(id, f);
      sink.added(id, f);
    } else if (ops[i] === 'u') {
      const record = entities.get(id);
      if (record) {
        for (const k in f) {
          if (f[k] === null) delete record[k];
          else record[k] = f[k]!;
        }
      }
      sink.updated(id, f);
    } else {
      entities.delete(id);
      sink.removed(id);
    }
  }
}

