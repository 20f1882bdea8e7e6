import { describe, expect, it } from 'vitest';
import type { JsonObject, JsonValue } from '../runtime/lua/host-interface';
import { luaString, toJson } from '../runtime/lua/marshal';
import { pushSpatialTable, type ZoneSpatial } from '../runtime/lua/spatial';
import { lua, Sandbox } from '../runtime/lua/vm';

const WORLD = `
  world = {
    a = { x = 0, y = 0, type = "orc" },
    b = { x = 3, y = 4, type = "elf" },
    c = { x = 10, y = 0, type = "orc" },
    d = { x = -1, y = 1, type = "tree" },
    [7] = { x = 1, y = 0, type = "elf" },
  }
  function ids(results)
    local out = {}
    for i, r in ipairs(results) do out[i] = r.id end
    return out
  end
  function sorted_ids(results)
    local out = ids(results)
    table.sort(out, function(p, q) return tostring(p) < tostring(q) end)
    return out
  end
`;

/** A zone whose own entities are the script's global `own` (as a zone's live entity table would be). */
function zoneOf(mirrors: { id: string; entity: JsonObject }[] = []): ZoneSpatial & { mirrorCalls: number } {
  const zone = {
    mirrorCalls: 0,
    pushOwnEntities(L: any) {
      lua.lua_getglobal(L, luaString('own'));
    },
    mirrors() {
      zone.mirrorCalls++;
      return mirrors;
    },
  };
  return zone;
}

/**
 * A sandbox with the table as the global `spatial` and WORLD's globals;
 * `run` evaluates a chunk and answers its first result as JSON.
 */
function vmWith(zone: ZoneSpatial | null, { charged = false, budget = 10_000_000 } = {}) {
  const sandbox = new Sandbox({ source: { read: () => null }, baseDir: '' });
  const L = sandbox.L;
  pushSpatialTable(L, zone, charged ? (L, n) => sandbox.charge(L, n) : undefined);
  lua.lua_setglobal(L, luaString('spatial'));
  const run = (chunk: string): JsonValue | undefined => {
    const compiled = sandbox.compile(chunk, '=test');
    if (!compiled.ok) throw new Error(compiled.message);
    const outcome = sandbox.call(0, budget, 5_000);
    if (!outcome.ok) throw new Error(`${outcome.kind}: ${outcome.message}`);
    const value = outcome.results > 0 ? toJson(L, -outcome.results) : undefined;
    lua.lua_settop(L, 0);
    return value;
  };
  run(WORLD);
  return run;
}


describe('game.spatial.query_radius over an entity table', () => {
  it('answers every entity within r (inclusive) as { id, entity, distance }, the entity being the same table', () => {
    const run = vmWith(null);
    expect(run(`return sorted_ids(spatial.query_radius(world, 0, 0, 5))`)).toEqual([7, 'a', 'b', 'd']);
    expect(
      run(`local out = {}
        for _, r in ipairs(spatial.query_radius(world, 0, 0, 5)) do
          out[tostring(r.id)] = { same = rawequal(r.entity, world[r.id]), distance = r.distance }
        end
        return out`),
    ).toEqual({
      a: { same: true, distance: 0 },
      b: { same: true, distance: 5 },
      d: { same: true, distance: Math.SQRT2 },
      '7': { same: true, distance: 1 },
    });
    expect(run(`return spatial.query_radius(world, 100, 100, 1)`)).toEqual({});
    expect(run(`return spatial.query_radius(world, 0, 0, -1)`)).toEqual({});
    expect(run(`return sorted_ids(spatial.query_radius(world, 0, 0, math.huge))`)).toEqual([7, 'a', 'b', 'c', 'd']);
  });

  it('skips entities without numeric x and y, and values that are not tables', () => {
    const run = vmWith(null);
    expect(
      run(`return sorted_ids(spatial.query_radius({
          ok = { x = 1, y = 1 },
          no_x = { y = 1 },
          no_y = { x = 1 },
          text_x = { x = "1", y = 1 },
          table_y = { x = 1, y = {} },
          nan = { x = 0/0, y = 0 },
          plain = 5,
          word = "x",
        }, 0, 0, 10))`),
    ).toEqual(['ok']);
  });

  it('opts.type takes a string or an array of strings and matches the entity type field', () => {
    const run = vmWith(null);
    expect(run(`return sorted_ids(spatial.query_radius(world, 0, 0, 100, { type = "orc" }))`)).toEqual(['a', 'c']);
    expect(run(`return sorted_ids(spatial.query_radius(world, 0, 0, 100, { type = { "elf", "tree" } }))`)).toEqual([7, 'b', 'd']);
    expect(run(`return spatial.query_radius(world, 0, 0, 100, { type = "dragon" })`)).toEqual({});
    expect(run(`return spatial.query_radius({ u = { x = 0, y = 0 } }, 0, 0, 1, { type = "orc" })`)).toEqual({});
  });

  it('opts.exclude takes an id or an array of ids (number ids too)', () => {
    const run = vmWith(null);
    expect(run(`return sorted_ids(spatial.query_radius(world, 0, 0, 5, { exclude = "a" }))`)).toEqual([7, 'b', 'd']);
    expect(run(`return sorted_ids(spatial.query_radius(world, 0, 0, 5, { exclude = { "b", 7 } }))`)).toEqual(['a', 'd']);
  });

  it('opts.sort orders by distance, nearest or farthest; opts.max_results caps; other keys are ignored', () => {
    const run = vmWith(null);
    expect(run(`return ids(spatial.query_radius(world, 0, 0, 100, { sort = "nearest" }))`)).toEqual(['a', 7, 'd', 'b', 'c']);
    expect(run(`return ids(spatial.query_radius(world, 0, 0, 100, { sort = "farthest" }))`)).toEqual(['c', 'b', 'd', 7, 'a']);
    expect(run(`return ids(spatial.query_radius(world, 0, 0, 100, { sort = "nearest", max_results = 2 }))`)).toEqual(['a', 7]);
    expect(run(`return ids(spatial.query_radius(world, 0, 0, 100, { sort = "farthest", max_results = 1 }))`)).toEqual(['c']);
    expect(run(`return #spatial.query_radius(world, 0, 0, 100, { max_results = 3 })`)).toBe(3);
    expect(run(`return #spatial.query_radius(world, 0, 0, 100, { max_results = 0 })`)).toBe(0);
    expect(run(`return #spatial.query_radius(world, 0, 0, 100, { max_results = 99, colour = "red", [1] = true })`)).toBe(5);
    expect(
      run(`local r = spatial.query_radius(world, 0, 0, 100, { type = "orc", exclude = "a", sort = "farthest", max_results = 5 })
        return { #r, r[1].id, r[1].distance }`),
    ).toEqual([1, 'c', 10]);
  });
});

describe('game.spatial.nearest', () => {
  it('answers at most n entities, closest first, as { id, entity, distance }', () => {
    const run = vmWith(null);
    expect(run(`return ids(spatial.nearest(world, 0, 0, 3))`)).toEqual(['a', 7, 'd']);
    expect(run(`return ids(spatial.nearest(world, 10, 1, 2))`)).toEqual(['c', 'b']);
    expect(run(`return ids(spatial.nearest(world, 0, 0, 50))`)).toEqual(['a', 7, 'd', 'b', 'c']);
    expect(run(`return spatial.nearest(world, 0, 0, 0)`)).toEqual({});
    expect(run(`return spatial.nearest(world, 0, 0, -3)`)).toEqual({});
    expect(run(`return spatial.nearest({}, 0, 0, 3)`)).toEqual({});
    expect(
      run(`local r = spatial.nearest(world, 3, 3, 1)[1]
        return { r.id, r.distance, rawequal(r.entity, world.b) }`),
    ).toEqual(["b", 1, true]);
  });

  it('applies type, exclude and max_results, and stays closest first whatever sort says', () => {
    const run = vmWith(null);
    expect(run(`return ids(spatial.nearest(world, 0, 0, 5, { type = "elf" }))`)).toEqual([7, 'b']);
    expect(run(`return ids(spatial.nearest(world, 0, 0, 2, { exclude = { "a", 7 } }))`)).toEqual(['d', 'b']);
    expect(run(`return ids(spatial.nearest(world, 0, 0, 4, { max_results = 2 }))`)).toEqual(['a', 7]);
    expect(run(`return ids(spatial.nearest(world, 0, 0, 2, { sort = "farthest" }))`)).toEqual(['a', 7]);
  });

  it('agrees with a sort written in Lua over many entities, for every n, and for capped sorted radius queries', () => {
    const run = vmWith(null);
    run(`crowd = {}
      math.randomseed(1)
      for i = 1, 500 do crowd["c" .. i] = { x = math.random(0, 200), y = math.random(0, 200), type = i % 3 == 0 and "orc" or "elf" } end
      -- Distances only: equal distances may come in either order here.
      function reference(cx, cy, keep, far)
        local ds = {}
        for id, e in pairs(crowd) do
          local dx, dy = e.x - cx, e.y - cy
          if keep(e) then ds[#ds + 1] = math.sqrt(dx * dx + dy * dy) end
        end
        table.sort(ds, function(p, q) if far then return p > q end return p < q end)
        return ds
      end
      function check(results, cx, cy, limit, keep, far)
        local want = reference(cx, cy, keep, far)
        if #results ~= math.min(limit, #want) then return "count " .. #results end
        for i, r in ipairs(results) do
          local dx, dy = r.entity.x - cx, r.entity.y - cy
          if r.distance ~= want[i] or r.distance ~= math.sqrt(dx * dx + dy * dy) or crowd[r.id] ~= r.entity then return "at " .. i end
        end
        return "ok"
      end
      all = function() return true end
      orcs = function(e) return e.type == "orc" end`);
    for (const n of [1, 2, 7, 50, 499, 500, 800]) {
      expect(run(`return check(spatial.nearest(crowd, 100, 100, ${n}), 100, 100, ${n}, all)`), `n ${n}`).toBe('ok');
      expect(run(`return check(spatial.nearest(crowd, 13, 170, ${n}, { type = "orc" }), 13, 170, ${n}, orcs)`), `n ${n} orcs`).toBe('ok');
    }
    for (const max of [1, 13, 400]) {
      expect(
        run(`return check(spatial.query_radius(crowd, 50, 50, 1e9, { sort = "farthest", max_results = ${max} }), 50, 50, ${max}, all, true)`),
        `farthest ${max}`,
      ).toBe('ok');
      expect(
        run(`return check(spatial.query_radius(crowd, 50, 50, 1e9, { sort = "nearest", max_results = ${max}, type = "orc" }), 50, 50, ${max}, orcs)`),
        `nearest ${max}`,
      ).toBe('ok');
    }
  });

  it('skips entities without numeric x and y', () => {
    const run = vmWith(null);
    expect(run(`return ids(spatial.nearest({ p = { x = 5, y = 0 }, q = { x = "1", y = 0 }, r = { name = "r" } }, 0, 0, 3))`)).toEqual(['p']);
  });
});

describe('game.spatial.in_range and distance', () => {
  it('measure Euclidean distance on x and y, range inclusive', () => {
    const run = vmWith(null);
    expect(
      run(`local a, b = { x = 0, y = 0 }, { x = 3, y = 4, z = 100 }
        return { spatial.distance(a, b), spatial.in_range(a, b, 5), spatial.in_range(a, b, 4.99),
          spatial.in_range(b, a, 10), spatial.distance(b, b), spatial.in_range(a, a, 0) }`),
    ).toEqual([5, true, false, true, 0, true]);
    expect(run(`return math.type(spatial.distance({ x = 1, y = 1 }, { x = 1, y = 2 }))`)).toBe('float');
  });
});

describe('zone-only forms', () => {
  const OWN = `own = {
    p1 = { x = 1, y = 1 },
    p2 = { x = 4, y = 5.5 },
    p3 = { x = -2, y = 3 },
    ghost = { name = "no position" },
  }`;

  it('query_radius(x, y, r) answers { id, x, y } from the calling zone own entities', () => {
    const run = vmWith(zoneOf());
    run(OWN);
    const found = run(`local r = spatial.query_radius(0, 0, 4)
      table.sort(r, function(p, q) return p.id < q.id end)
      return r`);
    expect(found).toEqual([
      { id: 'p1', x: 1, y: 1 },
      { id: 'p3', x: -2, y: 3 },
    ]);
    expect(run(`local r = spatial.query_radius(4, 5.5, 0)[1] return { r.id, math.type(r.x), math.type(r.y), r.entity == nil }`)).toEqual([
      'p2',
      'integer',
      'float',
      true,
    ]);
  });

  it('query_rect answers { id, x, y } inside the rectangle, bounds inclusive, corners in either order', () => {
    const run = vmWith(zoneOf());
    run(OWN + `
      function rect_ids(...)
        local out = {}
        for i, r in ipairs(spatial.query_rect(...)) do out[i] = r.id end
        table.sort(out)
        return out
      end`);
    expect(run(`return rect_ids(1, 1, 4, 5.5)`)).toEqual(['p1', 'p2']);
    expect(run(`return rect_ids(4, 5.5, 1, 1)`)).toEqual(['p1', 'p2']);
    expect(run(`return rect_ids(1, 5.5, 4, 1)`)).toEqual(['p1', 'p2']);
    expect(run(`return rect_ids(-2, 0, 1, 3)`)).toEqual(['p1', 'p3']);
    // An empty Lua table reads as {} in JSON.
    expect(run(`return rect_ids(10, 10, 20, 20)`)).toEqual({});
    expect(run(`local r = spatial.query_rect(0, 0, 2, 2)[1] return { r.id, r.x, r.y }`)).toEqual(['p1', 1, 1]);
  });

  it('answer empty while the zone has no entity table', () => {
    const run = vmWith(zoneOf());
    expect(run(`return { spatial.query_radius(0, 0, 10), spatial.query_rect(0, 0, 1, 1) }`)).toEqual([[], []]);
  });

  it('answer an error envelope outside a zone', () => {
    const run = vmWith(null);
    run(OWN);
    expect(
      run(`return {
        spatial.query_radius(0, 0, 4),
        spatial.query_rect(0, 0, 1, 1),
        spatial.neighbours_radius(0, 0, 4),
        spatial.neighbours_rect(0, 0, 1, 1),
      }`),
    ).toEqual([
      { error: 'game.spatial.query_radius(x, y, r) is only available in a zone script' },
      { error: 'game.spatial.query_rect(x1, y1, x2, y2) is only available in a zone script' },
      { error: 'game.spatial.neighbours_radius(x, y, r[, opts]) is only available in a zone script' },
      { error: 'game.spatial.neighbours_rect(x1, y1, x2, y2[, opts]) is only available in a zone script' },
    ]);
  });

  it('work when called from a coroutine (the calling thread, not the main one)', () => {
    const run = vmWith(zoneOf());
    run(OWN);
    expect(
      run(`return coroutine.wrap(function()
        coroutine.yield(#spatial.query_radius(0, 0, 4) + #spatial.nearest(own, 0, 0, 10) + #spatial.query_rect(-5, -5, 5, 5))
      end)()`),
    ).toBe(2 + 3 + 2);
  });

  it('the table forms work in a zone too', () => {
    const run = vmWith(zoneOf());
    expect(run(`return ids(spatial.nearest(world, 0, 0, 2))`)).toEqual(['a', 7]);
    expect(run(`return sorted_ids(spatial.query_radius(world, 0, 0, 1))`)).toEqual([7, 'a']);
  });
});

describe('neighbours over the mirrors', () => {
  const mirrors: { id: string; entity: JsonObject }[] = [
    { id: 'm1', entity: { x: 100, y: 0, type: 'orc', hp: 7, gear: { sword: true } } },
    { id: 'm2', entity: { x: 103, y: 4, type: 'elf' } },
    { id: 'm3', entity: { x: 110, y: 0, type: 'orc' } },
    { id: 'm4', entity: { type: 'orc' } },
    { id: 'm5', entity: { x: '101', y: 0 } },
  ];

  it('neighbours_radius answers { id, entity, distance } with the entity as a fresh table', () => {
    const zone = zoneOf(mirrors);
    const run = vmWith(zone);
    expect(
      run(`local r = spatial.neighbours_radius(100, 0, 5, { sort = "nearest" })
        return r`),
    ).toEqual([
      { id: 'm1', entity: mirrors[0]!.entity, distance: 0 },
      { id: 'm2', entity: mirrors[1]!.entity, distance: 5 },
    ]);
    expect(
      run(`local first = spatial.neighbours_radius(100, 0, 1)[1]
        first.entity.hp = 0
        local again = spatial.neighbours_radius(100, 0, 1)[1]
        return { again.entity.hp, rawequal(first.entity, again.entity) }`),
    ).toEqual([7, false]);
    expect(mirrors[0]!.entity.hp).toBe(7);
  });

  it('neighbours_radius applies type, exclude, max_results and sort', () => {
    const run = vmWith(zoneOf(mirrors));
    expect(run(`return ids(spatial.neighbours_radius(100, 0, 50, { sort = "farthest" }))`)).toEqual(['m3', 'm2', 'm1']);
    expect(run(`return ids(spatial.neighbours_radius(100, 0, 50, { sort = "nearest", type = "orc" }))`)).toEqual(['m1', 'm3']);
    expect(run(`return ids(spatial.neighbours_radius(100, 0, 50, { sort = "nearest", type = { "elf" } }))`)).toEqual(['m2']);
    expect(run(`return ids(spatial.neighbours_radius(100, 0, 50, { sort = "nearest", exclude = { "m1", "m2" } }))`)).toEqual(['m3']);
    expect(run(`return ids(spatial.neighbours_radius(100, 0, 50, { sort = "farthest", max_results = 1 }))`)).toEqual(['m3']);
    expect(run(`return #spatial.neighbours_radius(100, 0, 50, { max_results = 2 })`)).toBe(2);
  });

  it('neighbours_rect answers { id, entity } inside the rectangle, corners in either order', () => {
    const run = vmWith(zoneOf(mirrors));
    expect(run(`return spatial.neighbours_rect(103, 4, 100, 0)`)).toEqual([
      { id: 'm1', entity: mirrors[0]!.entity },
      { id: 'm2', entity: mirrors[1]!.entity },
    ]);
    expect(run(`return ids(spatial.neighbours_rect(90, -10, 120, 10, { type = "orc", exclude = "m1" }))`)).toEqual(['m3']);
    expect(run(`return #spatial.neighbours_rect(90, -10, 120, 10, { max_results = 1 })`)).toBe(1);
  });

  it('are empty when the zone mirrors nothing (border_band 0)', () => {
    const run = vmWith(zoneOf([]));
    expect(run(`return { spatial.neighbours_radius(0, 0, 1e9), spatial.neighbours_rect(-1e9, -1e9, 1e9, 1e9) }`)).toEqual([[], []]);
  });
});

describe('wrong arguments answer an error envelope, never raise', () => {
  it.each([
    ['spatial.query_radius(world, "0", 0, 5)', 'game.spatial.query_radius(entities, x, y, r[, opts]): x must be a number'],
    ['spatial.query_radius(world, 0, nil, 5)', 'game.spatial.query_radius(entities, x, y, r[, opts]): y must be a number'],
    ['spatial.query_radius(world, 0, 0)', 'game.spatial.query_radius(entities, x, y, r[, opts]): r must be a number'],
    ['spatial.query_radius(0, 0, "r")', 'game.spatial.query_radius(x, y, r): r must be a number'],
    ['spatial.query_radius("world", 0, 0, 5)', 'game.spatial.query_radius: argument 1 must be an entity table (query_radius(entities, x, y, r[, opts])) or x (query_radius(x, y, r))'],
    ['spatial.query_radius()', 'game.spatial.query_radius: argument 1 must be an entity table (query_radius(entities, x, y, r[, opts])) or x (query_radius(x, y, r))'],
    ['spatial.query_radius(world, 0, 0, 5, "orc")', 'game.spatial.query_radius(entities, x, y, r[, opts]): opts must be a table'],
    ['spatial.query_radius(world, 0, 0, 5, { type = 3 })', 'game.spatial.query_radius(entities, x, y, r[, opts]): opts.type must be a string or an array of strings'],
    ['spatial.query_radius(world, 0, 0, 5, { type = { "orc", 3 } })', 'game.spatial.query_radius(entities, x, y, r[, opts]): opts.type must be a string or an array of strings'],
    ['spatial.query_radius(world, 0, 0, 5, { exclude = true })', 'game.spatial.query_radius(entities, x, y, r[, opts]): opts.exclude must be an id or an array of ids'],
    ['spatial.query_radius(world, 0, 0, 5, { max_results = 1.5 })', 'game.spatial.query_radius(entities, x, y, r[, opts]): opts.max_results must be a non-negative integer'],
    ['spatial.query_radius(world, 0, 0, 5, { max_results = -1 })', 'game.spatial.query_radius(entities, x, y, r[, opts]): opts.max_results must be a non-negative integer'],
    ['spatial.query_radius(world, 0, 0, 5, { max_results = "2" })', 'game.spatial.query_radius(entities, x, y, r[, opts]): opts.max_results must be a non-negative integer'],
    ['spatial.query_radius(world, 0, 0, 5, { sort = "closest" })', 'game.spatial.query_radius(entities, x, y, r[, opts]): opts.sort must be "nearest" or "farthest"'],
    ['spatial.query_rect(0, 0, 1)', 'game.spatial.query_rect(x1, y1, x2, y2): y2 must be a number'],
    ['spatial.nearest(nil, 0, 0, 1)', 'game.spatial.nearest(entities, x, y, n[, opts]): entities must be a table'],
    ['spatial.nearest(world, 0, 0)', 'game.spatial.nearest(entities, x, y, n[, opts]): n must be a number'],
    ['spatial.nearest(world, 0, 0, 1, { sort = 1 })', 'game.spatial.nearest(entities, x, y, n[, opts]): opts.sort must be "nearest" or "farthest"'],
    ['spatial.neighbours_radius(0, {}, 1)', 'game.spatial.neighbours_radius(x, y, r[, opts]): y must be a number'],
    ['spatial.neighbours_radius(0, 0, 1, 5)', 'game.spatial.neighbours_radius(x, y, r[, opts]): opts must be a table'],
    ['spatial.neighbours_rect(0, 0, 1, false)', 'game.spatial.neighbours_rect(x1, y1, x2, y2[, opts]): y2 must be a number'],
    ['spatial.in_range({ x = 0, y = 0 }, { x = 1 }, 2)', 'game.spatial.in_range(a, b, range): b.y must be a number'],
    ['spatial.in_range({ x = 0, y = 0 }, { x = 1, y = 1 })', 'game.spatial.in_range(a, b, range): range must be a number'],
    ['spatial.in_range(5, { x = 1, y = 1 }, 1)', 'game.spatial.in_range(a, b, range): a must be a table with numeric x and y'],
    ['spatial.distance({ x = "0", y = 0 }, { x = 1, y = 1 })', 'game.spatial.distance(a, b): a.x must be a number'],
    ['spatial.distance({ x = 0, y = 0 })', 'game.spatial.distance(a, b): b must be a table with numeric x and y'],
  ])('%s', (call, message) => {
    const run = vmWith(zoneOf());
    expect(run(`local ok, r = pcall(function() return ${call} end) return { ok, r }`)).toEqual([true, { error: message }]);
  });

  it('zone argument errors are reported before the zone check, so a zone script sees the same messages', () => {
    const run = vmWith(null);
    expect(run(`return spatial.query_rect(0, "0", 1, 1)`)).toEqual({ error: 'game.spatial.query_rect(x1, y1, x2, y2): y1 must be a number' });
  });
});

describe('cost', () => {
  const LOOP = `own = {}
    for i = 1, 100 do own[i] = { x = i, y = i } end
    for i = 1, 300 do
      spatial.nearest(own, 0, 0, 3)
      spatial.query_radius(0, 0, 10)
    end
    return true`;

  it('with charge, every walk spends the budget (ENTITY_COST per entity), so a loop of queries ends', () => {
    // 600 walks of 100 entities: 480,000 instructions charged, against a few thousand the loop itself runs.
    expect(vmWith(zoneOf(), { budget: 200_000 })(LOOP)).toBe(true);
    expect(() => vmWith(zoneOf(), { budget: 200_000, charged: true })(LOOP)).toThrow('instructions_exhausted');
    expect(vmWith(zoneOf(), { budget: 600_000, charged: true })(LOOP)).toBe(true);
  });

  it('a query over 1000 entities costs less than the same scan written in Lua', () => {
    const run = vmWith(zoneOf());
    run(`own = {}
      for i = 1, 1000 do own["e" .. i] = { x = (i * 37) % 500, y = (i * 91) % 500, type = i % 2 == 0 and "orc" or "elf" } end
      function lua_scan(cx, cy, r)
        local out = {}
        for id, e in pairs(own) do
          local dx, dy = e.x - cx, e.y - cy
          local d = math.sqrt(dx * dx + dy * dy)
          if d <= r and e.type == "orc" then out[#out + 1] = { id = id, entity = e, distance = d } end
        end
        return out
      end`);
    const calls = {
      lua: 'lua_scan(250, 250, 60)',
      nearest: 'spatial.nearest(own, 250, 250, 10, { type = "orc" })',
      radius: 'spatial.query_radius(own, 250, 250, 60, { type = "orc", sort = "nearest" })',
      zone: 'spatial.query_radius(250, 250, 60)',
    };
    // The machine's speed and load vary, so each is timed against plain Lua
    // doing the same walk, best of several interleaved rounds.
    const best: Record<string, number> = {};
    for (let round = 0; round < 5; round++) {
      for (const [name, call] of Object.entries(calls)) {
        const started = performance.now();
        run(`for i = 1, 10 do ${call} end`);
        const perCall = (performance.now() - started) / 10;
        if (round > 0) best[name] = Math.min(best[name] ?? Infinity, perCall);
      }
    }
    expect(run(`return #spatial.query_radius(own, 250, 250, 60, { type = "orc" }) == #lua_scan(250, 250, 60)`)).toBe(true);
    for (const name of ['nearest', 'radius', 'zone']) expect(best[name], name).toBeLessThan(2 * (best.lua as number));
  });
});
