/**
 * One live world on its home script lane: the world VM, the zone VMs of its
 * stripe (zone-shard.ts; the other stripes' on other lanes, zone-stripes.ts),
 * where every player and entity is, and what each connection watches. A
 * world tick runs every zone's script steps, moves entities across zone
 * borders, runs `post_tick`, and on broadcast ticks turns each zone's entity
 * table into one `world.tick` delta shared by every player watching the
 * zone. The main thread only writes the frames this produces.
 */
import type { JoinResult, JsonObject, JsonValue, TerrainAccess, WorldServices, WorldSettings } from '../../../runtime/lua/host-interface';
import { isObjectJson, type EntitySink, type JsonRecord } from '../../../runtime/lua/marshal';
import { WorldVm, type ZoneInput } from '../../../runtime/lua/world';
import { parsePhases, PhaseClock, runTransitions } from '../../../runtime/phases/phases';
import { TerrainStore, terrainProvider } from './terrain';
import type { ZoneSnapshot } from '../../../runtime/worlds/worlds';
import { encodeWorldTick, ZoneSlots, type FieldInput, type WireRecord } from '../../../runtime/worlds/binary-wire';
import { axialTurn, encodePoseDatagrams, type PoseManifest, type PoseRecord } from '../../../runtime/worlds/pose-datagram';
import { broadcastText, coordsOf, keyOf, spawnTemplates, vmServices, ZoneShard, type SpawnTemplate, type Stray, type WorldScriptOptions, type ZoneKey, type ZoneStepOut } from './zone-shard';
import { recordingSink, replayRecords, stripeColumns, stripeOf, type ForeignZone, type FromStripe, type StripeOp, type ToStripe, type ZoneRecords } from './zone-stripes';

/** The periodic `world.phase_changed` (no `world_id`) comes about this often. */
const PHASE_PUSH_EVERY_MS = 3000;

export interface WorldRunOptions extends WorldScriptOptions {
  seed: number;
  /** The node's datagram plane's field manifest, or null when the plane is off: zones then make no poses. */
  poses?: PoseManifest | null;
  /** Lanes the world's zones are spread over (stripes along x, decision 0067); 1 or unset: all on this lane. */
  stripes?: number;
  /** Sends a message to the lane running stripe `s` (s ≥ 1); its answer comes back through `stripeAnswer`. */
  relay?(s: number, msg: ToStripe): void;
}

/** Milliseconds a world's ticks spent by part (the benchmark prints them per tick). */
export interface TickSplit {
  /** Zone scripts (zone_tick, handle_input, handle_effects), less undoing refused inputs. */
  lua: number;
  /** Putting refused inputs' writes back. */
  undo: number;
  /** Comparing zones' entities with what they last sent. */
  diff: number;
  /** Writing the deltas' frames. */
  encode: number;
  /** Entities crossing zone borders, spawns and despawns. */
  crossing: number;
  /** The world VM: post_tick, phases. */
  world: number;
}

export function emptySplit(): TickSplit {
  return { lua: 0, undo: 0, diff: 0, encode: 0, crossing: 0, world: 0 };
}

/** What a persistent world left in the database, to start from after a restart. */
export interface WorldRecovery {
  zones: ZoneSnapshot[];
}

/**
 * Frames one step produced, in the order they must reach the sockets: each
 * text with the players it goes to, or null for everyone in the world (a
 * `world.<leaf>` broadcast).
 */
export interface WorldOutput {
  /** With a third element for `world.tick` frames that have a binary form (sockets on the binary wire get those bytes). */
  sends: [string, string[] | null, (Uint8Array | null)?][];
  /** Players whose zone changed: [player, x, y]. */
  moved: [string, number, number][];
  /** Pose datagram bodies of a zone's tick for the datagram plane, with the zone's watchers (the plane sends to those bound). */
  poses: [string[], Uint8Array[]][];
  /** Pose fields written as the nearest int16 end this step. */
  saturated: number;
}

/** A running zone as the world sees it; its VM is on the lane of its stripe (this lane's shard for stripe 0). */
interface Zone {
  key: ZoneKey;
  x: number;
  y: number;
  stripe: number;
  /** Players whose entity this zone owns. */
  players: Set<string>;
  idleSince: number | null;
  /** Another lane's zone held entities or was kept hot when last heard of, or was put to since. */
  busy: boolean;
}

/** Another lane's stripe: what goes to it with the next round. */
interface RemoteStripe {
  s: number;
  ops: StripeOp[];
  /** The publish epoch its touching zones were last sent at. */
  epoch: number;
  columns: [number, number];
}

/** A round out to the other stripes: the run goes on when every one answered. */
type Round =
  | { round: 'step'; now: number; tick: number; done: () => void; waiting: number; outs: Map<ZoneKey, ZoneStepOut> }
  | { round: 'publish'; now: number; tick: number; done: () => void; waiting: number; records: Map<ZoneKey, ZoneRecords> }
  | { round: 'snapshot'; done: (zones: ZoneSnapshot[]) => void; waiting: number; zones: ZoneSnapshot[] };

/** A despawn not aimed at one zone (its entity was never published): it may take the entity from any zone. */
const ANY_ZONE = -1;

/** What a zone last sent, kept even while the zone is stopped, so sequences never go back. */
interface Published {
  seq: number;
  entities: Map<string, JsonRecord>;
  /** The binary wire's names for the zone's entities, kept in step with `entities` whichever wire is in use. */
  slots: ZoneSlots;
  /** A binary frame of this zone went out as text: binary subscribers lack its slot bindings, so the next binary frame is a keyframe. */
  binaryBehind: boolean;
  /** After a keyframe too had no binary form, the zone sends text until then (ms), retrying at a growing interval. */
  binaryOffUntil: number;
  binaryBackoff: number;
  /**
   * The zone's keyframe and leave-removal frames as made at `epoch` (what was
   * published changes only at a broadcast): players crossing into or out of
   * the zone between two broadcasts share them.
   */
  frames: { epoch: number; binary: boolean; keyframe: [string, Uint8Array | null] | null; removals: [string, Uint8Array | null] | null };
  /** The zone's next pose datagram sequence number. */
  bseq: number;
}

/** A zone's differences as delta records: parallel lists, emptied per zone. */
interface DeltaSink extends EntitySink {
  zone: ZoneKey;
  ops: ('a' | 'u' | 'r')[];
  ids: string[];
  fields: (JsonRecord | null)[];
  /** A record already told to the world's bookkeeping (a difference this lane took before the others answered). */
  take(op: 'a' | 'u' | 'r', id: string, fields: JsonRecord | null): void;
}

/** The first wait before a zone whose keyframe had no binary form tries the binary wire again, and the longest. */
const BINARY_RETRY_MS = 60_000;
const BINARY_RETRY_MAX_MS = 3_600_000;

interface Player {
  id: string;
  zone: ZoneKey;
  /** Zones this player watches. */
  ring: Set<ZoneKey>;
  consumed: number;
  ackSent: number;
  /** Detached players (disconnected inside `player_ttl_ms`) keep their entity but watch nothing. */
  attached: boolean;
}

export class WorldRun {
  readonly settings: WorldSettings;
  readonly #o: WorldRunOptions;
  readonly #vm: WorldVm;
  readonly #zones = new Map<ZoneKey, Zone>();
  /** The VMs of this lane's zones (stripe 0). */
  readonly #local: ZoneShard;
  /** Stripes 1… on other lanes, at index s − 1. */
  readonly #stripes: RemoteStripe[] = [];
  #round: Round | null = null;
  /** This tick's work per lane, in ms (this lane's first). */
  #laneMs: number[] = [0];
  #templatesChanged = false;
  readonly #published = new Map<ZoneKey, Published>();
  readonly #watchers = new Map<ZoneKey, Set<string>>();
  readonly #players = new Map<string, Player>();
  /** Which zone last published each entity (for `game.zone.apply`). */
  readonly #entityZone = new Map<string, ZoneKey>();
  readonly #seeds: JsonObject;
  /** Spawn templates as `game.zone.spawn` lays them out (#readTemplates); read again when the script is reloaded. */
  #templates: Record<string, SpawnTemplate> = {};
  readonly #terrain: TerrainStore | null;
  readonly #phases: PhaseClock | null;
  #phasePushedAt = 0;
  #tick = 0;
  #out: WorldOutput = emptyOutput();
  #finished: JsonObject | null = null;
  /** Bytes of every zone delta made since the last ask: what one player watching the whole world would receive. */
  #deltaBytes = 0;
  #vote: JsonValue = null;
  /** Bumped by every broadcast (published entities change only then); mirror lists are kept per epoch. */
  #publishEpoch = 0;
  #split: TickSplit = emptySplit();
  /**
   * A player on the binary wire joined or asked for a keyframe: from then on
   * every world.tick frame also gets its binary form. A world whose players
   * are all on text never encodes twice.
   */
  #binary = false;

  private constructor(options: WorldRunOptions, vm: WorldVm) {
    this.#o = options;
    this.settings = options.mode.world!;
    this.#vm = vm;
    this.#readTemplates();
    const terrain = terrainProvider(vm.declaration('terrain_provider'), options.source, options.seed);
    if (!terrain.ok) options.log.warn('world_terrain_refused', { world_id: options.worldId, mode: options.mode.name, problem: terrain.problem });
    this.#terrain = terrain.ok && terrain.provider ? new TerrainStore(terrain.provider, this.settings.grid_size) : null;
    const declared = vm.declaration('phases');
    const phases = declared === undefined || declared === null ? { phases: [], problems: [] } : parsePhases(declared);
    for (const problem of phases.problems) options.log.warn('world_phases_problem', { world_id: options.worldId, mode: options.mode.name, problem });
    this.#phases = phases.phases.length > 0 ? new PhaseClock(phases.phases, Date.now()) : null;
    this.#seeds = vm.generateWorld(options.seed);
    this.#local = new ZoneShard({
      ...options,
      terrain: this.#terrainAccess(),
      view: {
        locate: (id) => this.#entityZone.get(id),
        running: (key) => this.#zones.has(key),
        published: (key) => this.#published.get(key)?.entities,
        epoch: () => this.#publishEpoch,
        templates: () => this.#templates,
      },
    });
    const n = this.settings.grid_size;
    const k = options.relay ? Math.max(1, Math.min(n, options.stripes ?? 1)) : 1;
    for (let s = 1; s < k; s++) {
      this.#stripes.push({ s, ops: [], epoch: -1, columns: stripeColumns(s, n, k) });
      options.relay!(s, { t: 'open', mode: options.mode, seed: options.seed, terrain: vm.declaration('terrain_provider'), templates: this.#templates });
    }
  }

  #readTemplates(): void {
    this.#templates = spawnTemplates(this.#vm.declaration('spawn_templates'));
  }

  /** Builds the world VM, reads its declarations and runs `init`; null when any of that fails. */
  static start(options: WorldRunOptions, recovery: WorldRecovery | null): WorldRun | null {
    const run = WorldRun.#build(options);
    if (!run) return null;
    if (!run.#vm.init().ok) {
      run.close();
      return null;
    }
    if (recovery) run.#recover(recovery);
    if (!run.settings.lazy_zones) {
      const n = run.settings.grid_size;
      for (let x = 0; x < n; x++) for (let y = 0; y < n; y++) run.#ensureZone(keyOf(x, y));
    }
    run.#runPhases(Date.now());
    return run;
  }

  static #build(options: WorldRunOptions): WorldRun | null {
    // The world VM's services reach the run, which needs the VM to exist first.
    const ref: { run: WorldRun | null } = { run: null };
    const services: WorldServices = {
      ...vmServices(options, { world_id: options.worldId }),
      broadcast: (leaf, payload) => {
        if (ref.run) ref.run.#broadcast(leaf, payload);
      },
      get terrain() {
        return ref.run ? ref.run.#terrainAccess() : null;
      },
    };
    let vm: WorldVm | undefined;
    try {
      vm = WorldVm.create({ source: options.source, mode: options.mode, worldId: options.worldId, services, budgets: options.budgets });
      ref.run = new WorldRun(options, vm);
      return ref.run;
    } catch (err) {
      vm?.close();
      options.log.warn('world_init_failed', { world_id: options.worldId, mode: options.mode.name, message: (err as Error).message });
      return null;
    }
  }

  #terrainAccess(): TerrainAccess | null {
    const store = this.#terrain;
    return store ? { get: (cx, cy) => store.get(cx, cy), preload: (list) => void store.preload(list) } : null;
  }

  get tick(): number {
    return this.#tick;
  }

  get worldId(): string {
    return this.#o.worldId;
  }

  /** Each lane's work on the ticks since the last ask, in ms (this lane's first). */
  takeLaneMs(): number[] {
    const ms = this.#laneMs;
    this.#laneMs = [0];
    return ms;
  }

  /** A round is out to the other stripes: the world's other commands wait until it settles. */
  get waiting(): boolean {
    return this.#round !== null;
  }

  takeSplit(): TickSplit {
    const split = this.#split;
    this.#split = emptySplit();
    return split;
  }

  takeDeltaBytes(): number {
    const n = this.#deltaBytes;
    this.#deltaBytes = 0;
    return n;
  }

  get finished(): JsonObject | null {
    return this.#finished;
  }

  /** The phase listing form, or null for a mode without phases. */
  phaseListing(): JsonObject | null {
    return this.#phases ? this.#phases.listing(Date.now()) : null;
  }

  /** `_vote` of the last `post_tick` (taken once). */
  takeVote(): JsonValue {
    const vote = this.#vote;
    this.#vote = null;
    return vote;
  }

  takeOutput(): WorldOutput {
    const out = this.#out;
    this.#out = emptyOutput();
    return out;
  }

  // ---- players ------------------------------------------------------------

  /** `join`, then `spawn_position`, then the player's entity in its zone and the keyframes of its ring. */
  join(playerId: string, ctx: JsonObject, binary = false): JoinResult & { zone?: [number, number] } {
    if (binary) this.#binary = true;
    const known = this.#players.get(playerId);
    if (known) {
      // Back inside the grace window: the same entity, a fresh view.
      known.attached = true;
      this.#watch(known, known.zone, true);
      return { ok: true, zone: coordsOf(known.zone) };
    }
    const joined = this.#vm.join(playerId, ctx);
    if (!joined.ok) return joined;
    const at = this.#vm.spawnPosition(playerId);
    const key = this.#zoneAt(at.x, at.y);
    const zone = this.#ensureZone(key);
    if (!zone) {
      this.#vm.leave(playerId);
      return { ok: false, refused: false, kind: 'error', message: 'zone_unavailable' };
    }
    this.#put(zone, playerId, { x: at.x, y: at.y, type: 'player' }, true);
    const player: Player = { id: playerId, zone: key, ring: new Set(), consumed: -1, ackSent: -1, attached: true };
    this.#players.set(playerId, player);
    this.#phases?.setPlayers(this.#players.keys());
    this.#phases?.setReady(playerId, true);
    this.#watch(player, key, true);
    return { ok: true, zone: [zone.x, zone.y] };
  }

  /** The player's connection went away inside `player_ttl_ms`: its entity stays, it watches nothing. */
  detach(playerId: string): void {
    const player = this.#players.get(playerId);
    if (!player || !player.attached) return;
    player.attached = false;
    for (const key of player.ring) this.#watchers.get(key)?.delete(playerId);
    player.ring.clear();
  }

  leave(playerId: string): void {
    const player = this.#players.get(playerId);
    if (!player) return;
    this.#players.delete(playerId);
    const zone = this.#zones.get(player.zone);
    if (zone) this.#take(zone, playerId);
    this.#entityZone.delete(playerId);
    if (player.attached) for (const key of player.ring) this.#unwatch(player, key);
    this.#vm.leave(playerId);
    this.#phases?.setPlayers(this.#players.keys());
  }

  input(playerId: string, input: JsonObject, seq: number | null): void {
    const player = this.#players.get(playerId);
    if (!player) return;
    const zone = this.#zones.get(player.zone);
    if (!zone) return;
    const queued: ZoneInput = { playerId, input, seq };
    if (zone.stripe === 0) this.#local.input(zone.key, queued);
    else this.#opsOf(zone).push({ op: 'input', key: zone.key, input: queued });
  }

  /** A fresh keyframe of a watched zone for one player. */
  resync(playerId: string, x: number, y: number, binary = false): void {
    if (binary) this.#binary = true;
    const player = this.#players.get(playerId);
    const key = keyOf(x, y);
    if (!player || !player.attached || x < 0 || y < 0 || x >= this.settings.grid_size || y >= this.settings.grid_size || !player.ring.has(key)) return;
    this.#out.sends.push(this.#keyframe(key, [playerId]));
  }

  // ---- the tick -------------------------------------------------------------

  /**
   * One world tick; `finished` is set when the world ended during it. `done`
   * runs when the tick is over: at once on one lane, after the other stripes
   * answered their rounds otherwise (decision 0067).
   */
  step(now: number, done: () => void): void {
    const t0 = performance.now();
    this.#tick++;
    const tick = this.#tick;
    // An edited script is taken before the zones step, so the templates it adds are spawnable on this very tick.
    if (this.#vm.reloadIfStale()) {
      this.#readTemplates();
      this.#templatesChanged = true;
    }
    for (const stripe of this.#stripes) {
      const foreign = stripe.epoch === this.#publishEpoch ? null : this.#foreignOf(stripe);
      stripe.epoch = this.#publishEpoch;
      this.#o.relay!(stripe.s, { t: 'step', tick, ops: takeOps(stripe), foreign, templates: this.#templatesChanged ? this.#templates : null });
    }
    this.#templatesChanged = false;
    const outs = new Map<ZoneKey, ZoneStepOut>();
    for (const out of this.#local.step(tick, false)) outs.set(out.key, out);
    const undo = this.#local.takeUndoMs();
    const at = performance.now();
    this.#split.lua += at - t0 - undo;
    this.#split.undo += undo;
    this.#laneMs[0]! += at - t0;
    this.#round = { round: 'step', now, tick, done, waiting: this.#stripes.length, outs };
    if (this.#stripes.length === 0) this.#afterSteps();
  }

  /** Another lane's answer to the round out. */
  stripeAnswer(s: number, msg: FromStripe): void {
    const round = this.#round;
    if (round === null) return;
    if (msg.t !== 'snapshot') {
      this.#laneMs[s] = (this.#laneMs[s] ?? 0) + msg.ms;
      for (const key of msg.lost) this.#zones.delete(key);
      if (msg.busy !== null) {
        const busy = new Set(msg.busy);
        for (const zone of this.#zones.values()) if (zone.stripe === s) zone.busy = busy.has(zone.key);
      }
    }
    if (msg.t === 'stepped' && round.round === 'step') for (const out of msg.zones) round.outs.set(out.key, out);
    else if (msg.t === 'published' && round.round === 'publish') for (const records of msg.zones) round.records.set(records[0], records);
    else if (msg.t === 'snapshot' && round.round === 'snapshot') round.zones.push(...msg.zones);
    else return;
    if (--round.waiting > 0) return;
    if (round.round === 'step') this.#afterSteps();
    else if (round.round === 'publish') this.#afterPublish();
    else {
      this.#round = null;
      round.done(round.zones);
    }
  }

  /** Every zone stepped: what their scripts asked of the world, in zone order; then crossings, `post_tick`, phases. */
  #afterSteps(): void {
    const round = this.#round as Extract<Round, { round: 'step' }>;
    const split = this.#split;
    let t = performance.now();
    const t0 = t;
    const spawns: { id: string; entity: JsonObject }[] = [];
    const despawns: string[] = [];
    const strays: [Zone, Stray[]][] = [];
    for (const zone of this.#zones.values()) {
      const out = round.outs.get(zone.key);
      if (!out) continue;
      for (const [playerId, seq] of out.consumed) {
        const player = this.#players.get(playerId);
        if (player && seq > player.consumed) player.consumed = seq;
      }
      for (const text of out.sends) this.#out.sends.push([text, null]);
      for (const spawn of out.spawns) spawns.push(spawn);
      for (const id of out.despawns) despawns.push(id);
      for (const [target, effect] of out.effects) this.#effect(target, effect);
      if (out.strays.length > 0) strays.push([zone, out.strays]);
    }
    const despawned = this.#applySpawns(spawns, despawns);
    this.#crossings(strays, despawned);
    let at = performance.now();
    split.crossing += at - t;
    t = at;
    // A spread world's tick spans turns of the lane: an edit taken by post_tick is taken here first, templates with it.
    if (this.#vm.reloadIfStale()) {
      this.#readTemplates();
      this.#templatesChanged = true;
    }
    const post = this.#vm.postTick(round.tick);
    if (post.finished) {
      this.#finished = post.finished.result;
      return this.#settle(t0);
    }
    if (post.vote !== null && isObjectJson(post.vote) && Object.keys(post.vote).length > 0) this.#vote = post.vote;
    this.#runPhases(round.now);
    split.world += performance.now() - t;
    if (this.#finished || round.tick % this.settings.broadcast_interval !== 0) return this.#settle(t0);
    if (this.#stripes.length === 0) {
      this.#broadcastDeltas(round.tick, null);
      return this.#settle(t0);
    }
    for (const stripe of this.#stripes) this.#o.relay!(stripe.s, { t: 'publish', ops: takeOps(stripe) });
    this.#round = { round: 'publish', now: round.now, tick: round.tick, done: round.done, waiting: this.#stripes.length, records: new Map() };
    // This lane's zones diff while the others do theirs.
    t = performance.now();
    for (const zone of this.#zones.values()) {
      if (zone.stripe !== 0) continue;
      const records: ZoneRecords = [zone.key, [], [], []];
      this.#local.diff(zone.key, this.#publishedOf(zone.key).entities, recordingSink(records, this.#entityZone));
      if (records[1].length > 0) this.#round.records.set(zone.key, records);
    }
    at = performance.now();
    split.diff += at - t;
    this.#laneMs[0]! += at - t0;
  }

  #afterPublish(): void {
    const round = this.#round as Extract<Round, { round: 'publish' }>;
    const t0 = performance.now();
    this.#broadcastDeltas(round.tick, round.records);
    this.#settle(t0);
  }

  /** The tick is over: idle zones stop (when it was not the world's last), and whoever waits hears it. */
  #settle(t0: number): void {
    const round = this.#round as Extract<Round, { round: 'step' | 'publish' }>;
    this.#round = null;
    if (!this.#finished) this.#stopIdleZones(round.now);
    this.#laneMs[0]! += performance.now() - t0;
    round.done();
  }

  /** An effect for a zone's next step, wherever it runs. */
  #effect(target: ZoneKey, effect: JsonObject): void {
    const zone = this.#zones.get(target);
    if (!zone) return;
    if (zone.stripe === 0) this.#local.effect(target, effect);
    else this.#opsOf(zone).push({ op: 'effect', key: target, effect });
  }

  #opsOf(zone: Zone): StripeOp[] {
    return this.#stripes[zone.stripe - 1]!.ops;
  }

  #put(zone: Zone, id: string, entity: JsonObject, player: boolean): void {
    if (zone.stripe === 0) this.#local.put(zone.key, id, entity, player);
    else {
      this.#opsOf(zone).push({ op: 'put', key: zone.key, id, entity, player });
      zone.busy = true;
    }
    if (player) zone.players.add(id);
  }

  /** Removes an entity from its zone; its fields when the zone is on this lane. */
  #take(zone: Zone, id: string): JsonObject | null {
    zone.players.delete(id);
    if (zone.stripe === 0) return this.#local.take(zone.key, id);
    this.#opsOf(zone).push({ op: 'take', key: zone.key, id });
    return null;
  }

  /**
   * Entities whose position left their zone move to the zone they are now
   * in, players within the `rehome` limits. An entity despawned from its
   * zone this tick stays gone.
   */
  #crossings(strays: [Zone, Stray[]][], despawned: Map<string, ZoneKey>): void {
    for (const [zone, list] of strays) {
      for (const { id, x, y, entity } of list) {
        const gone = despawned.get(id);
        if (gone !== undefined && (gone === zone.key || (gone === ANY_ZONE && !zone.players.has(id)))) continue;
        const key = this.#zoneAt(x, y);
        if (key === zone.key) continue;
        const player = zone.players.has(id) ? this.#players.get(id) : undefined;
        if (player && (!this.#o.limits.take('rehome', `p:${id}`).ok || !this.#o.limits.take('rehome_global', 'node').ok)) continue;
        const target = this.#ensureZone(key);
        if (!target) continue;
        // A zone on another lane sent the stray's fields with it (nothing of that zone ran since); this lane's are taken now.
        if (zone.stripe !== 0 && entity === undefined) continue;
        const taken = this.#take(zone, id);
        const moving = zone.stripe === 0 ? taken : entity!;
        if (!moving) continue;
        this.#put(target, id, moving, player !== undefined);
        if (player) {
          const from = player.zone;
          player.zone = key;
          if (player.attached) this.#watch(player, key, false);
          if (from !== key) this.#out.moved.push([id, target.x, target.y]);
        }
      }
    }
  }

  /** Despawns, then spawns; answers which zone each despawn took its entity from. */
  #applySpawns(spawns: { id: string; entity: JsonObject }[], despawns: string[]): Map<string, ZoneKey> {
    const despawned = new Map<string, ZoneKey>();
    for (const id of despawns) {
      const key = this.#entityZone.get(id);
      const zone = key === undefined ? undefined : this.#zones.get(key);
      if (zone && !zone.players.has(id)) {
        this.#take(zone, id);
        despawned.set(id, zone.key);
        continue;
      }
      for (const z of this.#zones.values()) {
        if (z.stripe === 0 && !z.players.has(id) && this.#local.take(z.key, id)) {
          despawned.set(id, z.key);
          break;
        }
      }
      if (despawned.has(id) || this.#stripes.length === 0) continue;
      for (const stripe of this.#stripes) stripe.ops.push({ op: 'despawn', id });
      despawned.set(id, ANY_ZONE);
    }
    for (const { id, entity } of spawns) {
      const zone = this.#ensureZone(this.#zoneAt(entity.x as number, entity.y as number));
      if (zone) this.#put(zone, id, entity, false);
    }
    return despawned;
  }

  /**
   * For another lane's stripe: the zones of the columns on either side of it,
   * each with every id it published and its entities near the facing edge,
   * which is all its zones' mirrors and `game.zone.apply` read of them.
   */
  #foreignOf(stripe: RemoteStripe): ForeignZone[] {
    const [first, last] = stripe.columns;
    const size = this.settings.zone_size;
    const band = this.settings.border_band * size;
    const out: ForeignZone[] = [];
    for (const zone of this.#zones.values()) {
      const before = zone.x === first - 1;
      if (!before && zone.x !== last + 1) continue;
      const ids: string[] = [];
      const near: [string, JsonRecord][] = [];
      const published = this.#published.get(zone.key);
      if (published) {
        for (const [id, entity] of published.entities) {
          ids.push(id);
          const ex = entity.x;
          if (band > 0 && typeof ex === 'number' && (before ? ex >= first * size - band : ex < (last + 1) * size + band)) near.push([id, entity]);
        }
      }
      out.push([zone.key, ids, near]);
    }
    return out;
  }

  #runPhases(now: number): void {
    const clock = this.#phases;
    if (!clock) return;
    if (runTransitions(clock, now, this.#vm)) {
      this.#toAll(JSON.stringify({ type: 'world.phase_changed', payload: { world_id: this.#o.worldId, ...clock.payload(now) } }));
      this.#phasePushedAt = now;
    } else if (now - this.#phasePushedAt >= PHASE_PUSH_EVERY_MS) {
      this.#toAll(JSON.stringify({ type: 'world.phase_changed', payload: clock.payload(now) }));
      this.#phasePushedAt = now;
    }
    if (clock.complete && !this.#finished) this.#finished = { status: 'phases_complete' };
  }

  /**
   * Every zone that changed since its last frame sends one delta to the
   * players watching it; then the acks. `diffed`: the zones' differences as
   * the stripes took them (this lane's already applied, the others' still to
   * replay); null: this lane runs every zone and diffs them now.
   */
  #broadcastDeltas(tick: number, diffed: Map<ZoneKey, ZoneRecords> | null): void {
    this.#publishEpoch++;
    const sink = this.#deltas;
    const split = this.#split;
    for (const zone of this.#zones.values()) {
      const published = this.#publishedOf(zone.key);
      sink.zone = zone.key;
      sink.ops.length = 0;
      sink.ids.length = 0;
      sink.fields.length = 0;
      const t0 = performance.now();
      if (diffed === null) this.#local.diff(zone.key, published.entities, sink);
      else {
        const records = diffed.get(zone.key);
        if (records !== undefined) {
          if (zone.stripe !== 0) replayRecords(published.entities, records, sink);
          else for (let i = 0; i < records[1].length; i++) sink.take(records[1][i]!, records[2][i]!, records[3][i]!);
        }
      }
      const t1 = performance.now();
      split.diff += t1 - t0;
      if (this.#o.poses && this.#binary) this.#poses(zone, published, tick, sink, this.#o.poses);
      if (sink.ops.length === 0) continue;
      published.seq++;
      const updates: string[] = [];
      for (let i = 0; i < sink.ops.length; i++) {
        const op = sink.ops[i]!;
        const id = sink.ids[i]!;
        updates.push(op === 'r' ? `{"op":"r","id":${quoted(id)}}` : entityText(op, id, sink.fields[i]!));
        // Slots follow the entities on every wire, so a client switching to binary finds them in step.
        if (op === 'a' && published.slots.bind(id) === null) published.binaryBehind = true;
      }
      const text = `{"type":"world.tick","payload":{"zone":[${zone.x},${zone.y}],"frame_seq":${published.seq},"kf":false,"tick":${tick},"updates":[${updates.join(',')}]}}`;
      this.#deltaBytes += text.length;
      const watchers = this.#watchers.get(zone.key);
      const watched = watchers !== undefined && watchers.size > 0;
      const bytes = this.#binary && watched ? this.#binaryDelta(zone, published, tick, sink) : null;
      for (let i = 0; i < sink.ops.length; i++) if (sink.ops[i] === 'r') published.slots.release(sink.ids[i]!);
      if (watched) this.#out.sends.push([text, [...watchers], bytes]);
      split.encode += performance.now() - t1;
    }
    for (const player of this.#players.values()) {
      if (!player.attached || player.consumed <= player.ackSent) continue;
      player.ackSent = player.consumed;
      this.#out.sends.push([`{"type":"world.ack","payload":{"tick":${tick},"seq":${player.consumed}}}`, [player.id]]);
    }
  }

  /**
   * Collects a zone's differences as delta records (one sink for every zone,
   * emptied per zone); an add's fields are the mirror's record, read before
   * the next diff changes it.
   */
  readonly #deltas = ((run: WorldRun): DeltaSink => {
    const sink: DeltaSink = {
      zone: 0 as ZoneKey,
      ops: [] as ('a' | 'u' | 'r')[],
      ids: [] as string[],
      fields: [] as (JsonRecord | null)[],
      added(id: string, fields: JsonRecord): void {
        run.#entityZone.set(id, sink.zone);
        sink.take('a', id, fields);
      },
      updated(id: string, changed: JsonRecord): void {
        sink.take('u', id, changed);
      },
      removed(id: string): void {
        if (run.#entityZone.get(id) === sink.zone) run.#entityZone.delete(id);
        sink.take('r', id, null);
      },
      take(op, id, fields): void {
        sink.ops.push(op);
        sink.ids.push(id);
        sink.fields.push(fields);
      },
    };
    return sink;
  })(this);

  /**
   * The delta's binary form; a keyframe of the zone's baseline instead when
   * binary subscribers missed bindings or this delta has no binary form; null
   * (the text goes to everyone) when neither encodes.
   */
  #binaryDelta(zone: Zone, published: Published, tick: number, sink: DeltaSink): Uint8Array | null {
    if (Date.now() < published.binaryOffUntil) return null;
    if (!published.binaryBehind) {
      const records: WireRecord<FieldInput>[] = [];
      let bound = true;
      for (let i = 0; i < sink.ops.length && bound; i++) {
        const op = sink.ops[i]!;
        const binding = published.slots.get(sink.ids[i]!);
        if (!binding) bound = false;
        else if (op === 'r') records.push({ op: 'remove', slot: binding.slot, gen: binding.gen });
        else if (op === 'a') records.push({ op: 'add', slot: binding.slot, gen: binding.gen, id: sink.ids[i]!, fields: wireFields(sink.fields[i]!) });
        else records.push({ op: 'update', slot: binding.slot, gen: binding.gen, fields: wireFields(sink.fields[i]!) });
      }
      const bytes = bound ? encodeWorldTick({ kind: 'sequenced', zone: [zone.x, zone.y], frame_seq: published.seq, kf: false, tick, records }) : null;
      if (bytes !== null) return bytes;
    }
    return this.#binaryKeyframe(zone.x, zone.y, published);
  }

  /**
   * The zone's poses for the datagram plane: every entity that changed, and
   * the entities at rest whose slot's turn it is (a client that lost a move is
   * repaired within the manifest's period). Only the plane's players on the
   * binary wire read them, so a zone whose binary frames are behind sends none.
   */
  #poses(zone: Zone, published: Published, tick: number, sink: DeltaSink, manifest: PoseManifest): void {
    const watchers = this.#watchers.get(zone.key);
    if (!watchers || watchers.size === 0 || published.binaryBehind) return;
    const changed = new Set<string>();
    for (let i = 0; i < sink.ops.length; i++) if (sink.ops[i] !== 'r') changed.add(sink.ids[i]!);
    const records: PoseRecord[] = [];
    for (const [id, entity] of published.entities) {
      const binding = published.slots.get(id);
      if (binding && (changed.has(id) || axialTurn(binding.slot, tick, manifest.periodTicks))) records.push({ slot: binding.slot, gen: binding.gen, fields: entity });
    }
    const batch = encodePoseDatagrams([zone.x, zone.y], tick, records, manifest, published.bseq);
    if (batch.bodies.length === 0) return;
    published.bseq = (published.bseq + batch.bodies.length) >>> 0;
    this.#out.poses.push([[...watchers], batch.bodies]);
    this.#out.saturated += batch.saturated;
  }

  /** The zone's baseline as a binary keyframe, or null (and the zone on text for a while) when it has no binary form. */
  #binaryKeyframe(x: number, y: number, published: Published): Uint8Array | null {
    if (Date.now() < published.binaryOffUntil) return null;
    const records: WireRecord<FieldInput>[] = [];
    let bytes: Uint8Array | null = null;
    let bound = true;
    for (const [id, entity] of published.entities) {
      const binding = published.slots.bind(id);
      if (!binding) {
        bound = false;
        break;
      }
      records.push({ op: 'add', slot: binding.slot, gen: binding.gen, id, fields: wireFields(entity) });
    }
    if (bound) bytes = encodeWorldTick({ kind: 'sequenced', zone: [x, y], frame_seq: published.seq, kf: true, tick: 0, records });
    if (bytes === null) {
      published.binaryBehind = true;
      published.binaryBackoff = Math.min(BINARY_RETRY_MAX_MS, published.binaryBackoff === 0 ? BINARY_RETRY_MS : published.binaryBackoff * 2);
      published.binaryOffUntil = Date.now() + published.binaryBackoff;
      if (this.#o.limits.take('script_log', `${this.#o.worldId}:binary_wire`).ok) {
        this.#o.log.warn('world_binary_wire_refused', { world_id: this.#o.worldId, zone: `${x},${y}`, retry_in_ms: published.binaryBackoff });
      }
      return null;
    }
    published.binaryBehind = false;
    published.binaryBackoff = 0;
    return bytes;
  }

  // ---- zones --------------------------------------------------------------

  #zoneAt(x: number, y: number): ZoneKey {
    const n = this.settings.grid_size;
    const size = this.settings.zone_size;
    const cx = Math.min(n - 1, Math.max(0, Math.floor((Number.isFinite(x) ? x : 0) / size)));
    const cy = Math.min(n - 1, Math.max(0, Math.floor((Number.isFinite(y) ? y : 0) / size)));
    return keyOf(cx, cy);
  }

  #ensureZone(key: ZoneKey, start: { entities?: Record<string, JsonObject>; zoneState?: JsonValue } = {}): Zone | null {
    const running = this.#zones.get(key);
    if (running) return running;
    if (this.#zones.size >= this.settings.max_active_zones) return null;
    const [x, y] = coordsOf(key);
    let zoneState = start.zoneState;
    if (zoneState === undefined) {
      const seeded = this.#seeds[`${x},${y}`];
      zoneState = this.#vm.zoneLoaded(x, y) ?? (isObjectJson(seeded) ? seeded.game_state : undefined);
    }
    const stripe = stripeOf(x, this.settings.grid_size, this.#stripes.length + 1);
    if (stripe === 0) {
      if (!this.#local.open(key, zoneState, start.entities)) return null;
    } else {
      this.#stripes[stripe - 1]!.ops.push({ op: 'open', key, ...(zoneState !== undefined ? { zoneState } : {}), ...(start.entities ? { entities: start.entities } : {}) });
    }
    const zone: Zone = { key, x, y, stripe, players: new Set(), idleSince: null, busy: true };
    this.#zones.set(key, zone);
    return zone;
  }

  #stopIdleZones(now: number): void {
    if (!this.settings.lazy_zones) return;
    for (const zone of [...this.#zones.values()]) {
      const idle = zone.players.size === 0 && this.#publishedOf(zone.key).entities.size === 0 && !(zone.stripe === 0 ? this.#local.busy(zone.key) : zone.busy);
      if (!idle) {
        zone.idleSince = null;
        continue;
      }
      zone.idleSince ??= now;
      if (now - zone.idleSince < this.settings.zone_idle_timeout) continue;
      if (zone.stripe === 0) this.#local.close(zone.key);
      else this.#opsOf(zone).push({ op: 'close', key: zone.key });
      this.#zones.delete(zone.key);
      this.#vm.zoneUnloaded(zone.x, zone.y);
    }
  }

  #publishedOf(key: ZoneKey): Published {
    let published = this.#published.get(key);
    if (!published) {
      published = { seq: 0, entities: new Map(), slots: new ZoneSlots(), binaryBehind: false, binaryOffUntil: 0, binaryBackoff: 0, frames: { epoch: -1, binary: false, keyframe: null, removals: null }, bseq: 0 };
      this.#published.set(key, published);
    }
    return published;
  }

  // ---- interest -----------------------------------------------------------

  /** The player now stands in `key`: it watches the ring around it; zones entering the ring get keyframes, leaving ones removals. */
  #watch(player: Player, key: ZoneKey, fresh: boolean): void {
    const [x, y] = coordsOf(key);
    const r = this.settings.view_radius;
    const n = this.settings.grid_size;
    const ring = new Set<ZoneKey>();
    for (let dx = -r; dx <= r; dx++) {
      for (let dy = -r; dy <= r; dy++) {
        const zx = x + dx;
        const zy = y + dy;
        if (zx >= 0 && zy >= 0 && zx < n && zy < n) ring.add(keyOf(zx, zy));
      }
    }
    for (const old of player.ring) if (!ring.has(old)) this.#unwatch(player, old);
    for (const k of ring) {
      if (!fresh && player.ring.has(k)) continue;
      let watchers = this.#watchers.get(k);
      if (!watchers) {
        watchers = new Set();
        this.#watchers.set(k, watchers);
      }
      watchers.add(player.id);
      this.#out.sends.push(this.#keyframe(k, [player.id]));
      const [cx, cy] = coordsOf(k);
      const chunk = this.#terrain?.get(cx, cy) ?? null;
      if (chunk !== null) this.#out.sends.push([`{"type":"world.terrain","payload":{"coords":[${cx},${cy}],"data":${JSON.stringify(chunk)}}}`, [player.id]]);
    }
    player.ring = ring;
  }

  #unwatch(player: Player, key: ZoneKey): void {
    this.#watchers.get(key)?.delete(player.id);
    player.ring.delete(key);
    const published = this.#publishedOf(key);
    const frames = this.#framesOf(published);
    if (frames.removals === null) {
      const [x, y] = coordsOf(key);
      const removals = [...published.entities.keys()].map((id) => `{"op":"r","id":${quoted(id)}}`);
      const text = `{"type":"world.tick","payload":{"zone":[${x},${y}],"tick":0,"updates":[${removals.join(',')}]}}`;
      let bytes: Uint8Array | null = null;
      if (this.#binary && !published.binaryBehind) {
        const records: WireRecord<FieldInput>[] = [];
        for (const id of published.entities.keys()) {
          const binding = published.slots.get(id);
          if (binding) records.push({ op: 'remove', slot: binding.slot, gen: binding.gen });
        }
        if (records.length === published.entities.size) bytes = encodeWorldTick({ kind: 'ungated', zone: [x, y], frame_seq: 0, kf: false, tick: 0, records });
      }
      frames.removals = [text, bytes];
    }
    this.#out.sends.push([frames.removals[0], [player.id], frames.removals[1]]);
  }

  /** A keyframe of the zone for `players`: its text, and its binary form when the world has binary players. */
  #keyframe(key: ZoneKey, players: string[]): [string, string[], Uint8Array | null] {
    const published = this.#publishedOf(key);
    const frames = this.#framesOf(published);
    if (frames.keyframe === null) {
      const [x, y] = coordsOf(key);
      const adds: string[] = [];
      for (const [id, entity] of published.entities) adds.push(entityText('a', id, entity));
      const text = `{"type":"world.tick","payload":{"zone":[${x},${y}],"frame_seq":${published.seq},"kf":true,"tick":0,"updates":[${adds.join(',')}]}}`;
      frames.keyframe = [text, this.#binary ? this.#binaryKeyframe(x, y, published) : null];
    }
    return [frames.keyframe[0], players, frames.keyframe[1]];
  }

  /** The zone's shared frames, emptied when a broadcast published since they were made or the world took up the binary wire. */
  #framesOf(published: Published): Published['frames'] {
    const frames = published.frames;
    if (frames.epoch !== this.#publishEpoch || frames.binary !== this.#binary) {
      frames.epoch = this.#publishEpoch;
      frames.binary = this.#binary;
      frames.keyframe = null;
      frames.removals = null;
    }
    return frames;
  }

  #broadcast(leaf: string, payload: JsonObject): void {
    this.#out.sends.push([broadcastText(leaf, payload), null]);
  }

  #toAll(text: string): void {
    const attached = [...this.#players.values()].filter((p) => p.attached).map((p) => p.id);
    if (attached.length > 0) this.#out.sends.push([text, attached]);
  }

  // ---- persistence ----------------------------------------------------------

  /** Every running zone's entities (players left out: they come back by joining) and state, once every stripe answered. */
  snapshot(done: (zones: ZoneSnapshot[]) => void): void {
    const zones = this.#local.snapshot(this.#tick);
    if (this.#stripes.length === 0) return done(zones);
    for (const stripe of this.#stripes) this.#o.relay!(stripe.s, { t: 'snapshot', tick: this.#tick, ops: takeOps(stripe) });
    this.#round = { round: 'snapshot', done, waiting: this.#stripes.length, zones };
  }

  #recover(recovery: WorldRecovery): void {
    const zones: JsonObject = {};
    for (const z of recovery.zones) {
      if (z.x < 0 || z.y < 0 || z.x >= this.settings.grid_size || z.y >= this.settings.grid_size) continue;
      this.#ensureZone(keyOf(z.x, z.y), { entities: z.entities, zoneState: z.zone_state });
      zones[`${z.x},${z.y}`] = { entities: z.entities, zone_state: z.zone_state, tick: z.tick };
      this.#tick = Math.max(this.#tick, z.tick);
    }
    this.#vm.recovered({ world_id: this.#o.worldId, zones });
  }

  close(): void {
    this.#local.closeAll();
    this.#zones.clear();
    this.#round = null;
    this.#vm.close();
  }
}

function takeOps(stripe: RemoteStripe): StripeOp[] {
  const ops = stripe.ops;
  stripe.ops = [];
  return ops;
}

function emptyOutput(): WorldOutput {
  return { sends: [], moved: [], poses: [], saturated: 0 };
}

/** `{"op":…,"id":…,…fields}`: fields sit flat beside `op` and `id` (fields of those names are the engine's). */
function entityText(op: 'a' | 'u', id: string, fields: JsonRecord): string {
  let text = `{"op":"${op}","id":${quoted(id)}`;
  for (const k in fields) {
    if (k === 'op' || k === 'id') continue;
    const v = fields[k];
    text += ',' + quoted(k) + ':' + (typeof v === 'number' && Number.isFinite(v) ? '' + v : JSON.stringify(v));
  }
  return text + '}';
}

// Ids and field names come back every broadcast; their JSON form is kept (bounded: ids of spawned entities keep coming).
const quotedTexts = new Map<string, string>();

function quoted(s: string): string {
  let text = quotedTexts.get(s);
  if (text === undefined) {
    text = JSON.stringify(s);
    if (quotedTexts.size >= 65536) quotedTexts.clear();
    quotedTexts.set(s, text);
  }
  return text;
}

/** An entity's fields as the binary wire takes them (`op` and `id` are the engine's, as in the text). */
function wireFields(fields: JsonRecord): Record<string, FieldInput> {
  if (!('op' in fields) && !('id' in fields)) return fields as Record<string, FieldInput>;
  const out: Record<string, FieldInput> = {};
  for (const k in fields) if (k !== 'op' && k !== 'id') out[k] = fields[k] as FieldInput;
  return out;
}
