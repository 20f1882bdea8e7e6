import { describe, expect, it } from 'vitest';
import { WindowLimiter } from '../runtime/platform/rate-limiter';
import { DEFAULT_RATE_LIMITS } from '../runtime/contracts/settings';
import { PASSIVE, vmOf } from './fixtures/games/harness';
import { MAX_QUEUED_INPUTS } from '../runtime/lua/match';

describe('match callbacks', () => {
  it('runs init with config, join, handle_input in arrival order, tick and per-player views', () => {
    const { vm } = vmOf(`
      function init(config) return { config = config, log = {}, players = {}, ticks = 0 } end
      function join(id, state, ctx) state.players[id] = { team = ctx.team or 0 } return state end
      function leave(id, state) state.players[id] = nil return state end
      function handle_input(id, input, state) table.insert(state.log, id .. ":" .. input.k) return state end
      function tick(state) state.ticks = state.ticks + 1 return state end
      function get_state(id, state) return { me = id, log = state.log, ticks = state.ticks, config = state.config, players = state.players } end
    `, { mode: { operator: { difficulty: 'hard' } } });
    expect(vm.init()).toEqual({ ok: true });
    expect(vm.join('a', { team: 2 })).toEqual({ ok: true });
    expect(vm.join('b')).toEqual({ ok: true });
    vm.input('b', { k: 1 });
    vm.input('a', { k: 2 });
    vm.input('b', { k: 3 });
    const r = vm.tick();
    expect(r).toEqual({ inputFailures: 0, inputsDropped: 0, tick: { ok: true }, finished: null });
    const view = JSON.parse(vm.viewJson('a'));
    expect(view).toEqual({
      me: 'a',
      log: ['b:1', 'a:2', 'b:3'],
      ticks: 1,
      config: { difficulty: 'hard', match_id: 'm-1', mode: 'default' },
      players: { a: { team: 2 }, b: { team: 0 } },
    });
    expect(JSON.parse(vm.viewJson('b')).me).toBe('b');
    expect(vm.leave('a')).toEqual({ ok: true });
    vm.tick();
    expect(Object.keys(JSON.parse(vm.viewJson('b')).players)).toEqual(['b']);
  });

  it('supports the 2-argument join form', () => {
    const { vm } = vmOf(PASSIVE + `function join(id, state) state.last = id return state end
      function get_state(id, state) return { last = state.last } end`);
    vm.init();
    expect(vm.join('p')).toEqual({ ok: true });
    vm.tick();
    expect(JSON.parse(vm.viewJson('p'))).toEqual({ last: 'p' });
  });

  it.each([
    ['return nil', { ok: false, refused: true }],
    ['return false', { ok: false, refused: true }],
    ['return nil, "bad_invite"', { ok: false, refused: true, reason: 'bad_invite' }],
    ['return false, "full"', { ok: false, refused: true, reason: 'full' }],
    ['return nil, string.rep("x", 65)', { ok: false, refused: true }],
    ['return nil, "tab\\there"', { ok: false, refused: true }],
    ['return nil, 42', { ok: false, refused: true }],
    ['', { ok: false, refused: true }],
  ])('join refusal: %s', (body, expected) => {
    const { vm } = vmOf(PASSIVE + `function join(id, state) state.n = state.n + 1 ${body} end
      function get_state(id, state) return { n = state.n } end`);
    vm.init();
    expect(vm.join('p')).toEqual(expected);
  });

  it('a join that returns a non-table non-refusal is a failure, not a join', () => {
    const { vm } = vmOf(PASSIVE + `function join(id, state) return 42 end`);
    vm.init();
    expect(vm.join('p')).toMatchObject({ ok: false, refused: false, kind: 'malformed' });
  });

  it('finishes on _finished with the _result table, or {} without one', () => {
    const a = vmOf(PASSIVE + `function tick(state) state._finished = true state._result = { winner = "a", scores = {3, 1} } return state end`).vm;
    a.init();
    expect(a.tick().finished).toEqual({ result: { winner: 'a', scores: [3, 1] } });
    expect(a.finished()).toEqual({ result: { winner: 'a', scores: [3, 1] } });

    const b = vmOf(PASSIVE + `function tick(state) state._finished = true state._result = "won" return state end`).vm;
    b.init();
    expect(b.tick().finished).toEqual({ result: {} });

    const c = vmOf(PASSIVE + `function tick(state) state._finished = 1 return state end`).vm;
    c.init();
    expect(c.tick().finished).toBeNull();
  });

  it('malformed returns keep the previous state and a non-table view sends {}', () => {
    const { vm } = vmOf(`
      function init() return { n = 1 } end
      function join(id, state) return state end
      function leave(id, state) return nil end
      function handle_input(id, input, state) state.n = state.n + 100 end
      function tick(state) return "nope" end
      function get_state(id, state) if state.n > 1000 then return 5 end return { n = state.n } end
    `);
    vm.init();
    vm.join('a');
    vm.input('a', {});
    const r = vm.tick();
    expect(r.inputFailures).toBe(1);
    expect(r.tick).toMatchObject({ ok: false, kind: 'malformed' });
    // In-place mutation by the failed call stays (no snapshots); the state reference is kept.
    expect(JSON.parse(vm.viewJson('a'))).toEqual({ n: 101 });
    expect(vm.leave('a')).toMatchObject({ ok: false, kind: 'malformed' });
  });

  it('an array-shaped view is sent as {}', () => {
    const { vm } = vmOf(PASSIVE + `function get_state(id, state) return {1, 2, 3} end`);
    vm.init();
    vm.join('a');
    vm.tick();
    expect(vm.viewJson('a')).toBe('{}');
  });

  it('shared state strategy calls get_state(state) once per tick', () => {
    const { vm } = vmOf(PASSIVE + `function get_state(state) state.calls = (state.calls or 0) + 1 return { calls = state.calls } end`, {
      mode: { state_strategy: 'shared' },
    });
    vm.init();
    vm.join('a');
    vm.join('b');
    vm.tick();
    expect(vm.viewJson('a')).toBe('{"calls":1}');
    expect(vm.viewJson('b')).toBe('{"calls":1}');
    vm.tick();
    expect(vm.viewJson('b')).toBe('{"calls":2}');
  });

  it('init that fails or returns a non-table is a failed init', () => {
    expect(vmOf(`function init() error("boom") end`).vm.init()).toMatchObject({ ok: false, kind: 'error' });
    expect(vmOf(`function init() return 5 end`).vm.init()).toMatchObject({ ok: false, kind: 'malformed' });
    expect(() => vmOf(`function init( return {} end`)).toThrow(/match\.lua/);
  });
});

describe('marshalling', () => {
  it('Lua to JSON: arrays, objects, integers, floats, empty tables, dropped values', () => {
    const { vm } = vmOf(PASSIVE + `function get_state(id, state)
      return {
        arr = {1, 2, 3}, empty = {}, holes = {1, nil, 3}, mixed = {1, 2, x = 3},
        int = 7, float = 1.5, integral_float = 2.0, big = 2^53, neg = -3,
        nan = 0/0, inf = math.huge, fn = function() end, yes = true, no = false,
        nested = { a = { b = { c = "deep" } } }, numkeys = { [10] = "ten", [2] = "two" },
        str = "héllo", fkey = { [1.5] = "x" }, bkey = { [true] = 1 },
      } end`);
    vm.init();
    vm.join('a');
    vm.tick();
    const text = vm.viewJson('a');
    const v = JSON.parse(text);
    expect(v.arr).toEqual([1, 2, 3]);
    // Nested empty tables are lists; only an empty view itself is {}.
    expect(v.empty).toEqual([]);
    expect(v.holes).toEqual({ '1': 1, '3': 3 });
    expect(v.mixed).toEqual({ '1': 1, '2': 2, x: 3 });
    expect(v.int).toBe(7);
    expect(v.float).toBe(1.5);
    expect(text).toContain('"integral_float":2,');
    expect(v.big).toBe(2 ** 53);
    expect(v.neg).toBe(-3);
    expect(v.nan).toBeNull();
    expect(v.inf).toBeNull();
    expect('fn' in v).toBe(false);
    expect(v.yes).toBe(true);
    expect(v.no).toBe(false);
    expect(v.nested.a.b.c).toBe('deep');
    expect(v.numkeys).toEqual({ '10': 'ten', '2': 'two' });
    expect(v.str).toBe('héllo');
    expect(v.fkey).toEqual({ '1.5': 'x' });
    expect(v.bkey).toEqual({ true: 1 });
  });

  it('JSON to Lua: null becomes absent, arrays are 1-based, integers are integers', () => {
    const { vm } = vmOf(PASSIVE + `function handle_input(id, input, state)
        state.seen = {
          has_gone = input.gone ~= nil,
          len = #input.list, first = input.list[1], third = input.list[3], second_nil = input.list[2] == nil,
          int_type = math.type(input.count), float_type = math.type(input.ratio),
          nested = input.obj.inner.value, flag = input.flag, text = input.text,
        }
        return state
      end
      function get_state(id, state) return state.seen end`);
    vm.init();
    vm.join('a');
    vm.input('a', { gone: null, list: [10, null, 30], count: 3, ratio: 0.5, obj: { inner: { value: 'v' } }, flag: false, text: 'ü' });
    vm.tick();
    expect(JSON.parse(vm.viewJson('a'))).toEqual({
      has_gone: false,
      len: 3,
      first: 10,
      third: 30,
      second_nil: true,
      int_type: 'integer',
      float_type: 'float',
      nested: 'v',
      flag: false,
      text: 'ü',
    });
  });

  it('deep nesting is replaced by "too_deep" and a cyclic view sends {}', () => {
    const deep = vmOf(PASSIVE + `function get_state(id, state)
      local root = {} local t = root for i = 1, 80 do t.c = {} t = t.c end return root end`).vm;
    deep.init();
    deep.join('a');
    deep.tick();
    let v: any = JSON.parse(deep.viewJson('a'));
    let depth = 0;
    while (typeof v === 'object') {
      v = v.c;
      depth++;
    }
    expect(v).toBe('too_deep');
    expect(depth).toBe(64);

    const cyc = vmOf(PASSIVE + `function get_state(id, state) local t = {} t.self = t return t end`).vm;
    cyc.init();
    cyc.join('a');
    cyc.tick();
    expect(cyc.viewJson('a')).toBe('{}');
  });
});

describe('game.* API', () => {
  it('game.id, game.log (levels, meta, bad arguments), game.send, set_joinable', () => {
    const { vm, recorded } = vmOf(PASSIVE + `function tick(state)
        state.id = game.id()
        state.r = {
          game.log("info", "hello", { a = 1 }),
          game.log("warning", "careful"),
          game.log("bogus", "x").error ~= nil,
          game.log("info", "x", 5).error ~= nil,
          game.log("error", {1, 2}),
          game.send("p2", { hi = true }),
          game.send("p2", "plain"),
          game.send(5, "x").error ~= nil,
          game.match.set_joinable(false),
          game.match.set_joinable("no").error ~= nil,
        }
        return state
      end
      function get_state(id, state) return { id = state.id, r = state.r } end`);
    vm.init();
    vm.join('a');
    vm.tick();
    const v = JSON.parse(vm.viewJson('a'));
    expect(v.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/);
    expect(v.r).toEqual([true, true, true, true, true, true, true, true, true, true]);
    const lines = recorded.logs.filter((l) => l.event === 'game.log');
    expect(lines.map((l) => [l.level, l.message])).toEqual([
      ['info', 'hello'],
      ['warn', 'careful'],
      ['error', '[1,2]'],
    ]);
    expect(lines[0]).toMatchObject({ match_id: 'm-1', script: 'match.lua', meta: { a: 1 } });
    expect(recorded.sends).toEqual([
      ['p2', { hi: true }],
      ['p2', 'plain'],
    ]);
    expect(recorded.joinable).toEqual([false]);
  });

  it('game.log is rate limited by the log group and answers false', () => {
    const limits = new WindowLimiter({ ...DEFAULT_RATE_LIMITS, log: { limit: 2, window: 60_000 } });
    const { vm, recorded } = vmOf(PASSIVE + `function tick(state) state.r = { game.log("info", "1"), game.log("info", "2"), game.log("info", "3") } return state end
      function get_state(id, state) return { r = state.r } end`, { limits });
    vm.init();
    vm.join('a');
    vm.tick();
    expect(JSON.parse(vm.viewJson('a')).r).toEqual([true, true, false]);
    expect(recorded.logs.filter((l) => l.event === 'game.log')).toHaveLength(2);
    limits.close();
  });

  it('game.broadcast validates the leaf, refuses reserved names, coerces payloads', () => {
    const reserved = ['state', 'tick', 'ack', 'terrain', 'list', 'left', 'joined', 'finished', 'phase_changed', 'matched',
      'matchmaker_failed', 'matchmaker_expired', 'vote_start', 'vote_tally', 'vote_result', 'vote_vetoed'];
    const { vm, recorded } = vmOf(PASSIVE + `function tick(state)
        local reserved = { ${reserved.map((r) => `"${r}"`).join(', ')} }
        state.refused = {}
        for _, name in ipairs(reserved) do
          local r = game.broadcast(name, { forged = true })
          table.insert(state.refused, type(r) == "table" and r.error ~= nil)
        end
        state.bad = {
          game.broadcast("a.b", {}).error ~= nil,
          game.broadcast("", {}).error ~= nil,
          game.broadcast(string.rep("x", 65), {}).error ~= nil,
          game.broadcast(nil).error ~= nil,
        }
        state.ok = {
          game.broadcast("wave_spawned", { wave = 3 }),
          game.broadcast("no-payload"),
          game.broadcast("array_payload", {1, 2}),
          game.broadcast("scalar", 5),
          game.broadcast("huge", { s = string.rep("x", 70000) }),
        }
        return state
      end
      function get_state(id, state) return { refused = state.refused, bad = state.bad, ok = state.ok } end`);
    vm.init();
    vm.join('a');
    vm.tick();
    const v = JSON.parse(vm.viewJson('a'));
    expect(v.refused).toEqual(reserved.map(() => true));
    expect(v.bad).toEqual([true, true, true, true]);
    expect(v.ok).toEqual([true, true, true, true, true]);
    expect(recorded.broadcasts).toEqual([
      ['wave_spawned', { wave: 3 }],
      ['no-payload', {}],
      ['array_payload', {}],
      ['scalar', {}],
    ]);
    expect(recorded.logs.some((l) => l.event === 'game_broadcast_rejected' && l.reason === 'too_large')).toBe(true);
  });

  it('domain bindings are absent unless the host provides them, and reachable when it does', () => {
    const bare = vmOf(PASSIVE + `function get_state(id, state) return { economy = game.economy == nil, storage = game.storage == nil } end`).vm;
    bare.init();
    bare.join('a');
    bare.tick();
    expect(JSON.parse(bare.viewJson('a'))).toEqual({ economy: true, storage: true });
  });

  it('failing calls are logged under script_log, 3 per window per call site', () => {
    const limits = new WindowLimiter({ ...DEFAULT_RATE_LIMITS });
    const { vm, recorded } = vmOf(PASSIVE + `function tick(state) error("tick broke") end`, { limits });
    vm.init();
    for (let i = 0; i < 6; i++) vm.tick();
    const lines = recorded.logs.filter((l) => l.event === 'lua_callback_failed');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatchObject({ callback: 'tick', script: 'match.lua', reason_class: 'error' });
    expect(lines[0]!.detail).toContain('tick broke');
    limits.close();
  });
});

describe('state bound', () => {
  it('a state over 1 MiB ends the match with state_too_large', () => {
    const { vm } = vmOf(PASSIVE + `function tick(state)
        state.blob = state.blob or {}
        for i = 1, 4 do table.insert(state.blob, string.rep("x", 100000)) end
        return state
      end
      function get_state(id, state) return { n = #state.blob } end`);
    vm.init();
    vm.join('a');
    let finished = null;
    for (let i = 0; i < 40 && !finished; i++) finished = vm.tick().finished;
    expect(finished).toEqual({ result: { status: 'error', reason: 'state_too_large' } });
  });

  it('a view over 1 MiB ends the match with state_too_large', () => {
    const { vm } = vmOf(PASSIVE + `function get_state(id, state)
        local v = {} for i = 1, 12 do v[i] = string.rep("y", 100000) end return { v = v } end`);
    vm.init();
    vm.join('a');
    expect(vm.tick().finished).toBeNull();
    expect(vm.viewJson('a')).toBe('{}');
    expect(vm.finished()).toEqual({ result: { status: 'error', reason: 'state_too_large' } });
  });
});

describe('hot reload', () => {
  const v1 = PASSIVE + `VERSION = 1
    function tick(state) state.n = state.n + 1 return state end
    function get_state(id, state) return { n = state.n, v = VERSION } end`;

  it('a changed script is re-evaluated at the next tick and the state survives', () => {
    const { vm, source } = vmOf(v1);
    vm.init();
    vm.join('a');
    vm.tick();
    vm.tick();
    expect(JSON.parse(vm.viewJson('a'))).toEqual({ n: 2, v: 1 });
    source.set('match.lua', v1.replace('VERSION = 1', 'VERSION = 2').replace('state.n + 1', 'state.n + 10'));
    vm.tick();
    // The tick that detected the change already ran the new code.
    expect(JSON.parse(vm.viewJson('a'))).toEqual({ n: 12, v: 2 });
  });

  it('a syntax error or a failing body keeps the old code, and is not retried until the file changes again', () => {
    const { vm, source, recorded } = vmOf(v1);
    vm.init();
    vm.join('a');
    vm.tick();
    source.set('match.lua', 'function tick(state) return state');
    vm.tick();
    vm.tick();
    expect(JSON.parse(vm.viewJson('a'))).toEqual({ n: 3, v: 1 });
    expect(recorded.logs.filter((l) => l.event === 'lua_callback_failed' && l.callback === 'reload')).toHaveLength(1);
    source.set('match.lua', 'VERSION = 99\nfunction tick(state) return state end\nerror("half way")');
    vm.tick();
    // The half-run body was undone: VERSION and tick are the old ones.
    expect(JSON.parse(vm.viewJson('a'))).toEqual({ n: 4, v: 1 });
    source.set('match.lua', v1.replace('VERSION = 1', 'VERSION = 3'));
    vm.tick();
    expect(JSON.parse(vm.viewJson('a'))).toEqual({ n: 5, v: 3 });
  });

  it('reload re-reads required modules (the module cache is emptied)', () => {
    const script = PASSIVE + `local m = require("lib.version")
      function get_state(id, state) return { v = m.v } end`;
    const { vm, source } = vmOf(script, { files: { 'lib/version.lua': 'return { v = "one" }' } });
    vm.init();
    vm.join('a');
    vm.tick();
    expect(JSON.parse(vm.viewJson('a'))).toEqual({ v: 'one' });
    source.set('lib/version.lua', 'return { v = "two" }');
    vm.tick();
    expect(JSON.parse(vm.viewJson('a'))).toEqual({ v: 'one' });
    source.set('match.lua', script + '\n-- touched');
    vm.tick();
    expect(JSON.parse(vm.viewJson('a'))).toEqual({ v: 'two' });
  });
});

describe('the inputs a match holds between ticks', () => {
  it('keeps at most MAX_QUEUED_INPUTS, the newest, and says how many went', () => {
    const { vm } = vmOf(`
      function init(config) return { seen = {} } end
      function join(id, state) return state end
      function leave(id, state) return state end
      function handle_input(id, input, state) table.insert(state.seen, input.n) return state end
      function tick(state) return state end
      function get_state(id, state) return { count = #state.seen, first = state.seen[1], last = state.seen[#state.seen] } end
    `);
    expect(vm.init()).toEqual({ ok: true });
    expect(vm.join('a')).toEqual({ ok: true });
    // A match whose ticks stopped (throttled for overrunning its share) while a player kept sending.
    const sent = MAX_QUEUED_INPUTS + 500;
    for (let n = 1; n <= sent; n++) vm.input('a', { n });
    expect(vm.tick().inputsDropped).toBe(500);
    expect(JSON.parse(vm.viewJson('a'))).toEqual({ count: MAX_QUEUED_INPUTS, first: 501, last: sent });
    // The count is per tick: the next one starts from nothing.
    vm.input('a', { n: 0 });
    expect(vm.tick().inputsDropped).toBe(0);
  });
});
