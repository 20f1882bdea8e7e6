import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, type Frame } from './support/ws-client';

const ROOM = (version: string, factor: number) => `
match_size = 1
max_players = 4
listed = true
quick_play = true
VERSION = "${version}"

function init(config) return { tick = 0, inputs = {} } end
function join(player_id, state) return state end
function leave(player_id, state) return state end
function handle_input(player_id, input, state)
  if input.loop then while true do end end
  if input.boom then error("boom") end
  if input.forge then
    game.broadcast("state", { forged = true })
    game.broadcast("finished", { forged = true })
    game.broadcast("bad.leaf", { forged = true })
    game.broadcast("ok_event", { n = 1 })
  end
  if input.loop_tick then state.loop_tick = true end
  if input.finish then
    state._finished = true
    state._result = { winner = player_id, note = "done" }
  end
  if input.n then state.inputs[#state.inputs + 1] = input.n * ${factor} end
  return state
end
function tick(state)
  if state.loop_tick then while true do end end
  state.tick = state.tick + 1
  return state
end
function get_state(player_id, state) return { tick = state.tick, inputs = state.inputs, version = VERSION } end
`;

const game = gameDir({
  'config.lua': 'return { room = "room.lua", picky = "picky.lua", joinerr = "joinerr.lua", counter = "counter.lua" }',
  'counter.lua': `
match_size = 1
quick_play = true
function init(config) return { tick = 0 } end
function join(player_id, state) return state end
function leave(player_id, state) return state end
function handle_input(player_id, input, state) return state end
function tick(state) state.tick = state.tick + 1 return state end
function get_state(player_id, state) return { tick = state.tick } end
`,
  'room.lua': ROOM('v1', 1),
  'picky.lua': `
match_size = 1
quick_play = true
function init(config) return { n = 0 } end
function join(player_id, state, ctx)
  if ctx.invite ~= "K7Q9" then return nil, "bad_invite" end
  return state
end
function leave(player_id, state) return state end
function handle_input(player_id, input, state) return state end
function tick(state) return state end
function get_state(player_id, state) return {} end
`,
  'joinerr.lua': `
match_size = 1
quick_play = true
function init(config) return {} end
function join(player_id, state) error("join exploded") end
function leave(player_id, state) return state end
function handle_input(player_id, input, state) return state end
function tick(state) return state end
function get_state(player_id, state) return {} end
`,
});

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({}, { gameDir: game.dir });
});
afterAll(async () => {
  await s.close();
  game.remove();
});

/** A player alone in a fresh room match (each find_or_create converges, so rooms are per test via max_players). */
async function inRoom() {
  const p = await connectPlayer(s);
  const joined = await p.socket.request('match.find_or_create', { mode: 'room' });
  expect(joined.type).toBe('match.joined');
  return { ...p, matchId: joined.payload.match_id as string };
}

const stateWhere = (pred: (payload: any) => boolean) => (f: Frame) => f.type === 'match.state' && pred(f.payload);
/** An empty Lua table encodes as {}, so an empty list arrives as an object. */
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

describe('hostile scripts', () => {
  it('survives an endless loop in handle_input: the input is lost, the match goes on', async () => {
    const p = await inRoom();
    p.socket.send({ type: 'match.input', payload: { loop: true } });
    p.socket.send({ type: 'match.input', payload: { n: 3 } });
    const st = await p.socket.next(stateWhere((v) => list(v.inputs).includes(3)), 15_000);
    const later = await p.socket.next(stateWhere((v) => v.tick > st.payload.tick + 2), 15_000);
    expect(later.payload.inputs).toEqual([3]);
    p.socket.close();
  });

  it('keeps the previous state when a callback raises, and keeps applying later inputs', async () => {
    const p = await inRoom();
    p.socket.send({ type: 'match.input', payload: { n: 1 } });
    p.socket.send({ type: 'match.input', payload: { boom: true, n: 99 } });
    p.socket.send({ type: 'match.input', payload: { n: 2 } });
    const st = await p.socket.next(stateWhere((v) => list(v.inputs).includes(2)), 10_000);
    expect(st.payload.inputs).toEqual([1, 2]);
    p.socket.close();
  });

  it('drops broadcasts under reserved or malformed leaf names and delivers valid ones', async () => {
    const p = await inRoom();
    p.socket.send({ type: 'match.input', payload: { forge: true } });
    expect((await p.socket.next('match.ok_event', 10_000)).payload).toEqual({ n: 1 });
    // The forged ones would have been sent before ok_event in the same callback.
    const seen = [...p.socket.frames];
    expect(seen.some((f) => f.payload?.forged)).toBe(false);
    expect(seen.some((f) => f.type === 'match.finished' || f.type.startsWith('match.bad'))).toBe(false);
    expect(await p.socket.quiet((f) => f.payload?.forged === true, 300)).toBe(true);
    p.socket.close();
  });

  it('an endless tick loop costs that match its ticks, not the other matches theirs', async () => {
    const bad = await inRoom();
    bad.socket.send({ type: 'match.input', payload: { loop_tick: true } });
    await bad.socket.next(stateWhere(() => true), 10_000);
    const first = await bad.socket.next(stateWhere(() => true), 10_000);
    // Each tick fails and keeps the state, so the looping match's counter stands still...
    const after = await bad.socket.next(stateWhere(() => true), 10_000);
    expect(after.payload.tick).toBe(first.payload.tick);
    // ...while another match on the same node keeps ticking.
    const healthy = await connectPlayer(s);
    expect((await healthy.socket.request('match.find_or_create', { mode: 'counter' })).type).toBe('match.joined');
    const t0 = (await healthy.socket.next(stateWhere(() => true), 10_000)).payload.tick;
    await healthy.socket.next(stateWhere((v) => v.tick >= t0 + 3), 10_000);
    expect(s.logs.some((l) => l.event === 'lua_callback_failed' && l.callback === 'tick')).toBe(true);
    bad.socket.close();
    healthy.socket.close();
  });

  it('answers a refused join join_refused with the reason, and a raising join internal', async () => {
    const p = await connectPlayer(s);
    const refused = await p.socket.request('match.find_or_create', { mode: 'picky' });
    expect(refused.payload.reason).toBe('join_refused');
    expect(refused.payload.error).toEqual({ code: 'match.join_refused', message: expect.any(String), details: { refused_reason: 'bad_invite' } });
    const ok = await p.socket.request('match.find_or_create', { mode: 'picky', ctx: { invite: 'K7Q9' } });
    expect(ok.type).toBe('match.joined');
    const err = await p.socket.request('match.find_or_create', { mode: 'joinerr' });
    expect(err.payload.reason).toBe('internal');
    expect(err.payload.error.code).toBe('internal');
    p.socket.close();
  });
});

describe('finishing and joining limits', () => {
  it('finishes with the script result, answers later input not_in_match, and records it', async () => {
    const p = await inRoom();
    p.socket.send({ type: 'match.input', payload: { finish: true } });
    const fin = await p.socket.next('match.finished', 10_000);
    expect(fin.payload).toEqual({ match_id: p.matchId, result: { winner: p.playerId, note: 'done' } });
    p.socket.send({ type: 'match.input', payload: { n: 1 } });
    const notice = await p.socket.next('error');
    expect(notice.payload).toMatchObject({ type: 'match.input', reason: 'not_in_match' });
    // During the cleanup window a join by id is answered not_in_match.
    const late = await connectPlayer(s);
    const j = await late.socket.request('match.join', { match_id: p.matchId });
    expect(j.payload.reason).toBe('not_in_match');
    expect(j.payload.error.code).toBe('match.not_in_match');
    late.socket.close();
    let rec;
    for (let i = 0; i < 50; i++) {
      rec = await s.call('GET', `/api/v1/matches/${p.matchId}`, { token: p.token });
      if (rec.status === 200) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(rec!.body).toMatchObject({ id: p.matchId, mode: 'room', status: 'finished', result: { winner: p.playerId, note: 'done' } });
    p.socket.close();
  });

  it('spends one join token per join frame and none on a lookup miss', async () => {
    const limited = await startTestServer({ rate_limits: { join: { limit: 2, window: 60_000 } } }, { gameDir: game.dir });
    try {
      const p = await connectPlayer(limited);
      const miss = { match_id: '0190c1f4-1111-7000-8000-000000000001' };
      for (let i = 0; i < 3; i++) expect((await p.socket.request('match.join', miss)).payload.reason).toBe('match_not_found');
      const a = await p.socket.request('match.find_or_create', { mode: 'room' });
      expect(a.type).toBe('match.joined');
      const b = await p.socket.request('match.join', { match_id: a.payload.match_id });
      expect(b.type).toBe('match.joined');
      const c = await p.socket.request('match.join', { match_id: a.payload.match_id });
      expect(c.payload.reason).toBe('join_rate_limited');
      expect(c.payload.error.code).toBe('join_rate_limited');
      expect((await p.socket.request('match.find_or_create', { mode: 'room' })).payload.reason).toBe('join_rate_limited');
      p.socket.close();
    } finally {
      await limited.close();
    }
  });
});

describe('capacity', () => {
  it('answers match_capacity_reached once the node runs match_max matches', async () => {
    const small = await startTestServer({ match_max: 1 }, { gameDir: game.dir });
    try {
      const a = await connectPlayer(small);
      const b = await connectPlayer(small);
      expect((await a.socket.request('match.find_or_create', { mode: 'counter' })).type).toBe('match.joined');
      const f = await b.socket.request('match.find_or_create', { mode: 'room' });
      expect(f.payload.reason).toBe('match_capacity_reached');
      expect(f.payload.error).toEqual({ code: 'ws.request_failed', message: expect.any(String), details: { reason: 'match_capacity_reached' } });
      a.socket.close();
      b.socket.close();
    } finally {
      await small.close();
    }
  });
});

describe('hot reload', () => {
  it('re-evaluates an edited script on the next tick and keeps the running state', async () => {
    const p = await inRoom();
    p.socket.send({ type: 'match.input', payload: { n: 1 } });
    await p.socket.next(stateWhere((v) => v.version === 'v1' && list(v.inputs).length === 1), 10_000);
    game.write('room.lua', ROOM('v2', 10));
    const reloaded = await p.socket.next(stateWhere((v) => v.version === 'v2'), 15_000);
    expect(reloaded.payload.inputs).toEqual([1]);
    p.socket.send({ type: 'match.input', payload: { n: 2 } });
    const st = await p.socket.next(stateWhere((v) => list(v.inputs).length === 2), 10_000);
    expect(st.payload.inputs).toEqual([1, 20]);
    expect(st.payload.tick).toBeGreaterThan(reloaded.payload.tick);
    p.socket.close();
  });
});
