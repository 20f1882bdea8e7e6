import { expect } from 'vitest';
import { WebSocket } from 'ws';
import { decodeWorldTick, type WireValue } from '../../runtime/worlds/binary-wire';
import type { TestServer } from './server';
import { registerPlayer, type Frame } from './ws-client';

/**
 * A world's `world.tick` frames replayed client side, on the JSON wire and on
 * the binary one (issue 35), and the replay property of world-wires.test.ts
 * and world-lanes.test.ts: whatever the players do (accepted and refused
 * inputs, zone crossings, spawns and despawns), a client replaying what it
 * receives sees exactly the zone's entities, tick by tick, on both wires.
 */

export type Fields = Record<string, WireValue>;

export interface ZoneView {
  seq: number;
  entities: Map<string, Fields>;
  /** The binary wire's bindings (slot → id and generation); unused on the JSON wire. */
  slots: Map<number, { id: string; gen: number }>;
}

export interface Change {
  id: string;
  zone: string;
  tick: number;
  fields: Fields;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Generous: the machine is shared, and a slow tick only delays what the test waits for. */
export async function until(what: string, done: () => boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!done()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** Zones within `r` of (x, y) on a `grid`-sided grid, as "x,y" keys, sorted. */
export function ringOf(x: number, y: number, r: number, grid: number): string[] {
  const out: string[] = [];
  for (let dx = -r; dx <= r; dx++) for (let dy = -r; dy <= r; dy++) if (x + dx >= 0 && y + dy >= 0 && x + dx < grid && y + dy < grid) out.push(`${x + dx},${y + dy}`);
  return out.sort();
}

/** Entities in one order whatever order they arrived in (fields sorted too); `rename` maps ids that differ between runs. */
export function canonical(entities: Iterable<[string, Fields]>, rename: (id: string, fields: Fields) => string = (id) => id): string {
  return [...entities]
    .map(([id, f]) => JSON.stringify([rename(id, f), Object.keys(f).sort().map((k) => [k, f[k]])]))
    .sort()
    .join('\n');
}

/** mulberry32: small, seeded, the same sequence on every machine. */
export function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The zone as the script sent it in a `world.truth`: an empty table is `[]`
 * inside the payload, and a field JSON cannot hold (NaN, inf) arrives null,
 * which on the wires is the field being absent.
 */
function truthEntities(raw: unknown): Map<string, Fields> {
  const out = new Map<string, Fields>();
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return out;
  for (const [id, e] of Object.entries(raw as Record<string, unknown>)) {
    if (e === null || typeof e !== 'object' || Array.isArray(e)) continue;
    const fields: Fields = {};
    for (const [k, v] of Object.entries(e as Record<string, WireValue>)) if (v !== null) fields[k] = v;
    out.set(id, fields);
  }
  return out;
}

/** What a client compares with the truths of the replay property (see `replayWorldScript`). */
export interface TruthCheck {
  /** Truths are compared once this entity was seen added (the last joiner's: before that, a join's entity is in the table, not yet published). */
  startId: string;
  /** The world's grid side, for the ring the player's zone must show it. */
  grid: number;
  /** Whether an entity carries a refused input's write. */
  poison: (id: string, fields: Fields) => boolean;
}

export interface ReplayOptions {
  /** The player to connect as; a fresh one unless given. */
  player?: { playerId: string; token: string };
  wire?: 'json' | 'binary';
  /** Maps ids that differ between runs in `history` (see `canonical`). */
  rename?: (client: ReplayClient) => (id: string, fields: Fields) => string;
  /** How long a request waits for its reply. */
  replyMs?: number;
  truths?: TruthCheck;
}

/**
 * One socket and the client-side replay of everything it receives, on the
 * JSON or the binary wire: per zone the entities (and slots), checked as each
 * frame lands (frame_seq order, slots and generations, keyframes of zones in
 * view equal to the replay, removal frames emptying their zone, `world.truth`
 * broadcasts equal to the replay), plus what an assertion needs afterwards
 * (every add, update and removal with its zone and tick, each zone's contents
 * after each delta, the order of deltas and broadcasts). Problems are
 * collected, not thrown, so a failure lists them all.
 */
export class ReplayClient {
  /** Every text frame, in arrival order. */
  readonly log: Frame[] = [];
  readonly zones = new Map<string, ZoneView>();
  /** Per zone, its canonical contents after its keyframe (tick -1) and after each delta. */
  readonly history = new Map<string, { tick: number; canon: string }[]>();
  /** Deltas (with their tick) and world.<event> broadcasts, in arrival order. */
  readonly order: { kind: 'delta' | 'event'; type: string; zone?: string; tick: number }[] = [];
  readonly adds: Change[] = [];
  readonly updates: Change[] = [];
  readonly removals: { id: string; zone: string; tick: number; leaving: boolean }[] = [];
  /** Keyframes as they arrived: zone and whether the zone was already in view (a resync, compared with the replay). */
  readonly keyframes: { zone: string; resync: boolean }[] = [];
  readonly leaves: string[] = [];
  readonly deltaTicks = new Set<number>();
  readonly problems: string[] = [];
  /** Binary and text world.tick frames, and truths compared with the replay. */
  readonly seen = { binary: 0, text: 0, truths: 0 };
  /** The latest `world.truth` of every zone, whoever watches it. */
  readonly truths = new Map<string, { n: number; refused: number; entities: Map<string, Fields> }>();
  /** Whether `truthCheck.startId` was seen added: truths are compared from then on. */
  started = false;
  rename: (id: string, fields: Fields) => string = (id) => id;
  truthCheck: TruthCheck | null = null;
  replyMs = 10_000;
  #waiters = new Map<string, (f: Frame) => void>();
  #cid = 0;

  private constructor(
    readonly label: string,
    readonly ws: WebSocket,
    readonly playerId: string,
    readonly token: string,
  ) {
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      try {
        if (isBinary) return this.#binary(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
        const frame = JSON.parse(data.toString()) as Frame;
        this.log.push(frame);
        if (frame.cid !== undefined && this.#waiters.has(String(frame.cid))) {
          this.#waiters.get(String(frame.cid))!(frame);
          this.#waiters.delete(String(frame.cid));
        }
        if (frame.type === 'world.tick') this.#text(frame.payload);
        else if (frame.type.startsWith('world.')) {
          this.order.push({ kind: 'event', type: frame.type, tick: typeof frame.payload?.tick === 'number' ? frame.payload.tick : -1 });
          if (frame.type === 'world.truth') this.#truth(frame.payload);
        }
      } catch (err) {
        this.problems.push(`${this.label}: handler threw: ${(err as Error).stack}`);
      }
    });
  }

  /** Opens `/ws` and connects as `player` (a fresh one unless given) on the wire asked for. */
  static async connect(server: TestServer, label: string, options: ReplayOptions = {}): Promise<ReplayClient> {
    const player = options.player ?? (await registerPlayer(server, 'lane'));
    const ws = new WebSocket(`ws://127.0.0.1:${server.port}/ws`);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const client = new ReplayClient(label, ws, player.playerId, player.token);
    if (options.rename) client.rename = options.rename(client);
    if (options.truths) client.truthCheck = options.truths;
    if (options.replyMs !== undefined) client.replyMs = options.replyMs;
    const wire = options.wire ?? 'json';
    const connected = await client.request('session.connect', { token: player.token, ...(wire === 'binary' ? { wire } : {}) });
    expect(connected.type, JSON.stringify(connected)).toBe('session.connected');
    expect(connected.payload.wire).toBe(wire);
    return client;
  }

  request(type: string, payload?: unknown): Promise<Frame> {
    const cid = `r${++this.#cid}`;
    const reply = new Promise<Frame>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.label}: no reply to ${type}`)), this.replyMs);
      this.#waiters.set(cid, (f) => (clearTimeout(timer), resolve(f)));
    });
    this.ws.send(JSON.stringify({ type, cid, ...(payload === undefined ? {} : { payload }) }));
    return reply;
  }

  send(type: string, payload: unknown, extra: Record<string, unknown> = {}): void {
    this.ws.send(JSON.stringify({ type, payload, ...extra }));
  }

  /** Waits for a text frame matching `match` among those that arrived from index `from` on. */
  async next(match: (f: Frame) => boolean, from = 0, ms = 10_000): Promise<Frame> {
    let found: Frame | undefined;
    await until(`${this.label}: a matching frame`, () => (found = this.log.slice(from).find(match)) !== undefined, ms);
    return found!;
  }

  close(): void {
    this.ws.close();
  }

  watched(): string[] {
    return [...this.zones.keys()].sort();
  }

  /** Where the replay holds entity `id`, if anywhere. */
  find(id: string): { zone: string; fields: Fields } | null {
    for (const [zone, view] of this.zones) {
      const fields = view.entities.get(id);
      if (fields) return { zone, fields };
    }
    return null;
  }

  /** The zone's canonical contents as of tick `t` (its last delta at or before `t`, else its keyframe), or null. */
  stateAt(zone: string, t: number): string | null {
    const h = this.history.get(zone);
    if (!h) return null;
    let at: string | null = null;
    for (const e of h) {
      if (e.tick > t) break;
      at = e.canon;
    }
    return at;
  }

  firstDeltaTick(): number {
    return this.deltaTicks.size === 0 ? Infinity : Math.min(...this.deltaTicks);
  }

  lastDeltaTick(): number {
    return this.deltaTicks.size === 0 ? -Infinity : Math.max(...this.deltaTicks);
  }

  #poisoned(id: string, fields: Fields): boolean {
    return this.truthCheck?.poison(id, fields) ?? false;
  }

  #problem(zone: string, what: string): void {
    if (this.problems.length < 40) this.problems.push(`${this.label} zone ${zone}: ${what}`);
  }

  #text(p: { zone: [number, number]; frame_seq?: number; kf?: boolean; tick: number; updates: ({ op: 'a' | 'u' | 'r'; id: string } & Fields)[] }): void {
    this.seen.text++;
    const zone = p.zone.join(',');
    const records = p.updates.map(({ op, id, ...fields }) => ({ op, id, fields: fields as Fields }));
    if (p.frame_seq === undefined) {
      if (p.kf !== undefined) this.#problem(zone, 'a removal frame with kf');
      return this.#leave(zone, p.tick, records.map((r) => (r.op === 'r' ? r.id : `not a removal: ${r.op}`)));
    }
    if (p.kf) {
      if (records.some((r) => r.op !== 'a')) this.#problem(zone, 'a keyframe holding other than adds');
      // A text keyframe binds no slot: binary frames that follow must start with a keyframe of their own.
      return this.#keyframe(zone, p.frame_seq, new Map(records.map((r) => [r.id, r.fields])), new Map());
    }
    const view = this.#delta(zone, p.frame_seq, p.tick);
    if (!view) return;
    for (const r of records) {
      if (r.op === 'a') this.#add(zone, view, r.id, r.fields, p.tick);
      else if (r.op === 'u') this.#update(zone, view, r.id, r.fields, p.tick);
      else if (r.op === 'r') {
        this.#remove(zone, view, r.id, p.tick, false);
        for (const [slot, b] of view.slots) if (b.id === r.id) view.slots.delete(slot);
      } else this.#problem(zone, `unknown op ${String(r.op)}`);
    }
    this.#record(zone, view, p.tick);
  }

  #binary(bytes: Uint8Array): void {
    this.seen.binary++;
    const f = decodeWorldTick(bytes);
    if (!f) return void this.problems.push(`${this.label}: a binary frame that does not decode`);
    const zone = f.zone.join(',');
    const view = this.zones.get(zone);
    const slotId = (slot: number, gen: number): string | null => {
      const b = view?.slots.get(slot);
      if (!b) this.#problem(zone, `slot ${slot} is not bound (frame_seq ${f.frame_seq}, kf ${f.kf})`);
      else if (b.gen !== gen) this.#problem(zone, `slot ${slot} named with generation ${gen}, bound with ${b.gen}`);
      return b && b.gen === gen ? b.id : null;
    };
    if (f.kind === 'ungated') {
      return this.#leave(zone, f.tick, f.records.map((r) => (r.op === 'remove' ? (slotId(r.slot, r.gen) ?? `unbound slot ${r.slot}`) : `not a removal: ${r.op}`)));
    }
    if (f.kf) {
      const entities = new Map<string, Fields>();
      const slots = new Map<number, { id: string; gen: number }>();
      for (const r of f.records) {
        if (r.op !== 'add') {
          this.#problem(zone, 'a keyframe holding other than adds');
          continue;
        }
        // The zone's slot table outlives any one frame: a keyframe names the bindings the zone already gave.
        const held = view ? [...view.slots.values()].find((b) => b.id === r.id) : undefined;
        if (held && (view!.slots.get(r.slot)?.id !== r.id || held.gen !== r.gen)) this.#problem(zone, `keyframe rebinds ${r.id} to slot ${r.slot}/${r.gen}`);
        slots.set(r.slot, { id: r.id, gen: r.gen });
        entities.set(r.id, { ...(r.fields ?? {}) });
      }
      return this.#keyframe(zone, f.frame_seq, entities, slots);
    }
    const delta = this.#delta(zone, f.frame_seq, f.tick);
    if (!delta) return;
    for (const r of f.records) {
      if (r.op === 'add') {
        if (delta.slots.has(r.slot)) this.#problem(zone, `add of ${r.id} into live slot ${r.slot}`);
        delta.slots.set(r.slot, { id: r.id, gen: r.gen });
        this.#add(zone, delta, r.id, { ...(r.fields ?? {}) }, f.tick);
        continue;
      }
      const id = slotId(r.slot, r.gen);
      if (id === null) continue;
      if (r.op === 'update') this.#update(zone, delta, id, r.fields ?? {}, f.tick);
      else {
        this.#remove(zone, delta, id, f.tick, false);
        delta.slots.delete(r.slot);
      }
    }
    this.#record(zone, delta, f.tick);
  }

  #keyframe(zone: string, seq: number, entities: Map<string, Fields>, slots: ZoneView['slots']): void {
    for (const [id, fields] of entities) if (this.#poisoned(id, fields)) this.#problem(zone, `a refused input's write in a keyframe: ${id} ${JSON.stringify(fields)}`);
    const view = this.zones.get(zone);
    this.keyframes.push({ zone, resync: view !== undefined });
    if (view) {
      // A keyframe of a zone already in view (a resync) is the server's baseline: the replay must already be it.
      if (seq < view.seq) this.#problem(zone, `keyframe frame_seq ${seq} behind ${view.seq}`);
      const replayed = canonical(view.entities);
      const sent = canonical(entities);
      if (replayed !== sent) this.#problem(zone, `keyframe differs from the replay:\n  keyframe ${sent}\n  replay   ${replayed}`);
    }
    this.zones.set(zone, { seq, entities, slots });
    if (!view) this.history.set(zone, [{ tick: -1, canon: canonical(entities, this.rename) }]);
  }

  #delta(zone: string, seq: number, tick: number): ZoneView | null {
    const view = this.zones.get(zone);
    if (!view) {
      this.#problem(zone, `delta ${seq} for a zone not in view`);
      return null;
    }
    if (seq !== view.seq + 1) this.#problem(zone, `delta frame_seq ${seq} after ${view.seq}`);
    view.seq = seq;
    const last = this.history.get(zone)?.at(-1);
    if (last && last.tick >= tick) this.#problem(zone, `delta of tick ${tick} after one of tick ${last.tick}`);
    this.deltaTicks.add(tick);
    this.order.push({ kind: 'delta', type: 'world.tick', zone, tick });
    return view;
  }

  #record(zone: string, view: ZoneView, tick: number): void {
    let h = this.history.get(zone);
    if (!h) this.history.set(zone, (h = []));
    h.push({ tick, canon: canonical(view.entities, this.rename) });
  }

  #add(zone: string, view: ZoneView, id: string, fields: Fields, tick: number): void {
    if (this.#poisoned(id, fields)) this.#problem(zone, `a refused input's write: add ${id} ${JSON.stringify(fields)}`);
    if (view.entities.has(id)) this.#problem(zone, `add of ${id}, already present`);
    view.entities.set(id, fields);
    this.adds.push({ id, zone, tick, fields: { ...fields } });
    if (id === this.truthCheck?.startId) this.started = true;
  }

  #update(zone: string, view: ZoneView, id: string, fields: Fields, tick: number): void {
    const e = view.entities.get(id);
    if (!e) return this.#problem(zone, `update of ${id}, not present`);
    for (const [k, v] of Object.entries(fields)) {
      if (v === null) delete e[k];
      else e[k] = v;
    }
    if (this.#poisoned(id, e)) this.#problem(zone, `a refused input's write: update ${id} ${JSON.stringify(fields)}`);
    this.updates.push({ id, zone, tick, fields: { ...fields } });
  }

  #remove(zone: string, view: ZoneView, id: string, tick: number, leaving: boolean): void {
    if (!view.entities.delete(id)) this.#problem(zone, `removal of ${id}, not present`);
    this.removals.push({ id, zone, tick, leaving });
  }

  /** A zone left the player's view: its removals name everything the client holds of it. */
  #leave(zone: string, tick: number, ids: string[]): void {
    this.leaves.push(zone);
    const view = this.zones.get(zone);
    if (!view) return this.#problem(zone, 'removal frame for a zone not in view');
    for (const id of ids) this.#remove(zone, view, id, tick, true);
    if (view.entities.size > 0) this.#problem(zone, `removal frame left ${[...view.entities.keys()].join(', ')}`);
    this.zones.delete(zone);
  }

  /** A zone's entity table as its zone_tick began: the previous tick's broadcast diffed it, so the replay must equal it now. */
  #truth(p: { zone: [number, number]; n: number; refused: number; entities: unknown }): void {
    const zone = p.zone.join(',');
    const entities = truthEntities(p.entities);
    this.truths.set(zone, { n: p.n, refused: p.refused, entities });
    const check = this.truthCheck;
    if (!check || !this.started) return;
    for (const [id, fields] of entities) if (check.poison(id, fields)) this.#problem(zone, `the zone kept a refused input's write: ${id} ${JSON.stringify(fields)}`);
    if (entities.has(this.playerId)) {
      const ring = ringOf(p.zone[0], p.zone[1], 1, check.grid).join(' ');
      if (this.watched().join(' ') !== ring) this.#problem(zone, `the player stands here but watches ${this.watched().join(' ')}, not ${ring}`);
    }
    const view = this.zones.get(zone);
    if (!view) return;
    this.seen.truths++;
    const replayed = canonical(view.entities);
    const truth = canonical(entities);
    if (replayed !== truth) this.#problem(zone, `replay differs from the zone (truth n=${p.n}):\n  zone   ${truth}\n  replay ${replayed}`);
  }
}

// ---------------------------------------------------------------------------
// The replay property.

/** An entity carrying one of the writes `replayWorldScript`'s refused inputs make. */
export const POISONED = (id: string, f: Fields | undefined): boolean => id === 'ghost' || (f !== undefined && (f.x === -999 || 'poison' in f));

/**
 * The property's world: every zone_tick first broadcasts its zone's entity
 * table (`world.truth`). A zone_tick runs before anything of its tick touches
 * the table, so the table it sends is the one the previous tick's broadcast
 * diffed, and the truth reaches each socket after that tick's deltas and
 * before the next tick's: at its arrival, the replay of that zone must equal
 * it. NPCs wander over the whole grid (across zone borders), change fields
 * of every kind and die; players move, set and clear fields, spawn NPCs at an
 * offset (into another zone), despawn the smallest NPC of their zone or the
 * smallest one their zone sees within 150 (a mirror of a touching zone), and
 * send inputs the game refuses after writing everywhere (`bad` errors,
 * `nothing` returns nil, `number` returns 42). `inf` writes a field JSON
 * cannot hold, `big` one beyond 32 bits, which forces the binary wire back to
 * text for the zones it visits. Numbers are multiples of 0.25 (f32 holds them
 * exactly) so that both wires must agree to the bit.
 */
export function replayWorldScript(o: { grid: number; start: number; borderBand?: number }): string {
  return `
game_type = "world"
match_size = 2
max_players = 4
tick_rate = 50
grid_size = ${o.grid}
zone_size = 100
view_radius = 1
broadcast_interval = 1
cold_tick_divisor = 1
lazy_zones = false
${o.borderBand === undefined ? '' : `border_band = ${o.borderBand}`}
empty_grace_ms = 200

-- Globals survive a refused input (decision 0038), so this counts every refused call the zone ran.
refused = 0

local EDGE = ${o.grid * 100}
local MOODS = { "calm", "curious", "cross" }
local SPEEDS = { -3.75, -2.25, -1.5, 1.5, 2.25, 3.75 }

function spawn_templates(config) return { npc = { type = "npc", hp = 12, mood = "calm", awake = true } } end
function init(config) return {} end
function join(player_id, state, ctx) return state end
function leave(player_id, state) return state end
function spawn_position(player_id, state) return { x = ${o.start}, y = ${o.start} } end
function post_tick(tick, state) return state end
function on_zone_loaded(cx, cy, state) return { cx = cx, cy = cy, n = 0, seed = cx * 7 + cy * 13 + 1 } end

local function rand(zs, n)
  zs.seed = (zs.seed * 75 + 74) % 65537
  return zs.seed % n
end

function zone_tick(entities, zs)
  zs.n = zs.n + 1
  game.broadcast("truth", { zone = { zs.cx, zs.cy }, n = zs.n, refused = refused, entities = entities })
  local npcs = 0
  for id, e in pairs(entities) do
    if e.type == "npc" then
      npcs = npcs + 1
      e.x = e.x + e.vx
      e.y = e.y + e.vy
      if e.x < 2 or e.x > EDGE - 2 then e.vx = -e.vx end
      if e.y < 2 or e.y > EDGE - 2 then e.vy = -e.vy end
      e.hp = e.hp - 1
      e.mood = MOODS[e.hp % 3 + 1]
      if e.hp % 3 == 0 then e.awake = not e.awake end
      if e.hp % 4 == 0 then e.tag = "t" .. e.hp else e.tag = nil end
      if e.hp <= 0 then game.zone.despawn(id) end
    end
  end
  if npcs < 2 and rand(zs, 4) == 0 then
    local x = zs.cx * 100 + 10 + rand(zs, 80) + 0.25 * rand(zs, 4)
    local y = zs.cy * 100 + 10 + rand(zs, 80) + 0.25 * rand(zs, 4)
    game.zone.spawn("npc", x, y, { vx = SPEEDS[rand(zs, 6) + 1], vy = SPEEDS[rand(zs, 6) + 1], hp = 8 + rand(zs, 30) })
  end
  return entities, zs
end

function handle_input(player_id, input, entities)
  local me = entities[player_id]
  if input.bad or input.nothing or input.number then
    refused = refused + 1
    -- Writes of every kind before the refusal; none may reach a client.
    me.x = -999
    me.label = nil
    me.flag = nil
    me.poison = true
    entities.ghost = { x = 5, y = 5, poison = true }
    for id in pairs(entities) do
      if id ~= player_id and id ~= "ghost" then entities[id] = nil break end
    end
    if input.bad then error("refused after writing") end
    if input.nothing then return nil end
    return 42
  end
  if input.dx then me.x = me.x + input.dx; me.y = me.y + input.dy end
  if input.label ~= nil then me.label = input.label end
  if input.flag ~= nil then me.flag = input.flag end
  if input.score then me.score = input.score end
  if input.clear then me[input.clear] = nil end
  if input.inf then me.w = math.huge end
  if input.big then me.big = 2^40 end
  if input.spawn then game.zone.spawn("npc", me.x + input.spawn, me.y, { vx = 1.5, vy = -2.25, hp = 14, owner = player_id }) end
  -- The smallest id, so the pick does not depend on any table's order: of this zone, or of what it sees nearby (mirrors too).
  local pick
  if input.despawn then
    for id, e in pairs(entities) do
      if e.type == "npc" and (pick == nil or id < pick) then pick = id end
    end
  end
  if input.zap then
    for _, m in ipairs(game.spatial.neighbours_radius(me.x, me.y, 150, { type = "npc" })) do
      if pick == nil or m.id < pick then pick = m.id end
    end
  end
  if pick then game.zone.despawn(pick) end
  return entities
end
`;
}

interface PropertyPlayer {
  id: string;
  /** The JSON socket its inputs go through. */
  socket: ReplayClient;
  /** What its entity must end as: every accepted input applied in order, no refused one. */
  model: Fields;
}

/**
 * A run of the property: two players on a world of `replayWorldScript`, each
 * with a JSON and a binary socket, random inputs, and the checks afterwards.
 */
export class ReplayProperty {
  refusedSent = 0;

  private constructor(
    readonly sockets: ReplayClient[],
    readonly players: [PropertyPlayer, PropertyPlayer],
    readonly edge: number,
  ) {}

  /** The JSON sockets (a's, b's). */
  get json(): ReplayClient[] {
    return [this.players[0].socket, this.players[1].socket];
  }

  /** The binary sockets (a's, b's). */
  get binary(): ReplayClient[] {
    return this.sockets.filter((w) => !this.json.includes(w));
  }

  /** Two fresh players each with a socket on either wire, joined to a new world of `mode` (a `replayWorldScript` of `grid` and `start`), every socket past the second join. */
  static async start(server: TestServer, mode: string, o: { grid: number; start: number; replyMs?: number }): Promise<ReplayProperty> {
    const pa = await registerPlayer(server, 'wa');
    const pb = await registerPlayer(server, 'wb');
    const truths = { startId: pb.playerId, grid: o.grid, poison: POISONED };
    const open = (label: string, player: typeof pa, wire: 'json' | 'binary') => ReplayClient.connect(server, label, { player, wire, truths, ...(o.replyMs === undefined ? {} : { replyMs: o.replyMs }) });
    // Every socket opens before the joins: keyframes go only to the sockets a player has when it joins.
    const sockets = [await open('a/json', pa, 'json'), await open('a/binary', pa, 'binary'), await open('b/json', pb, 'json'), await open('b/binary', pb, 'binary')];
    const [aJson, , bJson] = sockets as [ReplayClient, ReplayClient, ReplayClient, ReplayClient];
    const created = await aJson.request('world.create', { mode });
    expect(created.type, JSON.stringify(created)).toBe('world.joined');
    expect((await bJson.request('world.join', { world_id: created.payload.world_id })).type).toBe('world.joined');
    await until('every socket to see the second joiner published', () => sockets.every((w) => w.started));
    const at = (): Fields => ({ x: o.start, y: o.start, type: 'player' });
    return new ReplayProperty(
      sockets,
      [
        { id: pa.playerId, socket: aJson, model: at() },
        { id: pb.playerId, socket: bJson, model: at() },
      ],
      o.grid * 100,
    );
  }

  /** Sends `payload` as p's world.input and applies it to p's model unless the script refuses it. */
  input(p: PropertyPlayer, payload: Record<string, WireValue>): void {
    p.socket.send('world.input', payload);
    const me = p.model;
    if (payload.bad || payload.nothing || payload.number) {
      this.refusedSent++;
      return;
    }
    if (typeof payload.dx === 'number') {
      me.x = (me.x as number) + payload.dx;
      me.y = (me.y as number) + (payload.dy as number);
    }
    if (payload.label !== undefined) me.label = payload.label;
    if (payload.flag !== undefined) me.flag = payload.flag;
    if (payload.score !== undefined) me.score = payload.score;
    if (typeof payload.clear === 'string') delete me[payload.clear];
    if (payload.big) me.big = 2 ** 40;
  }

  /** A step of (dx, dy), each turned back where it would take p within 5 of the world's edge. */
  move(p: PropertyPlayer, dx: number, dy: number): void {
    const { x, y } = p.model as { x: number; y: number };
    if (x + dx < 5 || x + dx > this.edge - 5) dx = -dx;
    if (y + dy < 5 || y + dy > this.edge - 5) dy = -dy;
    this.input(p, { dx, dy });
  }

  /**
   * `inputs` rounds from `seed`: a random player, `each` sending its input;
   * at the rounds of `resyncAt`, a world.resync of a zone the player watches
   * (a fresh keyframe: the baseline the replay must already hold; two per
   * 10 s allowed); a random pause of 5 to 34 ms.
   */
  async drive(o: { seed: number; inputs: number; resyncAt: number[] }, each: (round: { i: number; p: PropertyPlayer; random: () => number; pick: <T>(list: readonly T[]) => T }) => void): Promise<void> {
    const random = prng(o.seed);
    const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
    for (let i = 0; i < o.inputs; i++) {
      const p = pick(this.players);
      each({ i, p, random, pick });
      if (o.resyncAt.includes(i)) {
        const watched = p.socket.watched();
        if (watched.length > 0) p.socket.send('world.resync', { zone: pick(watched).split(',').map(Number) });
      }
      await sleep(5 + Math.floor(random() * 30));
    }
    // Inputs sent last are handled on the next tick and published the same tick; a few more truths settle it.
    const newest = (w: ReplayClient) => Math.max(...[...w.truths.values()].map((t) => t.n));
    const settled = newest(this.players[0].socket) + 6;
    await until('the zones to tick past the last inputs', () => this.sockets.every((w) => newest(w) >= settled));
  }

  /**
   * The property held: no socket found a problem; each compared more than
   * `truths` truths and saw zones leave its view, the binary ones got binary
   * frames and the JSON ones none, and a resync's keyframe was checked; the
   * zones ran every refused input sent (more than `refused`) and kept
   * nothing of them; each player's entity is its model, in the one zone whose
   * truth holds it and in every replay watching that zone.
   */
  expectHeld(o: { truths: number; refused: number }): void {
    for (const w of this.sockets) expect(w.problems, w.label).toEqual([]);
    // Not vacuous: every socket compared many truths and saw zones leave its view; the binary sockets got bytes.
    for (const w of this.sockets) {
      expect(w.seen.truths, w.label).toBeGreaterThan(o.truths);
      expect(w.leaves.length, w.label).toBeGreaterThan(0);
    }
    for (const w of this.binary) expect(w.seen.binary, w.label).toBeGreaterThan(50);
    for (const w of this.json) expect(w.seen.binary, w.label).toBe(0);
    expect(this.json.flatMap((w) => w.keyframes.filter((k) => k.resync)).length).toBeGreaterThan(0);

    // The refused inputs did run (the zones counted them) and left nothing.
    const truths = this.players[0].socket.truths;
    let refusedRun = 0;
    for (const t of truths.values()) refusedRun += t.refused;
    expect(refusedRun).toBe(this.refusedSent);
    expect(this.refusedSent).toBeGreaterThan(o.refused);

    for (const { id, model } of this.players) {
      const holding = [...truths].filter(([, t]) => t.entities.has(id));
      expect(holding.map(([zone]) => zone)).toHaveLength(1);
      const [zone, truth] = holding[0]!;
      expect(truth.entities.get(id)).toEqual(model);
      for (const w of this.sockets) if (w.zones.has(zone)) expect(w.zones.get(zone)!.entities.get(id), w.label).toEqual(model);
    }
  }

  close(): void {
    for (const w of this.sockets) w.close();
  }
}
