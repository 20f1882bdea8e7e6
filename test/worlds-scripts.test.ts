import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inflateSync } from 'node:zlib';
import { freshDatabase } from './support/database';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, recordFrames, TestSocket, type Frame } from './support/ws-client';

/**
 * World scripts as a game writes them: hostile zones next to honest ones,
 * phases, terrain, a script that ends its world, broadcasts, a player who
 * reconnects inside its TTL, and a persistent world across a restart.
 */
const COMMON = `
match_size = 1
max_players = 8
tick_rate = 50
zone_size = 100
broadcast_interval = 1
function init(config) return { n = 0 } end
function join(player_id, state) return state end
function leave(player_id, state) return state end
function spawn_position(player_id, state) return { x = 10, y = 10 } end
function handle_input(player_id, input, entities)
  local me = entities[player_id]
  if input.x then me.x = input.x end
  if input.y then me.y = input.y end
  return entities
end
function handle_effects(effects, entities) return entities end
`;

const HOSTILE = `
game_type = "world"
grid_size = 4
${COMMON}
function post_tick(tick, state) state.n = tick return state end
-- Zone (3,3) loops, (3,0) grows the heap, (0,3) raises; zone (0,0) counts its ticks.
function zone_tick(entities, zone_state)
  zone_state = zone_state or { ticks = 0 }
  zone_state.ticks = zone_state.ticks + 1
  local any = next(entities)
  for id, e in pairs(entities) do
    if e.type == "player" and e.x >= 300 and e.y >= 300 then while true do end end
    if e.type == "player" and e.x >= 300 and e.y < 100 then local big = string.rep("x", 1024 * 1024) local t = {} for i = 1, 1e6 do t[i] = big .. i end end
    if e.type == "player" and e.x < 100 and e.y >= 300 then error("poisoned zone") end
    if e.type == "player" then e.ticks = zone_state.ticks end
  end
  return entities, zone_state
end
`;

const PHASED = `
game_type = "world"
grid_size = 2
${COMMON}
function phases(config)
  return { { name = "warmup", duration = 150 }, { name = "harvest", duration = 150, config = { crop = "wheat" } } }
end
function on_phase_started(name, state) state.started = (state.started or "") .. name .. ";" return state end
function post_tick(tick, state)
  if tick == 3 then game.broadcast("hello", { tick = tick }) end
  return state
end
function zone_tick(entities, zone_state) return entities, zone_state end
function terrain_provider(config) return { module = "heightmap", args = { resolution = 4, seed = 7 } } end
`;

// on_phase_ended writes to the state and a global, then fails: the next phase's start must see neither write.
const SLIPPING = `
game_type = "world"
grid_size = 1
${COMMON}
function phases(config) return { { name = "warmup", duration = 300 }, { name = "main" } } end
function on_phase_ended(name, state)
  state.dirty = true
  dirty_global = true
  error("phase end failed")
end
function on_phase_started(name, state)
  if name == "main" then game.broadcast("after", { dirty = state.dirty == true, global = dirty_global == true }) end
  return state
end
function post_tick(tick, state) return state end
function zone_tick(entities, zone_state) return entities, zone_state end
`;

const ENDING = `
game_type = "world"
grid_size = 2
player_ttl_ms = 2000
${COMMON}
function post_tick(tick, state)
  if state.stop then state._finished = true; state._result = { status = "won", by = state.stop } end
  return state
end
function zone_tick(entities, zone_state) return entities, zone_state end
function join(player_id, state, ctx)
  if ctx and ctx.stop then state.stop = player_id end
  return state
end
`;

const KEEPER = `
game_type = "world"
grid_size = 1
persistent = true
${COMMON}
zone_size = 300
function spawn_templates(config) return { stone = { type = "stone" } } end
function on_world_recovered(snapshot, state)
  local zones = 0
  for k, v in pairs(snapshot.zones) do zones = zones + 1 end
  state.recovered_zones = zones
  return state
end
function join(player_id, state) state.present = true return state end
function post_tick(tick, state)
  if state.recovered_zones and state.present and not state.told then
    state.told = true
    game.broadcast("recovered", { zones = state.recovered_zones })
  end
  return state
end
function zone_tick(entities, zone_state)
  zone_state = zone_state or { placed = false }
  if not zone_state.placed then
    zone_state.placed = true
    game.zone.spawn("stone", 250, 250, { weight = 9 })
  end
  return entities, zone_state
end
`;

const VOTING = `
game_type = "world"
grid_size = 1
${COMMON}
function join(player_id, state) state.present = true return state end
function post_tick(tick, state)
  state._vote = nil
  if state.present and not state.asked then
    state.asked = true
    state._vote = { template = "gate", window_ms = 400, options = { { id = "north", label = "North" }, { id = "south", label = "South" } } }
  end
  return state
end
function zone_tick(entities, zone_state) return entities, zone_state end
`;

let s: TestServer;
let game: ReturnType<typeof gameDir>;

beforeAll(async () => {
  game = gameDir({
    'config.lua': 'return { hostile = "hostile.lua", phased = "phased.lua", ending = "ending.lua", keeper = "keeper.lua", voting = "voting.lua", slipping = "slipping.lua" }',
    'slipping.lua': SLIPPING,
    'voting.lua': VOTING,
    'hostile.lua': HOSTILE,
    'phased.lua': PHASED,
    'ending.lua': ENDING,
    'keeper.lua': KEEPER,
  });
  // Production deadlines: the hostile zones must be stopped by them, not by the test's generous ones.
  s = await startTestServer({ lua_time_budget_ms: { init_tick: 30, other: 20 }, match_failing_ticks_max: 3 }, { gameDir: game.dir });
});
afterAll(async () => {
  await s.close();
  game.remove();
});


const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a hostile zone is contained to its zone', () => {
  it('a loop, a heap bomb and an error in three zones: the honest zone keeps ticking and the node keeps answering', async () => {
    const honest = await connectPlayer(s);
    const frames = recordFrames(honest.socket);
    const id = (await honest.socket.request('world.create', { mode: 'hostile' })).payload.world_id;
    const looper = await connectPlayer(s);
    const bomber = await connectPlayer(s);
    const poisoner = await connectPlayer(s);
    for (const p of [looper, bomber, poisoner]) expect((await p.socket.request('world.join', { world_id: id })).type).toBe('world.joined');
    looper.socket.send({ type: 'world.input', payload: { x: 350, y: 350 } });
    bomber.socket.send({ type: 'world.input', payload: { x: 350, y: 50 } });
    poisoner.socket.send({ type: 'world.input', payload: { x: 50, y: 350 } });
    await sleep(2500);
    // The honest player's own entity kept counting its zone's ticks, up to the end.
    const ticks = frames
      .filter((f) => f.type === 'world.tick')
      .flatMap((f) => f.payload.updates)
      .filter((u: any) => u.id === honest.playerId && typeof u.ticks === 'number')
      .map((u: any) => u.ticks);
    expect(ticks.length).toBeGreaterThan(10);
    const lastSeen = ticks[ticks.length - 1];
    await sleep(500);
    const more = frames.filter((f) => f.type === 'world.tick').flatMap((f) => f.payload.updates).filter((u: any) => u.id === honest.playerId && typeof u.ticks === 'number');
    expect(more[more.length - 1].ticks).toBeGreaterThan(lastSeen);
    // The node answers HTTP meanwhile, and the world is still running.
    const health = await s.call('GET', '/api/v1/health');
    expect(health.status).toBe(200);
    expect((await s.call('GET', `/api/v1/worlds/${id}`, { token: honest.token })).body.status).toBe('running');
    // The failures were reported with their classes.
    const failures = s.logs.filter((l) => l.event === 'lua_callback_failed' && l.world_id === id);
    const classes = new Set(failures.map((l) => l.reason_class));
    expect(classes.has('error')).toBe(true);
    expect([...classes].some((c) => c === 'timeout' || c === 'instructions_exhausted')).toBe(true);
    expect(classes.has('heap_exhausted')).toBe(true);
    expect(s.logs.some((l) => l.event === 'zone_script_budget' && l.world_id === id)).toBe(true);
    for (const p of [honest, looper, bomber, poisoner]) await p.socket.request('world.leave');
  }, 20_000);
});

describe('phases, terrain and broadcasts', () => {
  it('phase_changed on each transition with world_id, phases_complete at the end; terrain chunks on subscription; world.<leaf> broadcasts', async () => {
    const a = await connectPlayer(s);
    const frames = recordFrames(a.socket);
    const joined = await a.socket.request('world.create', { mode: 'phased' });
    const id = joined.payload.world_id;
    expect(joined.payload.phase).toMatchObject({ status: 'active', phase: 'warmup' });

    // Terrain: one chunk per watched zone, base64 of zlib bytes (4x4 heights).
    await a.socket.next('world.terrain');
    await sleep(100);
    const chunks = frames.filter((f) => f.type === 'world.terrain');
    expect(new Set(chunks.map((f) => f.payload.coords.join(',')))).toEqual(new Set(['0,0', '0,1', '1,0', '1,1']));
    expect(inflateSync(Buffer.from(chunks[0]!.payload.data, 'base64')).length).toBe(16);

    const hello = await a.socket.next('world.hello');
    expect(hello.payload).toEqual({ tick: 3 });

    const finished = await a.socket.next('world.finished', 3000);
    expect(finished.payload).toEqual({ world_id: id, result: { status: 'phases_complete' } });
    const changes = frames.filter((f) => f.type === 'world.phase_changed' && f.payload.world_id === id);
    expect(changes.map((f) => [f.payload.status, f.payload.phase])).toEqual(expect.arrayContaining([['active', 'harvest'], ['complete', null]]));
    const harvest = changes.find((f) => f.payload.phase === 'harvest')!;
    expect(harvest.payload).toMatchObject({ config: { crop: 'wheat' }, timers: {} });
    expect(typeof harvest.payload.remaining_ms).toBe('number');
  });
});

describe('a failed phase callback', () => {
  it('leaves nothing behind in the world VM, and the next phase still starts', async () => {
    const a = await connectPlayer(s);
    const id = (await a.socket.request('world.create', { mode: 'slipping' })).payload.world_id;
    expect((await a.socket.next('world.after', 10_000)).payload).toEqual({ dirty: false, global: false });
    expect(s.logs.some((l) => l.event === 'lua_callback_failed' && l.world_id === id && l.callback === 'on_phase_ended')).toBe(true);
    await a.socket.request('world.leave');
  });
});

describe('ending a world', () => {
  it('a script sets _finished: world.finished with its result, the record keeps it, and a join afterwards is not_in_match', async () => {
    const a = await connectPlayer(s);
    const b = await connectPlayer(s);
    const id = (await a.socket.request('world.create', { mode: 'ending' })).payload.world_id;
    await b.socket.request('world.join', { world_id: id, ctx: { stop: true } });
    const fin = await a.socket.next('world.finished');
    expect(fin.payload).toEqual({ world_id: id, result: { status: 'won', by: b.playerId } });
    expect((await b.socket.next('world.finished')).payload).toEqual(fin.payload);
    const c = await connectPlayer(s);
    const late = await c.socket.request('world.join', { world_id: id });
    expect(late.payload).toMatchObject({ reason: 'not_in_match', error: { code: 'match.not_in_match' } });
    let rec: any;
    for (let i = 0; i < 50 && !rec; i++) {
      const res = await s.call('GET', `/api/v1/matches/${id}`, { token: a.token });
      if (res.status === 200) rec = res.body;
      else await sleep(50);
    }
    expect(rec.result).toEqual({ status: 'won', by: b.playerId });
    // Both players are free to go elsewhere at once.
    expect((await a.socket.request('world.create', { mode: 'ending' })).type).toBe('world.joined');
    await a.socket.request('world.leave');
  });

  it('player_ttl_ms: a player whose socket closed keeps its place and re-attaches silently by joining again', async () => {
    const a = await connectPlayer(s);
    const id = (await a.socket.request('world.create', { mode: 'ending' })).payload.world_id;
    a.socket.send({ type: 'world.input', payload: { x: 42 } });
    await sleep(300);
    a.socket.close();
    await sleep(300);
    const listing = (await s.call('GET', `/api/v1/worlds/${id}`, { token: a.token })).body;
    expect(listing.player_count).toBe(1);
    const again = await TestSocket.open(s);
    await again.request('session.connect', { token: a.token });
    const frames = recordFrames(again);
    const rejoined = await again.request('world.join', { world_id: id });
    expect(rejoined.payload.players).toEqual([a.playerId]);
    await sleep(200);
    // Its entity kept the position it had: the keyframe of its zone shows it.
    const own = frames.filter((f) => f.type === 'world.tick' && f.payload.kf).flatMap((f) => f.payload.updates).find((u: any) => u.id === a.playerId);
    expect(own).toMatchObject({ x: 42, type: 'player' });
    await again.request('world.leave');
  });
});

describe('votes in a world', () => {
  it('_vote in post_tick opens a vote for the players in the world: world.vote_start, vote.cast, world.vote_result', async () => {
    const a = await connectPlayer(s);
    const id = (await a.socket.request('world.create', { mode: 'voting' })).payload.world_id;
    const start = await a.socket.next('world.vote_start');
    expect(start.payload).toMatchObject({ options: [{ id: 'north', label: 'North' }, { id: 'south', label: 'South' }], window_ms: 400, method: 'plurality' });
    const voteId = start.payload.vote_id;
    expect((await a.socket.request('vote.cast', { vote_id: voteId, option_id: 'south' })).type).toBe('vote.cast_ok');
    expect((await a.socket.next('world.vote_tally')).payload).toMatchObject({ vote_id: voteId, tallies: { south: 1 } });
    const result = await a.socket.next('world.vote_result', 3000);
    expect(result.payload).toMatchObject({ vote_id: voteId, winner: 'south', total_votes: 1 });
    // The vote is stored like a match's.
    let stored: any;
    for (let i = 0; i < 50 && !stored; i++) {
      const res = await s.call('GET', `/api/v1/votes/${voteId}`, { token: a.token });
      if (res.status === 200) stored = res.body;
      else await sleep(50);
    }
    expect(stored).toMatchObject({ id: voteId, match_id: id, template: 'gate', status: 'resolved' });
    await a.socket.request('world.leave');
  });
});

describe('persistent worlds', () => {
  it('a persistent world saves its zones and comes back after a restart with its entities; players are not in the snapshot', async () => {
    const database = await freshDatabase();
    const keep = { ...database, close: async () => {} };
    const dir = gameDir({ 'config.lua': 'return { keeper = "keeper.lua" }', 'keeper.lua': KEEPER });
    let second: TestServer | null = null;
    try {
      const first = await startTestServer({ world_snapshot_ms: 200 }, { database: keep, gameDir: dir.dir });
      const a = await connectPlayer(first);
      const frames = recordFrames(a.socket);
      const id = (await a.socket.request('world.create', { mode: 'keeper' })).payload.world_id;
      await sleep(600);
      const stone = frames.filter((f) => f.type === 'world.tick').flatMap((f) => f.payload.updates).find((u: any) => u.type === 'stone');
      expect(stone).toMatchObject({ op: 'a', x: 250, y: 250, weight: 9 });
      await first.close();

      second = await startTestServer({ world_snapshot_ms: 200 }, { database: keep, gameDir: dir.dir });
      const b = await connectPlayer(second);
      let listing: any = null;
      for (let i = 0; i < 50 && !listing; i++) {
        const res = await second.call('GET', `/api/v1/worlds/${id}`, { token: b.token });
        if (res.status === 200 && res.body.status === 'running') listing = res.body;
        else await sleep(100);
      }
      expect(listing).toMatchObject({ world_id: id, mode: 'keeper', status: 'running', player_count: 0 });
      const seen = recordFrames(b.socket);
      expect((await b.socket.request('world.join', { world_id: id })).type).toBe('world.joined');
      // on_world_recovered saw the saved zone.
      expect((await b.socket.next('world.recovered')).payload).toEqual({ zones: 1 });
      await sleep(400);
      const stones = seen.filter((f) => f.type === 'world.tick').flatMap((f) => f.payload.updates).filter((u: any) => u.type === 'stone');
      // The recovered zones did not spawn a second stone: their zone state came back too.
      expect(stones.length).toBeGreaterThan(0);
      expect(new Set(stones.map((u: any) => u.id))).toEqual(new Set([stone.id]));
      expect(seen.flatMap((f) => (f.type === 'world.tick' ? f.payload.updates : [])).some((u: any) => u.id === a.playerId)).toBe(false);
    } finally {
      await second?.close();
      await database.close();
      dir.remove();
    }
  });
});
