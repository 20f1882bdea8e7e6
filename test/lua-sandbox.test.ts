import { describe, expect, it } from 'vitest';
import { installHeapMeter } from '../runtime/lua/vm';
import { PASSIVE, vmOf } from './fixtures/games/harness';

/** Evaluates `expr` inside tick and returns what get_state reports. */
function probe(expr: string) {
  const { vm } = vmOf(PASSIVE + `function tick(state) state.out = { ${expr} } return state end
    function get_state(id, state) return { out = state.out } end`);
  vm.init();
  vm.join('a');
  const r = vm.tick();
  expect(r.tick).toEqual({ ok: true });
  return JSON.parse(vm.viewJson('a')).out;
}

describe('sandbox surface (decision 11)', () => {
  it.each([
    ['io', 'io == nil'],
    ['package', 'package == nil'],
    ['dofile', 'dofile == nil'],
    ['loadfile', 'loadfile == nil'],
    ['loadstring', 'loadstring == nil'],
    ['print', 'print == nil'],
    ['os.execute', 'os.execute == nil'],
    ['os.exit', 'os.exit == nil'],
    ['os.getenv', 'os.getenv == nil'],
    ['os.remove', 'os.remove == nil'],
    ['os.rename', 'os.rename == nil'],
    ['os.tmpname', 'os.tmpname == nil'],
    ['debug.sethook', 'debug.sethook == nil'],
    ['debug.getregistry', 'debug.getregistry == nil'],
    ['debug.getupvalue', 'debug.getupvalue == nil'],
    ['debug.setmetatable', 'debug.setmetatable == nil'],
    ['string.dump', 'string.dump == nil'],
    ['fengari js bridge', 'js == nil'],
    ['collectgarbage("collect")', 'not pcall(collectgarbage, "collect")'],
    ['collectgarbage()', 'not pcall(collectgarbage)'],
    ['binary chunk', 'load("\\27Lua\\83\\0") == nil'],
  ])('%s is gone', (_name, expr) => {
    expect(probe(expr)).toEqual([true]);
  });

  it('keeps os.time/clock/date/difftime, debug.traceback, coroutine, collectgarbage("count"), text load', () => {
    expect(
      probe(`type(os.time()) == "number", type(os.clock()) == "number", type(os.date("%Y")) == "string",
        type(os.difftime(2, 1)) == "number", type(debug.traceback()) == "string",
        coroutine.wrap(function() coroutine.yield(7) end)() == 7, type(collectgarbage("count")) == "number",
        load("return 1 + 1")() == 2`),
    ).toEqual([true, true, true, true, true, true, true, true]);
  });

  it('math.random truncates its bounds, answers a float for 0 or a non-number, and math.sqrt of a negative is 0.0', () => {
    expect(
      probe(`math.random(0) < 1, math.random(5) >= 1, math.random(3, 3.9) == 3, math.sqrt(-1) == 0.0,
        math.type(math.random(4)) == "integer", pcall(math.random, 5, 1) == false`),
    ).toEqual([true, true, true, true, true, true]);
  });
});

describe('require (a host function over dotted module names, rooted in the game directory)', () => {
  const files = {
    'modes/duel.lua': PASSIVE + `local h = require("helpers.math")
      function get_state(id, state)
        local results = { h.double(21) }
        for _, name in ipairs({ "../secret", "helpers/math", "x.", "1abc", "helpers.math\\n", "missing" }) do
          local ok, err = pcall(require, name)
          table.insert(results, ok and "loaded" or "refused")
        end
        table.insert(results, require("helpers.math") == h)
        table.insert(results, pcall(require, 5) == false)
        table.insert(results, require("helpers.nothing"))
        return { r = results }
      end`,
    'modes/helpers/math.lua': 'return { double = function(x) return x * 2 end }',
    'modes/helpers/nothing.lua': 'local x = 1',
    'helpers/math.lua': 'return { double = function(x) return -1 end }',
  };

  it('resolves against the script directory, caches, refuses bad names and missing files', () => {
    const { vm } = vmOf('', { files, mode: { file: 'modes/duel.lua' } });
    vm.init();
    vm.join('a');
    vm.tick();
    expect(JSON.parse(vm.viewJson('a')).r).toEqual([42, 'refused', 'refused', 'refused', 'refused', 'refused', 'refused', true, true, true]);
  });
});

const CALLBACKS = ['init', 'join', 'leave', 'handle_input', 'tick', 'get_state'] as const;

/** A script whose `target` callback runs `body` and whose other callbacks are normal. */
function hostile(target: (typeof CALLBACKS)[number], body: string) {
  const sig: Record<string, string> = {
    init: 'init(config)',
    join: 'join(id, state)',
    leave: 'leave(id, state)',
    handle_input: 'handle_input(id, input, state)',
    tick: 'tick(state)',
    get_state: 'get_state(id, state)',
  };
  const ret = target === 'init' ? 'return { n = 0 }' : target === 'get_state' ? 'return { n = state.n }' : 'return state';
  return PASSIVE + `function get_state(id, state) return { n = state.n } end
    function ${sig[target]} ${body} ${ret} end`;
}

/** Drives every callback once; returns what the target callback did. */
function drive(target: (typeof CALLBACKS)[number], body: string) {
  const { vm, recorded } = vmOf(hostile(target, body));
  const init = vm.init();
  if (target === 'init') return { result: init, vm, recorded };
  const join = vm.join('a');
  if (target === 'join') return { result: join, vm, recorded };
  vm.join('b');
  if (target === 'leave') return { result: vm.leave('b'), vm, recorded };
  vm.input('a', {});
  const tick = vm.tick();
  if (target === 'handle_input') return { result: tick.inputFailures === 1 ? { ok: false } : { ok: true }, vm, recorded };
  if (target === 'tick') return { result: tick.tick, vm, recorded };
  const view = vm.viewJson('a');
  return { result: view === '{}' ? { ok: false } : { ok: true }, vm, recorded };
}

/** A loop ends on whichever comes first: its deadline or its instruction count (JIT warm-up moves the race). */
const LOOP = /^(timeout|instructions_exhausted)$/;
/** Slow memory bombs may reach their deadline before the string bound. */
const SLOW_BOMB = /^(heap_exhausted|timeout)$/;
/** Table growth allocates and takes time: any of the three limits may come first. */
const ANY_LIMIT = /^(timeout|instructions_exhausted|heap_exhausted)$/;
const BOMBS: [string, string, RegExp][] = [
  ['infinite loop', 'while true do end', LOOP],
  ['loop under pcall', 'while true do pcall(function() while true do end end) end', LOOP],
  ['runtime error', 'error("scripted failure")', /^error$/],
  ['string doubling', 'local s = "x" while true do s = s .. s end', /^heap_exhausted$/],
  ['string doubling under pcall', 'local s = "x" for i = 1, 64 do pcall(function() s = s .. s end) end', /^heap_exhausted$/],
  ['string.rep 2^31', 'local s = string.rep("x", 2^31)', /^error$/],
  ['huge table.concat', 'local t = {} local s = string.rep("x", 1000000) for i = 1, 100 do t[i] = s end local r = table.concat(t)', SLOW_BOMB],
  ['huge gsub', 'local s = string.rep("x", 100000) local r = s:gsub("x", "yyyyyyyyyyyyyyyyyyyy")', SLOW_BOMB],
  ['deep recursion', 'local function f(n) return f(n + 1) + 1 end f(1)', /^heap_exhausted$/],
  ['table growth', 'local t = {} local i = 0 while true do i = i + 1 t[i] = { i } end', ANY_LIMIT],
  ['coroutine loop', 'coroutine.wrap(function() while true do end end)()', LOOP],
  // Library calls with no check inside them, sized to run a second or two unbounded (so a lost bound fails, not hangs).
  ['pattern backtracking', 'local s = string.rep("a", 20000) local r = s:find(".-b")', LOOP],
  ['balance scan from every start', 'local s = string.rep("(", 20000) for w in s:gmatch("%b()") do end', LOOP],
  ['long bracket class', 'local s = string.rep("a", 3000) local r = s:find("[" .. string.rep("b", 200000) .. "]")', LOOP],
  ['back-reference', 'local s = string.rep("a", 3000) local r = s:find("(.-)%1b")', LOOP],
];

describe('hostile scripts lose only the call', () => {
  for (const target of CALLBACKS) {
    for (const [name, body] of BOMBS) {
      it(`${name} in ${target}`, () => {
        const { result } = drive(target, body);
        expect(result.ok).toBe(false);
        // Another VM, and the node, carry on.
        const healthy = vmOf(PASSIVE + `function tick(state) state.n = state.n + 1 return state end
          function get_state(id, state) return { n = state.n } end`).vm;
        healthy.init();
        healthy.join('x');
        healthy.tick();
        expect(healthy.viewJson('x')).toBe('{"n":1}');
      });
    }
  }

  it.each(BOMBS)('%s reports its failure class', (_name, body, kind) => {
    const { result } = drive('tick', body);
    expect(result).toMatchObject({ ok: false, kind: expect.stringMatching(kind) });
  });

  it('each limit reports its own class: deadline, heap, instructions', () => {
    const unbounded = { heavy: 1e12, heavyMs: 60_000, heapBytes: 1e12 };
    const slow = vmOf(PASSIVE + 'function tick(state) local t = {} local i = 0 while true do i = i + 1 t[i % 1000 + 1] = { i } end end', {
      budgets: { ...unbounded, heavyMs: 40 },
    }).vm;
    slow.init();
    const started = Date.now();
    expect(slow.tick().tick).toMatchObject({ ok: false, kind: 'timeout' });
    expect(Date.now() - started).toBeLessThan(2000);
    const hoard = vmOf(PASSIVE + 'function tick(state) local t = {} for i = 1, 1e9 do t[i] = string.rep("x", 1000000) .. i end end', {
      budgets: { ...unbounded, heapBytes: 16 * 1024 * 1024 },
    }).vm;
    hoard.init();
    expect(hoard.tick().tick).toMatchObject({ ok: false, kind: 'heap_exhausted' });
    const counted = vmOf(PASSIVE + 'function tick(state) while true do end end', { budgets: { ...unbounded, heavy: 100_000 } }).vm;
    counted.init();
    expect(counted.tick().tick).toMatchObject({ ok: false, kind: 'instructions_exhausted' });
  });

  it('counts a call\'s first big string against its heap budget, though the heap is first read after it', () => {
    // A meter that never moves: only the bytes a check is told were just allocated count.
    const previous = installHeapMeter(() => 50_000_000);
    try {
      const budgets = { heavy: 1e12, heavyMs: 60_000, heapBytes: 500_000 };
      const one = vmOf(PASSIVE + 'function tick(state) state.s = string.rep("x", 600000) return state end', { budgets }).vm;
      one.init();
      expect(one.tick().tick).toMatchObject({ ok: false, kind: 'heap_exhausted' });
      const small = vmOf(PASSIVE + 'function tick(state) state.s = string.rep("x", 400000) return state end', { budgets }).vm;
      small.init();
      expect(small.tick().tick).toMatchObject({ ok: true });
    } finally {
      installHeapMeter(previous);
    }
  });

  it('counts what a binding\'s answer costs against the heap budget, before the call\'s first hook', () => {
    // A meter the binding moves, as its answer's marshalling would move the real heap.
    let bytes = 0;
    const previous = installHeapMeter(() => bytes);
    try {
      const budgets = { heavy: 1e12, heavyMs: 60_000, heapBytes: 500_000 };
      const bindings = { fetch: () => ((bytes += 600_000), 'a big answer') };
      const { vm } = vmOf(PASSIVE + 'function tick(state) state.s = game.fetch() return state end', { budgets, bindings });
      vm.init();
      expect(vm.tick().tick).toMatchObject({ ok: false, kind: 'heap_exhausted' });
    } finally {
      installHeapMeter(previous);
    }
  });

  it('one tick shares one deadline: inputs, tick and views together stop at the heavy deadline', () => {
    const { vm } = vmOf(PASSIVE + `
      function handle_input(id, input, state) while true do end end
      function tick(state) while true do end end
      function get_state(id, state) while true do end end`, { budgets: { heavy: 1e12, light: 1e12, heavyMs: 60, lightMs: 50, heapBytes: 1e12 } });
    vm.init();
    vm.join('a');
    for (let i = 0; i < 5; i++) vm.input('a', { n: i });
    const started = Date.now();
    vm.tick();
    vm.viewJson('a');
    // Five inputs at 50 ms each, a tick and a view would take 360 ms without the shared cap.
    expect(Date.now() - started).toBeLessThan(200);
    expect(vm.takeLimitFailure()).toMatchObject({ kind: 'timeout' });
  });

  it('a pattern search is stopped at its deadline, and one that fits its budget answers as before', () => {
    const budgets = { heavy: 1e12, heavyMs: 40, lightMs: 20 };
    const bomb = vmOf(PASSIVE + 'function tick(state) state.r = string.rep("a", 30000):gsub(".-b", "x") return state end', { budgets }).vm;
    bomb.init();
    const started = Date.now();
    expect(bomb.tick().tick).toMatchObject({ ok: false, kind: 'timeout' });
    // One check every few thousand steps: the call ends close to its deadline, not a budget later.
    expect(Date.now() - started).toBeLessThan(400);
    const honest = vmOf(
      PASSIVE +
        `function tick(state)
          local k, v = ("speed=12; name=ada"):match("(%w+)=(%w+)")
          local words = {} for w in ("a bb ccc"):gmatch("%a+") do words[#words + 1] = w end
          state.r = { k, v, table.concat(words, ","), (("x(y(z))w"):find("%b()")), (("a,b"):gsub(",", ";")) }
          return state
        end
        function get_state(id, state) return { r = state.r } end`,
      { budgets },
    ).vm;
    honest.init();
    honest.join('p');
    expect(honest.tick().tick).toMatchObject({ ok: true });
    expect(JSON.parse(honest.viewJson('p'))).toEqual({ r: ['speed', '12', 'a,bb,ccc', 2, 'a;b'] });
  });

  it('a plain search takes linear time and answers as Lua 5.3 does', () => {
    const finds = vmOf(
      PASSIVE +
        `function tick(state)
          local hay = string.rep("a", 1000000)
          local worst = { hay:find(string.rep("a", 500000) .. "b", 1, true) }
          local near = { (hay .. "b"):find(string.rep("a", 500000) .. "b") }
          state.r = { #worst, near[1], near[2], { ("a.b"):find(".", 1, true) }, { ("hello"):find("l") }, { ("hello"):find("lo", -2) },
            { ("hello"):find("", 6) }, #{ ("hello"):find("", 7) }, { ("hello"):find("h", -10) }, { ("hello"):find("l.", 1) } }
          return state
        end
        function get_state(id, state) return { r = state.r } end`,
    ).vm;
    finds.init();
    finds.join('p');
    expect(finds.tick().tick).toMatchObject({ ok: true });
    expect(JSON.parse(finds.viewJson('p'))).toEqual({ r: [0, 500001, 1000001, [2, 2], [3, 3], [4, 5], [6, 5], 0, [1, 1], [3, 4]] });
  });

  it('the failing VM keeps its state and works at its next call', () => {
    const { vm } = vmOf(PASSIVE + `
      function tick(state)
        state.n = state.n + 1
        if state.n == 2 then while true do end end
        return state
      end
      function get_state(id, state) return { n = state.n } end`);
    vm.init();
    vm.join('a');
    expect(vm.tick().tick.ok).toBe(true);
    expect(vm.tick().tick).toMatchObject({ ok: false, kind: expect.stringMatching(LOOP) });
    expect(vm.tick().tick.ok).toBe(true);
    expect(vm.viewJson('a')).toBe('{"n":3}');
  });

  it('a smaller configured budget applies', () => {
    const script = PASSIVE + `function tick(state) for i = 1, 100000 do end return state end`;
    const roomy = vmOf(script).vm;
    roomy.init();
    expect(roomy.tick().tick.ok).toBe(true);
    const tight = vmOf(script, { budgets: { heavy: 50_000 } }).vm;
    tight.init();
    expect(tight.tick().tick).toMatchObject({ ok: false, kind: 'instructions_exhausted' });
  });
});
