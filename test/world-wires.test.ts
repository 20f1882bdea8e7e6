import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { decodeWorldTick, type WireValue, type WorldTickFrame } from '../runtime/worlds/binary-wire';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { registerPlayer, type Frame } from './support/ws-client';

/**
 * The property of issue 35: whatever the players do (accepted and refused
 * inputs, zone crossings, spawns and despawns), a client replaying what it
 * receives sees exactly the zone's entities, tick by tick, on the JSON wire
 * and on the binary one.
 *
 * The truth comes from the script itself: every zone_tick first broadcasts
 * its zone's entity table (`world.truth`). A zone_tick runs before anything
 * of its tick touches the table, so the table it sends is the one the
 * previous tick's broadcast diffed, and the truth reaches each socket after
 * that tick's deltas and before the next tick's: at its arrival, the replay
 * of that zone must equal it.
 *
 * Numbers are multiples of 0.25 (f32 holds them exactly) so that both wires
 * must agree to the bit; one field beyond 32 bits forces the binary wire back
 * to text for the zones it visits.
 */
const WIRES = `
game_type = "world"
match_size = 2
max_players = 4
tick_rate = 50
grid_size = 3
zone_size = 100
view_radius = 1
broadcast_interval = 1
cold_tick_divisor = 1
lazy_zones = false
empty_grace_ms = 200

-- Globals survive a refused input (decision 0038), so this counts every refused call the zone ran.
refused = 0

local MOODS = { "calm", "curious", "cross" }
local SPEEDS = { -3.75, -2.25, -1.5, 1.5, 2.25, 3.75 }

function spawn_templates(config) return { npc = { type = "npc", hp = 12, mood = "calm", awake = true } } end
function init(config) return {} end
function join(player_id, state, ctx) return state end
function leave(player_id, state) return state end
function spawn_position(player_id, state) return { x = 150, y = 150 } end
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
      if e.x < 2 or e.x > 298 then e.vx = -e.vx end
      if e.y < 2 or e.y > 298 then e.vy = -e.vy end
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
    me.label = "POISON"
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
  if input.label then me.label = input.label end
  if input.flag ~= nil then me.flag = input.flag end
  if input.score then me.score = input.score end
  if input.clear then me[input.clear] = nil end
  if input.inf then me.w = math.huge end
  if input.big then me.big = 2^40 end
  if input.spawn then game.zone.spawn("npc", me.x, me.y, { vx = 1.5, vy = -2.25, hp = 9, owner = player_id }) end
  if input.despawn then
    -- The smallest id, so the pick does not depend on the table's order.
    local pick
    for id, e in pairs(entities) do
      if e.type == "npc" and (pick == nil or id < pick) then pick = id end
    end
    if pick then game.zone.despawn(pick) end
  end
  return entities
end
`;

type Fields = Record<string, WireValue>;

interface ZoneView {
  seq: number;
  entities: Map<string, Fields>;
  /** The binary wire's bindings (slot → id and generation); unused on the JSON wire. */
  slots: Map<number, { id: string; gen: number }>;
}

const GRID = 3;

function ringOf(zone: string): string[] {
  const [x, y] = zone.split(',').map(Number) as [number, number];
  const out: string[] = [];
  for (let dx = -1; dx <= 1; dx++) for (let dy = -1; dy <= 1; dy++) if (x + dx >= 0 && y + dy >= 0 && x + dx < GRID && y + dy < GRID) out.push(`${x + dx},${y + dy}`);
  return out.sort();
}

/** Entities in one order whatever order they arrived in, for comparison and for messages. */
function canonical(entities: Iterable<[string, Fields]>): string {
  const sorted = [...entities].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify(sorted.map(([id, f]) => [id, Object.fromEntries(Object.entries(f).sort(([a], [b]) => (a < b ? -1 : 1)))]));
}

/**
 * The zone as the script sent it: an empty table is `[]` inside the payload,
 * and a field JSON cannot hold (NaN, inf) arrives null, which on the wires is
 * the field being absent.
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

const POISON = (id: string, fields: Fields | undefined): boolean => id === 'ghost' || (fields !== undefined && (fields.x === -999 || fields.label === 'POISON' || 'poison' in fields));

/**
 * One socket and the client-side replay of what it receives: per zone, the
 * entities (and on the binary wire the slot table), checked as each frame
 * lands. Problems are collected, not thrown, so a failure lists them all.
 */
class WireSocket {
  readonly zones = new Map<string, ZoneView>();
  readonly problems: string[] = [];
  /** Truth frames of watched zones compared with the replay, keyframes checked against it, frames by kind. */
  readonly seen = { truths: 0, keyframes: 0, binaryTicks: 0, textTicks: 0, leaves: 0 };
  /** The latest truth of every zone, whoever watches it. */
  readonly truths = new Map<string, { n: number; refused: number; entities: Map<string, Fields> }>();
  /** Comparisons start once the last joiner's entity came in a delta: before that a join's entity is in the table but not yet published. */
  started = false;
  #waiters = new Map<string, (f: Frame) => void>();
  #cid = 0;

  private constructor(
    readonly label: string,
    readonly ws: WebSocket,
    readonly playerId: string,
    readonly startId: string,
  ) {
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      try {
        if (isBinary) return this.#binary(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
        const frame = JSON.parse(data.toString()) as Frame;
        if (frame.cid !== undefined && this.#waiters.has(String(frame.cid))) {
          this.#waiters.get(String(frame.cid))!(frame);
          this.#waiters.delete(String(frame.cid));
        }
        if (frame.type === 'world.tick') this.#text(frame.payload);
        else if (frame.type === 'world.truth') this.#truth(frame.payload);
      } catch (err) {
        this.problems.push(`handler threw: ${(err as Error).stack}`);
      }
    });
  }

  static async open(port: number, label: string, player: { playerId: string; token: string }, wire: 'json' | 'binary', startId: string): Promise<WireSocket> {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const socket = new WireSocket(label, ws, player.playerId, startId);
    const connected = await socket.request('session.connect', { token: player.token, ...(wire === 'binary' ? { wire } : {}) });
    expect(connected.payload.wire).toBe(wire);
    return socket;
  }

  request(type: string, payload: unknown): Promise<Frame> {
    const cid = `w${++this.#cid}`;
    const reply = new Promise<Frame>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.label}: no reply to ${type}`)), 5000);
      this.#waiters.set(cid, (f) => (clearTimeout(timer), resolve(f)));
    });
    this.ws.send(JSON.stringify({ type, cid, payload }));
    return reply;
  }

  send(type: string, payload: unknown): void {
    this.ws.send(JSON.stringify({ type, payload }));
  }

  #problem(zone: string, what: string): void {
    if (this.problems.length < 40) this.problems.push(`${this.label} zone ${zone}: ${what}`);
  }

  #text(p: { zone: [number, number]; frame_seq?: number; kf?: boolean; updates: ({ op: 'a' | 'u' | 'r'; id: string } & Fields)[] }): void {
    this.seen.textTicks++;
    const zone = p.zone.join(',');
    const records = p.updates.map(({ op, id, ...fields }) => ({ op, id, fields: fields as Fields }));
    if (p.frame_seq === undefined) return this.#leave(zone, records.map((r) => (r.op === 'r' ? r.id : `not a removal: ${r.op}`)));
    if (p.kf) {
      if (records.some((r) => r.op !== 'a')) this.#problem(zone, 'a keyframe holding other than adds');
      // A text keyframe binds no slot: the binary frames that follow must start with a keyframe of their own.
      return this.#keyframe(zone, p.frame_seq, new Map(records.map((r) => [r.id, r.fields])), new Map());
    }
    const view = this.#delta(zone, p.frame_seq);
    if (!view) return;
    for (const r of records) {
      if (r.op === 'a') this.#add(zone, view, r.id, r.fields);
      else if (r.op === 'u') this.#update(zone, view, r.id, r.fields);
      else {
        this.#remove(zone, view, r.id);
        for (const [slot, b] of view.slots) if (b.id === r.id) view.slots.delete(slot);
      }
    }
  }

  #binary(bytes: Uint8Array): void {
    this.seen.binaryTicks++;
    const f: WorldTickFrame | null = decodeWorldTick(bytes);
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
      return this.#leave(zone, f.records.map((r) => (r.op === 'remove' ? (slotId(r.slot, r.gen) ?? `unbound slot ${r.slot}`) : `not a removal: ${r.op}`)));
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
    const delta = this.#delta(zone, f.frame_seq);
    if (!delta) return;
    for (const r of f.records) {
      if (r.op === 'add') {
        if (delta.slots.has(r.slot)) this.#problem(zone, `add of ${r.id} into live slot ${r.slot}`);
        delta.slots.set(r.slot, { id: r.id, gen: r.gen });
        this.#add(zone, delta, r.id, { ...(r.fields ?? {}) });
        continue;
      }
      const id = slotId(r.slot, r.gen);
      if (id === null) continue;
      if (r.op === 'update') this.#update(zone, delta, id, r.fields ?? {});
      else {
        this.#remove(zone, delta, id);
        delta.slots.delete(r.slot);
      }
    }
  }

  #keyframe(zone: string, seq: number, entities: Map<string, Fields>, slots: ZoneView['slots']): void {
    for (const [id, fields] of entities) if (POISON(id, fields)) this.#problem(zone, `a refused input's write in a keyframe: ${id} ${JSON.stringify(fields)}`);
    const view = this.zones.get(zone);
    if (view) {
      // A keyframe of a zone already in view (a resync) is the server's baseline: the replay must already be it.
      if (seq < view.seq) this.#problem(zone, `keyframe frame_seq ${seq} behind ${view.seq}`);
      if (this.started) {
        this.seen.keyframes++;
        const replayed = canonical(view.entities);
        const sent = canonical(entities);
        if (replayed !== sent) this.#problem(zone, `keyframe differs from the replay:\n  keyframe ${sent}\n  replay   ${replayed}`);
      }
    }
    this.zones.set(zone, { seq, entities, slots });
  }

  #delta(zone: string, seq: number): ZoneView | null {
    const view = this.zones.get(zone);
    if (!view) {
      this.#problem(zone, `delta ${seq} for a zone not in view`);
      return null;
    }
    if (seq !== view.seq + 1) this.#problem(zone, `delta frame_seq ${seq} after ${view.seq}`);
    view.seq = seq;
    return view;
  }

  #add(zone: string, view: ZoneView, id: string, fields: Fields): void {
    if (POISON(id, fields)) this.#problem(zone, `a refused input's write: add ${id} ${JSON.stringify(fields)}`);
    if (view.entities.has(id)) this.#problem(zone, `add of ${id}, already present`);
    view.entities.set(id, fields);
    if (id === this.startId && !this.started) this.started = true;
  }

  #update(zone: string, view: ZoneView, id: string, fields: Fields): void {
    const e = view.entities.get(id);
    if (!e) return this.#problem(zone, `update of ${id}, not present`);
    for (const [k, v] of Object.entries(fields)) {
      if (v === null) delete e[k];
      else e[k] = v;
    }
    if (POISON(id, e)) this.#problem(zone, `a refused input's write: update ${id} ${JSON.stringify(fields)}`);
  }

  #remove(zone: string, view: ZoneView, id: string): void {
    if (!view.entities.delete(id)) this.#problem(zone, `removal of ${id}, not present`);
  }

  /** A zone left the player's view: its removals name everything the client holds of it. */
  #leave(zone: string, ids: string[]): void {
    this.seen.leaves++;
    const view = this.zones.get(zone);
    if (!view) return this.#problem(zone, 'removal frame for a zone not in view');
    for (const id of ids) this.#remove(zone, view, id);
    if (view.entities.size > 0) this.#problem(zone, `removal frame left ${[...view.entities.keys()].join(', ')}`);
    this.zones.delete(zone);
  }

  #truth(p: { zone: [number, number]; n: number; refused: number; entities: unknown }): void {
    const zone = p.zone.join(',');
    const entities = truthEntities(p.entities);
    this.truths.set(zone, { n: p.n, refused: p.refused, entities });
    if (!this.started) return;
    for (const [id, fields] of entities) if (POISON(id, fields)) this.#problem(zone, `the zone kept a refused input's write: ${id} ${JSON.stringify(fields)}`);
    if (entities.has(this.playerId)) {
      const watched = [...this.zones.keys()].sort().join(' ');
      const ring = ringOf(zone).join(' ');
      if (watched !== ring) this.#problem(zone, `the player stands here but watches ${watched}, not ${ring}`);
    }
    const view = this.zones.get(zone);
    if (!view) return;
    this.seen.truths++;
    const replayed = canonical(view.entities);
    const truth = canonical(entities);
    if (replayed !== truth) this.#problem(zone, `replay differs from the zone (truth n=${p.n}):\n  zone   ${truth}\n  replay ${replayed}`);
  }
}

/** mulberry32: small, seeded, the same sequence on every machine. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SEED = Number(process.env.WORLD_WIRES_SEED ?? 35_035);
const INPUTS = 220;
const STEPS = [-45, -30.5, -12.25, 12.25, 30.5, 45];
const LABELS = ['north', 'south', 'ëast', 'w€st', ''];
const SCORES = [3, 3.5, -2, 0.25, 7, 1e6];
const CLEARABLE = ['label', 'flag', 'score', 'big', 'w'];

let s: TestServer;
let game: ReturnType<typeof gameDir>;

beforeAll(async () => {
  game = gameDir({ 'config.lua': 'return { wires = "wires.lua" }', 'wires.lua': WIRES });
  s = await startTestServer({}, { gameDir: game.dir });
});
afterAll(async () => {
  await s?.close();
  game?.remove();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Generous: the machine is shared, and a slow tick only delays what the test waits for. */
async function until(what: string, done: () => boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!done()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

describe('world.tick replayed on both wires', () => {
  it(`a client replaying either wire sees exactly each watched zone's entities through random inputs, refusals, crossings and spawns (seed ${SEED})`, { timeout: 60_000 }, async () => {
    const a = await registerPlayer(s);
    const b = await registerPlayer(s);
    // Every socket opens before the joins: keyframes go only to the sockets a player has when it joins.
    const sockets = [
      await WireSocket.open(s.port, 'a/json', a, 'json', b.playerId),
      await WireSocket.open(s.port, 'a/binary', a, 'binary', b.playerId),
      await WireSocket.open(s.port, 'b/json', b, 'json', b.playerId),
      await WireSocket.open(s.port, 'b/binary', b, 'binary', b.playerId),
    ];
    const [aJson, aBinary, bJson, bBinary] = sockets as [WireSocket, WireSocket, WireSocket, WireSocket];
    const created = await aJson.request('world.create', { mode: 'wires' });
    expect(created.type).toBe('world.joined');
    expect((await bJson.request('world.join', { world_id: created.payload.world_id })).type).toBe('world.joined');
    await until('every socket to see the second joiner published', () => sockets.every((w) => w.started));

    // What each player's own entity must end as: every accepted input applied in order, no refused one.
    const model: Record<string, Fields> = {
      [a.playerId]: { x: 150, y: 150, type: 'player' },
      [b.playerId]: { x: 150, y: 150, type: 'player' },
    };
    const players = [
      { id: a.playerId, socket: aJson },
      { id: b.playerId, socket: bJson },
    ];
    let refusedSent = 0;
    const input = (p: (typeof players)[number], payload: Record<string, WireValue>) => {
      p.socket.send('world.input', payload);
      const me = model[p.id]!;
      if (payload.bad || payload.nothing || payload.number) {
        refusedSent++;
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
    };

    // Opening moves take the players to opposite corners, so both see zones leave and enter their view.
    for (let i = 0; i < 3; i++) {
      input(players[0]!, { dx: -45, dy: -45 });
      input(players[1]!, { dx: 45, dy: 45 });
      await sleep(60);
    }

    const random = prng(SEED);
    const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
    const resyncAt = new Set([Math.floor(INPUTS / 3), Math.floor((2 * INPUTS) / 3)]);
    for (let i = 0; i < INPUTS; i++) {
      const p = pick(players);
      const me = model[p.id]!;
      const r = random();
      if (i === Math.floor(INPUTS * 0.7)) input(players[1]!, { big: true });
      else if (r < 0.34) {
        let dx = pick(STEPS);
        let dy = pick(STEPS);
        if ((me.x as number) + dx < 5 || (me.x as number) + dx > 295) dx = -dx;
        if ((me.y as number) + dy < 5 || (me.y as number) + dy > 295) dy = -dy;
        input(p, { dx, dy });
      } else if (r < 0.42) input(p, { label: pick(LABELS) });
      else if (r < 0.5) input(p, { flag: random() < 0.5 });
      else if (r < 0.57) input(p, { score: pick(SCORES) });
      else if (r < 0.65) input(p, { clear: pick(CLEARABLE) });
      else if (r < 0.71) input(p, { spawn: true });
      else if (r < 0.76) input(p, { despawn: true });
      else if (r < 0.78) input(p, { inf: true });
      else input(p, { [pick(['bad', 'nothing', 'number'])]: true });
      if (resyncAt.has(i)) {
        // A fresh keyframe of a watched zone: the baseline the replay must already hold (two per 10 s allowed).
        const watched = [...p.socket.zones.keys()];
        if (watched.length > 0) p.socket.send('world.resync', { zone: pick(watched).split(',').map(Number) });
      }
      await sleep(5 + Math.floor(random() * 30));
    }
    // Inputs sent last are handled on the next tick and published the same tick; a few more truths settle it.
    const settled = aJson.truths.get('1,1')!.n + 6;
    await until('the zones to tick past the last inputs', () => sockets.every((w) => (w.truths.get('1,1')?.n ?? 0) >= settled));

    for (const w of sockets) expect(w.problems, w.label).toEqual([]);
    // Not vacuous: every socket compared many ticks, saw zones leave its view, and the binary sockets got bytes.
    for (const w of sockets) {
      expect(w.seen.truths, w.label).toBeGreaterThan(100);
      expect(w.seen.leaves, w.label).toBeGreaterThan(0);
    }
    for (const w of [aBinary, bBinary]) expect(w.seen.binaryTicks, w.label).toBeGreaterThan(50);
    for (const w of [aJson, bJson]) expect(w.seen.binaryTicks, w.label).toBe(0);
    // The field beyond 32 bits sent b's zones to text: the binary socket replayed text frames too.
    expect(bBinary.seen.textTicks).toBeGreaterThan(0);
    expect(aJson.seen.keyframes + bJson.seen.keyframes).toBeGreaterThan(0);

    // The refused inputs did run (the zones counted them) and left nothing.
    let refusedRun = 0;
    for (const t of aJson.truths.values()) refusedRun += t.refused;
    expect(refusedRun).toBe(refusedSent);
    expect(refusedSent).toBeGreaterThan(20);

    // Each player's entity is every accepted input applied, in the zone the truth holds it and in both replays.
    for (const [id, fields] of Object.entries(model)) {
      const holding = [...aJson.truths].filter(([, t]) => t.entities.has(id));
      expect(holding.map(([zone]) => zone)).toHaveLength(1);
      const [zone, truth] = holding[0]!;
      expect(truth.entities.get(id)).toEqual(fields);
      for (const w of sockets) {
        const replayed = w.zones.get(zone)?.entities.get(id);
        if (w.zones.has(zone)) expect(replayed, w.label).toEqual(fields);
      }
    }
    for (const w of sockets) w.ws.close();
  });
});
