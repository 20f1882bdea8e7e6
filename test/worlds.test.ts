import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, expectErrorFrame, recordFrames, type Frame } from './support/ws-client';

/**
 * Worlds over real sockets: a world mode whose zones hold a player entity
 * per player and a few wandering NPCs, a second mode that a long script
 * loop, a heap bomb and an error poison in one zone each.
 */
const WALKERS = `
game_type = "world"
match_size = 1
max_players = 8
tick_rate = 50
grid_size = 6
zone_size = 100
view_radius = 1
broadcast_interval = 1
empty_grace_ms = 400

function spawn_templates(config) return { npc = { type = "npc" } } end
function init(config) return { joins = 0, ended = false } end
function join(player_id, state, ctx)
  if ctx and ctx.refuse then return nil, "go away" end
  state.joins = state.joins + 1
  return state
end
function leave(player_id, state) return state end
function spawn_position(player_id, state) return { x = 50, y = 50 } end
function post_tick(tick, state)
  if state.finish_now then state._finished = true; state._result = { status = "done", joins = state.joins } end
  return state
end
function zone_tick(entities, zone_state)
  zone_state = zone_state or {}
  if not zone_state.spawned then
    zone_state.spawned = true
    -- One NPC in the far corner zone, walking inside it.
    if game.zone.spawn("npc", 560, 560) ~= true then error("template refused") end
    if game.zone.spawn("nope", 1, 1) ~= false then error("unknown template accepted") end
  end
  for id, e in pairs(entities) do
    if e.type == "npc" then e.x = 510 + ((e.x - 510 + 7) % 80) end
  end
  return entities, zone_state
end
function handle_input(player_id, input, entities)
  local me = entities[player_id]
  if input.bad then me.x = -999; error("rejected") end
  if input.nothing then me.x = -999; return nil end
  if input.teleport then me.x = input.teleport[1]; me.y = input.teleport[2]; return entities end
  me.x = me.x + (input.dx or 0)
  me.y = me.y + (input.dy or 0)
  if input.report then return entities, input.report end
  return entities
end
function handle_effects(effects, entities) return entities end
`;

let s: TestServer;
let game: ReturnType<typeof gameDir>;

beforeAll(async () => {
  game = gameDir({
    'config.lua': 'return { walkers = "walkers.lua", duel = "duel.lua" }',
    'walkers.lua': WALKERS,
    'duel.lua': 'match_size = 2\nfunction init(c) return {} end\nfunction join(p, s) return s end\nfunction leave(p, s) return s end\nfunction tick(s) return s end\n',
  });
  s = await startTestServer({}, { gameDir: game.dir });
});
afterAll(async () => {
  await s.close();
  game.remove();
});

type Player = Awaited<ReturnType<typeof connectPlayer>>;


async function createWorld(p: Player, mode = 'walkers'): Promise<Frame> {
  const reply = await p.socket.request('world.create', { mode });
  expect(reply.type).toBe('world.joined');
  return reply;
}

describe('creating, joining, listing', () => {
  it('world.create joins the creator; the info object has the asobi shape; REST lists and finds it', async () => {
    const a = await connectPlayer(s);
    const joined = await createWorld(a);
    expect(joined.payload).toMatchObject({ mode: 'walkers', status: 'running', player_count: 1, max_players: 8, grid_size: 6, listed: true, quick_play: true, players: [a.playerId] });
    expect(typeof joined.payload.started_at).toBe('number');
    const id = joined.payload.world_id;

    const list = await a.socket.request('world.list', { mode: 'walkers' });
    const entry = list.payload.worlds.find((w: any) => w.world_id === id);
    expect(entry).toMatchObject({ world_id: id, status: 'running', player_count: 1 });
    expect(entry).not.toHaveProperty('players');
    expect(entry).not.toHaveProperty('listed');

    const one = await s.call('GET', `/api/v1/worlds/${id}`, { token: a.token });
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ world_id: id, mode: 'walkers', grid_size: 6 });
    expect(one.body).not.toHaveProperty('players');
    const missing = await s.call('GET', '/api/v1/worlds/0190c1f5-2222-7000-8000-000000000007', { token: a.token });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('world.not_found');
    await a.socket.request('world.leave');
  });

  it('POST /worlds answers 201 without joining; the per-player cap answers 429; bad bodies answer as documented', async () => {
    const a = await connectPlayer(s);
    const made = await s.call('POST', '/api/v1/worlds', { token: a.token, body: { mode: 'walkers' } });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ mode: 'walkers', status: 'running', player_count: 0 });
    for (let i = 0; i < 4; i++) expect((await s.call('POST', '/api/v1/worlds', { token: a.token, body: { mode: 'walkers' } })).status).toBe(201);
    const sixth = await s.call('POST', '/api/v1/worlds', { token: a.token, body: { mode: 'walkers' } });
    expect(sixth.status).toBe(429);
    expect(sixth.body.error.code).toBe('world.player_limit_reached');
    const overSocket = await a.socket.request('world.create', { mode: 'walkers' });
    expectErrorFrame(overSocket, 'player_world_limit_reached', 'ws.request_failed');

    const b = await connectPlayer(s);
    const unknown = await s.call('POST', '/api/v1/worlds', { token: b.token, body: { mode: 'nope' } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatchObject({ code: 'world.create_failed', details: { reason: 'not_found' } });
    const matchMode = await s.call('POST', '/api/v1/worlds', { token: b.token, body: { mode: 'duel' } });
    expect(matchMode.body.error).toMatchObject({ code: 'world.create_failed', details: { reason: 'wrong_mode_type' } });
    const noMode = await s.call('POST', '/api/v1/worlds', { token: b.token, body: {} });
    expect(noMode.status).toBe(400);
    expect(noMode.body.error.code).toBe('invalid_payload');
    const notString = await s.call('POST', '/api/v1/worlds', { token: b.token, body: { mode: 7 } });
    expect(notString.body.error).toMatchObject({ code: 'world.create_failed', details: { reason: 'not_found' } });
  });

  it('frame errors: unknown mode, match mode, absent keys, unknown id, non-string id', async () => {
    const a = await connectPlayer(s);
    expectErrorFrame(await a.socket.request('world.create', { mode: 'nope' }), 'not_found', 'ws.request_failed');
    expectErrorFrame(await a.socket.request('world.create', { mode: 'duel' }), 'wrong_mode_type', 'ws.request_failed');
    a.socket.send({ type: 'world.create', cid: 'c1', payload: {} });
    expectErrorFrame(await a.socket.next('error'), 'unknown_type', 'unknown_type');
    expectErrorFrame(await a.socket.request('world.find_or_create', { mode: 5 }), 'unknown_request', 'ws.request_failed');
    expectErrorFrame(await a.socket.request('world.join', { world_id: '0190c1f5-2222-7000-8000-000000000007' }), 'world_not_found', 'world.not_found');
    expectErrorFrame(await a.socket.request('world.join', { world_id: 12 }), 'world_not_found', 'world.not_found');
    expectErrorFrame(await a.socket.request('world.list', { mode: null }), 'invalid_mode_filter', 'ws.request_failed');
    expectErrorFrame(await a.socket.request('world.list', { has_capacity: 'yes' }), 'invalid_has_capacity_filter', 'ws.request_failed');
    expectErrorFrame(await a.socket.request('world.list', { joinable: 1 }), 'invalid_joinable_filter', 'ws.request_failed');
    // A mode filter over 64 bytes is ignored, not refused.
    expect((await a.socket.request('world.list', { mode: 'x'.repeat(65) })).type).toBe('world.list');
    a.socket.send({ type: 'world.input', cid: 'c2', payload: { dx: 1 } });
    const notIn = await a.socket.next('error');
    expectErrorFrame(notIn, 'not_in_match', 'match.not_in_match', 'world.input');
    expect(notIn.cid).toBeUndefined();
    expect((await a.socket.request('world.leave')).payload).toEqual({ success: true });
  });

  it('a ninth player into an eight-player world is refused world_full; a second world needs a leave first', async () => {
    const players: Player[] = [];
    for (let i = 0; i < 9; i++) players.push(await connectPlayer(s));
    const id = (await createWorld(players[0]!)).payload.world_id;
    for (let i = 1; i < 8; i++) expect((await players[i]!.socket.request('world.join', { world_id: id })).type).toBe('world.joined');
    expectErrorFrame(await players[8]!.socket.request('world.join', { world_id: id }), 'world_full', 'ws.request_failed');
    const other = (await createWorld(players[8]!)).payload.world_id;
    expectErrorFrame(await players[0]!.socket.request('world.join', { world_id: other }), 'already_in_world', 'world.already_joined');
    const refused = await players[1]!.socket.request('world.join', { world_id: other, ctx: { refuse: true } });
    expectErrorFrame(refused, 'already_in_world', 'world.already_joined');
    for (const p of players) await p.socket.request('world.leave');
  });

  it('the game may refuse a join, with its reason', async () => {
    const a = await connectPlayer(s);
    const b = await connectPlayer(s);
    const id = (await createWorld(a)).payload.world_id;
    const refused = await b.socket.request('world.join', { world_id: id, ctx: { refuse: true } });
    expectErrorFrame(refused, 'join_refused', 'match.join_refused');
    expect(refused.payload.error.details).toEqual({ refused_reason: 'go away' });
    await a.socket.request('world.leave');
  });

  it('quick play lands concurrent players in the same world', async () => {
    const ps = await Promise.all([connectPlayer(s), connectPlayer(s), connectPlayer(s)]);
    const replies = await Promise.all(ps.map((p) => p.socket.request('world.find_or_create', { mode: 'walkers' })));
    const ids = new Set(replies.map((r) => r.payload.world_id));
    expect(ids.size).toBe(1);
    expect(replies.every((r) => r.type === 'world.joined')).toBe(true);
    for (const p of ps) await p.socket.request('world.leave');
  });
});

describe('ticks, interest and acks', () => {
  it('a join gets keyframes of its ring; deltas follow with contiguous frame_seq; a far player hears nothing of a moving NPC', async () => {
    const a = await connectPlayer(s);
    const framesA = recordFrames(a.socket);
    const joined = await createWorld(a);
    const id = joined.payload.world_id;
    // The ring of zone (0,0) with view_radius 1: four zones, each with a keyframe.
    await a.socket.next((f) => f.type === 'world.tick' && f.payload.kf === true);
    await new Promise((r) => setTimeout(r, 400));
    const keyframes = framesA.filter((f) => f.type === 'world.tick' && f.payload.kf === true).map((f) => f.payload.zone.join(','));
    expect(new Set(keyframes)).toEqual(new Set(['0,0', '0,1', '1,0', '1,1']));
    // Its own entity shows up as an add in zone (0,0).
    const own = framesA.find((f) => f.type === 'world.tick' && f.payload.zone.join(',') === '0,0' && f.payload.updates.some((u: any) => u.id === a.playerId && u.op === 'a'));
    expect(own).toBeDefined();
    expect(own!.payload.updates.find((u: any) => u.id === a.playerId)).toMatchObject({ x: 50, y: 50, type: 'player' });
    // Nothing from the NPC's corner zone (5,5), though it moves every tick.
    expect(framesA.some((f) => f.type === 'world.tick' && f.payload.zone.join(',') === '5,5')).toBe(false);
    expect(JSON.stringify(framesA)).not.toContain('"npc"');

    // A second player standing next to the NPC sees it move, frame after frame.
    const b = await connectPlayer(s);
    const framesB = recordFrames(b.socket);
    expect((await b.socket.request('world.join', { world_id: id })).type).toBe('world.joined');
    b.socket.send({ type: 'world.input', payload: { teleport: [550, 550] } });
    await b.socket.next((f) => f.type === 'world.tick' && f.payload.zone.join(',') === '5,5' && f.payload.updates.some((u: any) => u.op === 'u'), 3000);
    await new Promise((r) => setTimeout(r, 300));
    const seqs = framesB.filter((f) => f.type === 'world.tick' && f.payload.zone.join(',') === '5,5' && f.payload.frame_seq !== undefined).map((f) => f.payload.frame_seq);
    for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBe(seqs[i - 1] + 1);
    // b left (0,0)'s ring: (0,0) sent b a removal frame without frame_seq.
    expect(framesB.some((f) => f.type === 'world.tick' && f.payload.zone.join(',') === '0,0' && f.payload.frame_seq === undefined && f.payload.kf === undefined)).toBe(true);
    // a, far away, still hears nothing of the corner.
    expect(framesA.some((f) => f.type === 'world.tick' && f.payload.zone.join(',') === '5,5')).toBe(false);

    // Bytes a sees per second stay small: only its own ring's changes.
    const before = JSON.stringify(framesA).length;
    await new Promise((r) => setTimeout(r, 500));
    expect(JSON.stringify(framesA).length - before).toBeLessThan(2000);
    await a.socket.request('world.leave');
    await b.socket.request('world.leave');
  });

  it('world.ack only increases; a lower seq is consumed but never acked again; a rejected input reverts the entity', async () => {
    const a = await connectPlayer(s);
    const frames = recordFrames(a.socket);
    await createWorld(a);
    a.socket.send({ type: 'world.input', seq: 10, payload: { dx: 1 } });
    const ack = await a.socket.next('world.ack');
    expect(ack.payload.seq).toBe(10);
    expect(typeof ack.payload.tick).toBe('number');
    a.socket.send({ type: 'world.input', seq: 4, payload: { dx: 1 } });
    a.socket.send({ type: 'world.input', seq: 'x', payload: { dx: 1 } });
    await new Promise((r) => setTimeout(r, 300));
    a.socket.send({ type: 'world.input', seq: 11, payload: { bad: true } });
    a.socket.send({ type: 'world.input', seq: 12, payload: { nothing: true } });
    const later = await a.socket.next((f) => f.type === 'world.ack' && f.payload.seq === 12);
    expect(later.payload.seq).toBe(12);
    const acks = frames.filter((f) => f.type === 'world.ack').map((f) => f.payload.seq);
    for (let i = 1; i < acks.length; i++) expect(acks[i]).toBeGreaterThan(acks[i - 1]);
    // A game-reported watermark counts too.
    a.socket.send({ type: 'world.input', payload: { report: 40 } });
    expect((await a.socket.next('world.ack')).payload.seq).toBe(40);
    // The rejected inputs set x to -999; it never reached the wire.
    const xs = frames.filter((f) => f.type === 'world.tick').flatMap((f) => f.payload.updates).filter((u: any) => u.id === a.playerId && 'x' in u).map((u: any) => u.x);
    expect(xs).not.toContain(-999);
    expect(xs[xs.length - 1]).toBe(53);
    await a.socket.request('world.leave');
  });

  it('world.resync answers a keyframe of a watched zone and ignores everything else', async () => {
    const a = await connectPlayer(s);
    await createWorld(a);
    await new Promise((r) => setTimeout(r, 300));
    const after = recordFrames(a.socket);
    a.socket.send({ type: 'world.resync', payload: { zone: [1, 1] } });
    a.socket.send({ type: 'world.resync', payload: { zone: [4, 4] } });
    a.socket.send({ type: 'world.resync', payload: { zone: 'x' } });
    a.socket.send({ type: 'world.resync', payload: { zone: [0, 0] } });
    // [4,4] is not watched and 'x' is malformed: ignored. The third counted ask is over 2 per 10 s: ignored too, never an error.
    await new Promise((r) => setTimeout(r, 400));
    const answers = after.filter((f) => f.type === 'error' || (f.type === 'world.tick' && f.payload.kf === true));
    expect(answers).toHaveLength(1);
    expect(answers[0]!.payload).toMatchObject({ zone: [1, 1], kf: true, tick: 0 });
    await a.socket.request('world.leave');
  });
});

describe('limits', () => {
  it('world.join spends the join bucket (10 per minute); create and find_or_create do not', async () => {
    const owner = await connectPlayer(s);
    const id = (await createWorld(owner)).payload.world_id;
    const p = await connectPlayer(s);
    for (let i = 0; i < 10; i++) {
      expect((await p.socket.request('world.join', { world_id: id })).type).toBe('world.joined');
      await p.socket.request('world.leave');
    }
    expectErrorFrame(await p.socket.request('world.join', { world_id: id }), 'join_rate_limited', 'join_rate_limited');
    // An unknown id answers before the bucket is looked at.
    expectErrorFrame(await p.socket.request('world.join', { world_id: '0190c1f5-2222-7000-8000-000000000007' }), 'world_not_found', 'world.not_found');
    expect((await p.socket.request('world.find_or_create', { mode: 'walkers' })).type).toBe('world.joined');
    await p.socket.request('world.leave');
    expect((await p.socket.request('world.create', { mode: 'walkers' })).type).toBe('world.joined');
    await p.socket.request('world.leave');
    await owner.socket.request('world.leave');
  });

  it('zone crossings of one player are held to 5 per second (rehome)', async () => {
    const a = await connectPlayer(s);
    await createWorld(a);
    await new Promise((r) => setTimeout(r, 200));
    // Keyframes of zone (3,0) mark crossings into it, stamped as they arrive.
    const arrivals: number[] = [];
    a.socket.ws.on('message', (data) => {
      const f = JSON.parse(String(data));
      if (f.type === 'world.tick' && f.payload.kf === true && f.payload.zone.join(',') === '3,0') arrivals.push(Date.now());
    });
    for (let i = 0; i < 10; i++) {
      a.socket.send({ type: 'world.input', payload: { teleport: i % 2 === 0 ? [350, 50] : [50, 50] } });
      await new Promise((r) => setTimeout(r, 70));
    }
    await new Promise((r) => setTimeout(r, 200));
    expect(arrivals.length).toBeGreaterThanOrEqual(1);
    // Unlimited, the ten alternating teleports would cross into (3,0) five times; the fixed
    // window of 5 crossings opened by the first lets at most three of them in within it.
    const inFirstWindow = arrivals.filter((t) => t - arrivals[0]! < 900);
    expect(inFirstWindow.length).toBeLessThanOrEqual(3);
    await a.socket.request('world.leave');
  });
});

describe('ending', () => {
  it('leave → grace → empty_grace_expired, and the world is gone from the list; a rejoin inside the grace keeps it', async () => {
    const a = await connectPlayer(s);
    const id = (await createWorld(a)).payload.world_id;
    await a.socket.request('world.leave');
    await new Promise((r) => setTimeout(r, 200));
    // Back inside the grace: the world is still there.
    expect((await a.socket.request('world.join', { world_id: id })).type).toBe('world.joined');
    await new Promise((r) => setTimeout(r, 500));
    expect((await s.call('GET', `/api/v1/worlds/${id}`, { token: a.token })).body.status).toBe('running');
    await a.socket.request('world.leave');
    await new Promise((r) => setTimeout(r, 1200));
    const listed = await a.socket.request('world.list', {});
    expect(listed.payload.worlds.some((w: any) => w.world_id === id)).toBe(false);
    const rec = await s.call('GET', `/api/v1/matches/${id}`, { token: a.token });
    expect(rec.status).toBe(200);
    expect(rec.body.result).toEqual({ status: 'empty_grace_expired' });
  });

  it('chat: a world member is silently on world:, zone: and prox: channels; others may not join them', async () => {
    const a = await connectPlayer(s);
    const b = await connectPlayer(s);
    const outsider = await connectPlayer(s);
    const id = (await createWorld(a)).payload.world_id;
    await b.socket.request('world.join', { world_id: id });
    b.socket.send({ type: 'chat.send', payload: { channel_id: `world:${id}`, content: 'hello world' } });
    expect((await a.socket.next('chat.message')).payload).toMatchObject({ channel_id: `world:${id}`, content: 'hello world', sender_id: b.playerId });
    b.socket.send({ type: 'chat.send', payload: { channel_id: `prox:${id}:1,1`, content: 'near' } });
    expect((await a.socket.next('chat.message')).payload.channel_id).toBe(`prox:${id}:1,1`);
    expectErrorFrame(await outsider.socket.request('chat.join', { channel_id: `world:${id}` }), 'not_authorized', 'forbidden');
    await a.socket.request('world.leave');
    await b.socket.request('world.leave');
  });
});

describe('a socket that closes while its world.join is in flight', () => {
  // `join` spins for tens of milliseconds, so the socket's close reaches the node before the lane answers.
  const SLOW = WALKERS.replace('function join(player_id, state, ctx)', 'function join(player_id, state, ctx)\n  if ctx and ctx.spin then for i = 1, ctx.spin do end end');
  let slow: TestServer;
  let slowGame: ReturnType<typeof gameDir>;
  beforeAll(async () => {
    slowGame = gameDir({ 'config.lua': 'return { walkers = "walkers.lua" }', 'walkers.lua': SLOW });
    slow = await startTestServer({ lua_instruction_budget: { init_tick: 1_000_000, other: 5_000_000 } }, { gameDir: slowGame.dir });
  });
  afterAll(async () => {
    await slow.close();
    slowGame.remove();
  });

  it('leaves no player behind: the world counts only the players still connected', async () => {
    const owner = await connectPlayer(slow);
    const created = await owner.socket.request('world.create', { mode: 'walkers' });
    expect(created.type).toBe('world.joined');
    const worldId = created.payload.world_id;
    const leaver = await connectPlayer(slow);
    leaver.socket.send({ type: 'world.join', payload: { world_id: worldId, ctx: { spin: 1_000_000 } } });
    await new Promise((r) => setTimeout(r, 5));
    leaver.socket.close();
    // The lane answers the join after the close; the player must not stay (player_ttl_ms is 0: out at once).
    const counts: number[] = [];
    for (let i = 0; i < 20; i++) {
      await new Promise((r) => setTimeout(r, 100));
      counts.push((await slow.call('GET', `/api/v1/worlds/${worldId}`, { token: owner.token })).body.player_count);
    }
    expect(counts.at(-1), JSON.stringify(counts)).toBe(1);
    owner.socket.close();
  }, 30_000);
});

describe("a joiner's first world.tick", () => {
  it('arrives after its world.joined reply, for world.create and world.join alike, keyframe first', async () => {
    const a = await connectPlayer(s);
    const framesA = recordFrames(a.socket);
    const created = await a.socket.request('world.create', { mode: 'walkers' });
    expect(created.type).toBe('world.joined');
    const b = await connectPlayer(s);
    const framesB = recordFrames(b.socket);
    expect((await b.socket.request('world.join', { world_id: created.payload.world_id })).type).toBe('world.joined');
    await b.socket.next('world.tick');
    for (const frames of [framesA, framesB]) {
      const reply = frames.findIndex((f) => f.type === 'world.joined');
      const firstTick = frames.findIndex((f) => f.type === 'world.tick');
      expect(reply, JSON.stringify(frames.map((f) => f.type))).toBeGreaterThanOrEqual(0);
      expect(firstTick, JSON.stringify(frames.map((f) => f.type))).toBeGreaterThan(reply);
      expect(frames[firstTick]!.payload.kf).toBe(true);
    }
    await b.socket.request('world.leave');
    await a.socket.request('world.leave');
    a.socket.close();
    b.socket.close();
  });
});
