import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { vmOf } from './fixtures/games/harness';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, expectErrorFrame, type Frame } from './support/ws-client';

/**
 * Two behaviours third-party match scripts rely on: a refused or failed
 * `join` leaves no trace in the VM (its globals and state as before the call), and an empty
 * table nested in a value is `[]` while an empty value itself is `{}`.
 */

const game = gameDir({
  'config.lua': 'return { door = "door.lua", shapes = "shapes.lua" }',
  'door.lua': `
match_size = 1
max_players = 4
quick_play = true
attempts = 0
local seen = 0
function init(config) return { attempts = 0, nested = { mark = "clean" }, tick = 0 } end
function join(player_id, state, ctx)
  if ctx.counted then
    attempts = attempts + 1
    seen = seen + 1
    state.attempts = state.attempts + 1
    state.nested.mark = "dirty"
    state.nested.extra = { 1, 2, 3 }
    litter = { player_id }
    string.litter = true
    setmetatable(state, { __index = function() return "leaked" end })
    if ctx.boom then error("join exploded after writing") end
    if ctx.pass ~= "open" then return nil, "not_yet" end
    state.nested.mark = "admitted"
  end
  return state
end
function leave(player_id, state) return state end
function handle_input(player_id, input, state) return state end
function tick(state) state.tick = state.tick + 1 return state end
function get_state(player_id, state)
  return {
    tick = state.tick,
    attempts = attempts,
    upvalue = seen,
    state_attempts = state.attempts,
    mark = state.nested.mark,
    extra = state.nested.extra ~= nil,
    litter = litter ~= nil,
    string_litter = string.litter ~= nil,
    metatable = getmetatable(state) ~= nil,
  }
end
`,
  'shapes.lua': `
match_size = 1
quick_play = true
function init(config) return { tick = 0 } end
function join(player_id, state) return state end
function leave(player_id, state) return state end
function handle_input(player_id, input, state)
  if input.finish then
    state._finished = true
    state._result = { status = "done", items = {}, table = { rows = {} } }
  end
  if input.bare then state.bare = true end
  return state
end
function tick(state)
  state.tick = state.tick + 1
  game.broadcast("empty", {})
  game.broadcast("nested", { list = {}, deeper = { {} } })
  return state
end
function get_state(player_id, state)
  if state.bare then return {} end
  return {
    tick = state.tick,
    boons = {},
    players = { [player_id] = { boons = {}, inventory = { slots = {} } } },
    list_of_empties = { {}, {} },
    record = { name = "x", tags = {} },
  }
end
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

const stateAfter = (tick: number) => (f: Frame) => f.type === 'match.state' && f.payload.tick > tick;

describe('a refused join reverts the VM', () => {
  it('keeps nothing five refused joins and a failed one wrote: attempts = 1 after the sixth is admitted', async () => {
    const host = await connectPlayer(s);
    const opened = await host.socket.request('match.find_or_create', { mode: 'door' });
    expect(opened.type).toBe('match.joined');
    const matchId = opened.payload.match_id as string;

    const guest = await connectPlayer(s);
    for (let i = 0; i < 5; i++) {
      const refused = await guest.socket.request('match.join', { match_id: matchId, ctx: { counted: true, pass: `wrong${i}` } });
      expectErrorFrame(refused, 'join_refused', 'match.join_refused');
      expect(refused.payload.error.details).toEqual({ refused_reason: 'not_yet' });
    }
    const failed = await guest.socket.request('match.join', { match_id: matchId, ctx: { counted: true, boom: true } });
    expect(failed.type).toBe('error');
    expect(failed.payload.error.code).toBe('internal');

    // Still untouched before the admitted join: the host sees the state as init left it.
    const before = await host.socket.next(stateAfter(0), 10_000);
    expect(before.payload).toMatchObject({ attempts: 0, upvalue: 0, state_attempts: 0, mark: 'clean', extra: false, litter: false, string_litter: false, metatable: false });

    const admitted = await guest.socket.request('match.join', { match_id: matchId, ctx: { counted: true, pass: 'open' } });
    expect(admitted.type).toBe('match.joined');
    expect(admitted.payload.players).toEqual([host.playerId, guest.playerId]);

    const after = await guest.socket.next(stateAfter(0), 10_000);
    // An admitted join keeps everything it did, refused ones nothing.
    expect(after.payload).toMatchObject({ attempts: 1, upvalue: 1, state_attempts: 1, mark: 'admitted', extra: true, litter: true, string_litter: true, metatable: true });
    host.socket.close();
    guest.socket.close();
  });
});

describe('empty tables on the wire', () => {
  it('encodes nested empty tables as [] and an empty view, _result and broadcast payload as {}', async () => {
    const p = await connectPlayer(s);
    const joined = await p.socket.request('match.find_or_create', { mode: 'shapes' });
    const st = await p.socket.next(stateAfter(0), 10_000);
    expect(st.payload).toEqual({
      tick: st.payload.tick,
      boons: [],
      players: { [p.playerId]: { boons: [], inventory: { slots: [] } } },
      list_of_empties: [[], []],
      record: { name: 'x', tags: [] },
    });
    expect((await p.socket.next('match.empty', 10_000)).payload).toEqual({});
    expect((await p.socket.next('match.nested', 10_000)).payload).toEqual({ list: [], deeper: [[]] });

    p.socket.send({ type: 'match.input', payload: { bare: true } });
    const bare = await p.socket.next((f) => f.type === 'match.state' && !('tick' in f.payload), 10_000);
    expect(bare.payload).toEqual({});

    p.socket.send({ type: 'match.input', payload: { finish: true } });
    const done = await p.socket.next('match.finished', 10_000);
    expect(done.payload).toEqual({ match_id: joined.payload.match_id, result: { status: 'done', items: [], table: { rows: [] } } });
    p.socket.close();
  });
});

describe('other callbacks whose failure reverts the VM', () => {
  // Each failing callback writes a global, an upvalue, the state and a nested table, then raises.
  const script = `
touched = 0
local upvalue = 0
function init(config) return { n = 0, nested = { mark = "clean" } } end
local function spoil(state)
  touched = touched + 1
  upvalue = upvalue + 1
  state.n = state.n + 1
  state.nested.mark = "dirty"
  state.added = true
end
function join(id, state) return state end
function leave(id, state) spoil(state) error("leave failed") end
function on_phase_started(name, state) spoil(state) error("phase failed") end
function on_phase_ended(name, state) spoil(state) return nil end
function vote_resolved(template, result, state) spoil(state) error("vote failed") end
function handle_input(id, input, state) return state end
function tick(state) return state end
function get_state(id, state)
  return { touched = touched, upvalue = upvalue, n = state.n, mark = state.nested.mark, added = state.added == true }
end`;

  it('leaves no trace of a failed leave, on_phase_started, on_phase_ended (malformed) or vote_resolved', () => {
    const { vm } = vmOf(script);
    expect(vm.init().ok).toBe(true);
    expect(vm.join('a').ok).toBe(true);
    expect(vm.join('b').ok).toBe(true);
    expect(vm.leave('b').ok).toBe(false);
    expect(vm.phase('on_phase_started', 'p').ok).toBe(false);
    expect(vm.phase('on_phase_ended', 'p').ok).toBe(false);
    expect(vm.voteResolved('t', {}).ok).toBe(false);
    vm.tick();
    expect(JSON.parse(vm.viewJson('a'))).toEqual({ touched: 0, upvalue: 0, n: 0, mark: 'clean', added: false });
    vm.close();
  });
});
