import { spawnSync } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import fengari from 'fengari';
import { fengariVersion, internals, internalsOff, WRITTEN_FOR } from '../runtime/lua/fengari-internals';
import type { JsonObject, ModeInfo, ZoneServices } from '../runtime/lua/host-interface';
import { diffEntities, jsString, type JsonRecord } from '../runtime/lua/marshal';
import { MatchVm } from '../runtime/lua/match';
import { ZoneVm } from '../runtime/lua/world';
import type { Logger } from '../runtime/platform/log';
import { runShapes } from './fixtures/lua-shapes';
import { vmOf } from './fixtures/games/harness';

const { lua, lauxlib, lualib, to_luastring } = fengari;

/** Run as a script (the public-API child of the world tables below), this file declares no tests: vitest is not there to take them. */
const AS_SCRIPT = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
const suite = AS_SCRIPT ? ((() => {}) as unknown as typeof describe) : describe;

/** The same shapes in a child process whose fengari internals are off (the patches are process-wide). */
function unpatchedShapes(): { patched: boolean; warnings: unknown[]; results: Record<string, unknown> } {
  const child = spawnSync(process.execPath, ['--import', 'tsx', 'test/fixtures/lua-shapes.ts'], {
    env: { ...process.env, SVC_FENGARI_UNPATCHED: '1' },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    timeout: 120_000,
  });
  if (child.status !== 0) throw new Error(`shapes child exited ${child.status ?? child.signal}: ${child.stderr}`);
  return JSON.parse(child.stdout);
}

/** Where two records first differ, briefly (views are long texts), or null when they are equal. */
function firstDifference(patched: unknown, unpatched: unknown, path: string): string | null {
  if (typeof patched === 'string' && typeof unpatched === 'string') {
    if (patched === unpatched) return null;
    let i = 0;
    while (patched[i] === unpatched[i]) i++;
    const around = (s: string) => JSON.stringify(s.slice(Math.max(0, i - 40), i + 40));
    return `${path} at character ${i}: patched ${around(patched)}, unpatched ${around(unpatched)}`;
  }
  if (typeof patched !== 'object' || patched === null || typeof unpatched !== 'object' || unpatched === null) {
    return Object.is(patched, unpatched) ? null : `${path}: patched ${JSON.stringify(patched)}, unpatched ${JSON.stringify(unpatched)}`;
  }
  const keys = new Set([...Object.keys(patched), ...Object.keys(unpatched)]);
  for (const key of keys) {
    const found = firstDifference((patched as Record<string, unknown>)[key], (unpatched as Record<string, unknown>)[key], `${path}.${key}`);
    if (found) return found;
  }
  return null;
}

suite('fengari internals against the public API (differential)', () => {
  it('this process runs the internals: fengari is pinned to the release they were written for', () => {
    // Moving the pin means reading fengari's changes against fengari-internals.ts, then moving WRITTEN_FOR.
    const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
    expect(pkg.dependencies.fengari).toBe(WRITTEN_FOR);
    expect(fengariVersion).toBe(WRITTEN_FOR);
    expect(internalsOff).toBeNull();
    expect(internals).not.toBeNull();
  });

  it('every call and return shape gives the same results on both paths', { timeout: 180_000 }, () => {
    const patched = runShapes();
    const unpatched = unpatchedShapes();
    expect(patched.patched).toBe(true);
    expect(unpatched.patched).toBe(false);
    // The unpatched node says so, once; the patched one says nothing.
    expect(patched.warnings).toEqual([]);
    expect(unpatched.warnings).toEqual([
      ['warn', 'fengari_internals_off', { reason: 'forced off by SVC_FENGARI_UNPATCHED=1', consequence: expect.stringContaining('public API') }],
    ]);
    expect(Object.keys(unpatched.results)).toEqual(Object.keys(patched.results));
    expect(firstDifference(patched.results, unpatched.results, 'results')).toBeNull();
  });
});

// ---- world tables: the entity diff and the write log ---------------------------
//
// The child process runs this very file as a script (AS_SCRIPT), so that both
// sides drive the same code: fengari's patches are process-wide, and a fixture
// module beside this file would be one more place for the two to drift apart.

/** A diff sink's report, as the engine would turn it into records: one entry per entity, fields as sent. */
type DiffEvent = ['a' | 'u' | 'r', string, JsonRecord | null];

/**
 * Entity tables in a sequence of states, each step a change of one kind
 * (comments name them); the diff after each step, and the mirror it leaves,
 * are what the two implementations must agree on.
 */
const DIFF_STEPS: string[] = [
  // New entities; a non-table entry is no entity.
  'E.a = { x = 1, y = 2.5, name = "alpha", alive = true, inv = { 1, 2, 3 }, meta = { k = "v" }, empty = {} } E.b = { x = 0 } E.junk = 5',
  // A number changed, one rewritten unchanged, an integer rewritten as the same float, a field added.
  'E.a.x = 2 E.a.y = 2.5 E.b.x = 0.0 E.b.z = 1',
  // Integer to float, a string changed, a boolean flipped.
  'E.a.x = 2.5 E.a.name = "beta" E.a.alive = false',
  // A field removed, a nested table changed in place, nested tables rebuilt unchanged (one empty).
  'E.a.name = nil E.a.inv[2] = 20 E.a.meta = { k = "v" } E.a.empty = {}',
  // Values JSON cannot hold are absent.
  'E.a.nan = 0/0 E.a.inf = math.huge E.a.ninf = -math.huge E.b.z = 0/0',
  // A present field turning NaN is removed; an entity removed; a non-table entry becoming an entity.
  'E.a.x = 0/0 E.b = nil E.junk = { x = 1 }',
  // A nested field removed, a nested value changed, an entity added.
  'E.c = { x = 3 } E.a.inv = nil E.a.meta.k = "w"',
  // An entity turning into a string is removed; a field back from NaN; -0.0, a float beyond 32 bits, the largest i32, UTF-8.
  'E.c = "three" E.a.x = 1 E.a.neg = -0.0 E.a.big = 2^40 E.a.i32 = 2147483647 E.a.s = "é 漢 😀"',
  // Number and boolean field keys.
  'E.a[1] = "one" E.a[2.5] = "two and a half" E.a[true] = "yes"',
  // Number and boolean entity keys beside string ones.
  'E[7] = { x = 7 } E["8"] = { x = 8 } E[true] = { x = 9 } E[7.5] = { x = 10 }',
  'E[7].x = 70 E[7.5] = nil E[true].y = 1',
  // Every entity removed.
  'for k in pairs(E) do E[k] = nil end',
  // Entity keys 1..n: the table is a sequence; then it loses its first entity.
  'E[1] = { x = 1 } E[2] = { x = 2, tags = { "t" } }',
  'E[1] = nil E[2].tags[2] = "u"',
];

type DiffStep = { events: DiffEvent[]; mirror: [string, JsonRecord][] };

/** Runs each chunk on a fresh state's global E (an empty table to start with), diffing E after each. */
function diffSequence(steps: string[]): DiffStep[] {
  const L = lauxlib.luaL_newstate();
  lualib.luaL_openlibs(L);
  const mirror = new Map<string, JsonRecord>();
  const out: DiffStep[] = [];
  // The sink's records belong to the mirror and change with the next diff: each is copied as it comes.
  const copy = (r: JsonRecord): JsonRecord => JSON.parse(JSON.stringify(r));
  const run = (chunk: string) => {
    if (lauxlib.luaL_dostring(L, to_luastring(chunk)) !== lua.LUA_OK) throw new Error(jsString(lua.lua_tostring(L, -1)));
    lua.lua_settop(L, 0);
  };
  run('E = {}');
  for (const chunk of steps) {
    run(chunk);
    lua.lua_getglobal(L, to_luastring('E'));
    const events: DiffEvent[] = [];
    diffEntities(L, -1, mirror, {
      added: (id, fields) => void events.push(['a', id, copy(fields)]),
      updated: (id, changed) => void events.push(['u', id, copy(changed)]),
      removed: (id) => void events.push(['r', id, null]),
    });
    lua.lua_settop(L, 0);
    // Records of different entities are independent, so only which records a diff makes counts, not their order.
    events.sort(([, a], [, b]) => (a < b ? -1 : a > b ? 1 : 0));
    out.push({ events, mirror: [...mirror].map(([id, fields]) => [id, copy(fields)] as [string, JsonRecord]).sort(([a], [b]) => (a < b ? -1 : 1)) });
  }
  return out;
}

/**
 * Entity tables the two implementations read differently (each a known
 * defect, below): what each step's diff and mirror are on either side.
 */
const DIFF_EDGES: Record<string, string[]> = {
  'an empty entity': ['E.e = {}', 'E.e.x = 1', 'E.e.x = nil'],
  'an entity whose fields are a sequence': ['E.arr = { 10, 20 }', 'E.arr.x = 1', 'E.arr.x = nil'],
  'a field that refers to its own entity': ['E.a = { x = 1 } E.b = { x = 2 }', 'E.a.self = E.a', 'E.b.x = 3', 'E.a.self = nil'],
  'a number key and a string key naming the same id': ['E[1] = { x = 1 } E["1"] = { x = 2 }', 'E.z = { x = 3 }'],
};

/**
 * A zone whose refused inputs write in every way a script can: nested tables
 * changed, keys added and removed, entities removed, replaced and added, the
 * whole table emptied, globals set. `report` inputs describe what the next
 * call finds: the entities as Lua sees them (key and number types
 * included), the globals, and what references kept in globals before the
 * refusals now see. A `typed` zone also holds what JSON text does not keep:
 * a number key and a float of integral value.
 */
const ZONE = `
refusals = 0
function zone_tick(entities, zs)
  if not HELD then
    local p = entities.p
    if zs.typed then
      p.ratio = 2.0
      p[1] = "first"
      entities[5] = { x = 5 }
    end
    CONFIG = { level = 1 }
    p.cfg = CONFIG
    HELD = { entities = entities, p = p, bag = p.bag, items = p.bag.items, list = p.list }
  end
  return entities, zs
end

local function keyText(k) return type(k) .. ":" .. tostring(k) end
local function valueText(v)
  if type(v) == "number" then return math.type(v) .. ":" .. tostring(v) end
  if type(v) ~= "table" then return type(v) .. ":" .. tostring(v) end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return keyText(a) < keyText(b) end)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = keyText(k) .. "=" .. valueText(v[k]) end
  return "{" .. table.concat(parts, ",") .. "}"
end

function handle_input(player_id, input, entities)
  if input.report then
    local ids = {}
    for id in pairs(entities) do ids[#ids + 1] = keyText(id) end
    table.sort(ids)
    game.broadcast("report", {
      state = {
        entities = valueText(entities),
        visited = ids,
        refusals = refusals,
        global_table = G and G.n or false,
        held_extra = HELD.extra or false,
      },
      identity = {
        same_entities = rawequal(HELD.entities, entities),
        same_p = rawequal(HELD.p, entities.p),
        held_p = valueText(HELD.p),
        held_items = valueText(HELD.items),
        held_list = valueText(HELD.list),
        config_level = CONFIG.level,
      },
    })
    return entities
  end
  if input.accept then
    entities.p.hp = entities.p.hp + 1
    return entities
  end
  local p = entities.p
  p.bag.gold = 0
  p.bag.items[1] = "stolen"
  table.insert(p.bag.items, "extra")
  table.remove(p.list, 1)
  p.new_key = "new"
  p.hp = nil
  p.speed = 9.5
  p.ratio = 3
  p[1] = nil
  p.cfg.level = 2
  rawset(p, "raw", true)
  entities.q = nil
  entities.r = { x = 0, replaced = true }
  entities.s = { x = 9 }
  if entities[5] then entities[5].x = 50 end
  refusals = refusals + 1
  G = { n = refusals }
  HELD.extra = true
  if input.empty then
    for id in pairs(entities) do entities[id] = nil end
  end
  if input.refuse == "error" then error("refused after writing") end
  if input.refuse == "nothing" then return end
  if input.refuse == "nil" then return nil end
  return "not a table"
end
`;

const ZONE_ENTITIES = {
  p: { x: 1, y: 2, hp: 10, speed: 1.5, bag: { gold: 5, items: ['a', 'b'] }, list: [1, 2, 3] },
  q: { x: 3 },
  r: { x: 4, kind: 'old' },
};

function zoneServices(broadcasts: [string, JsonObject][]): ZoneServices {
  const quiet = (): Logger => ({ debug() {}, info() {}, warn() {}, error() {}, child: quiet });
  return {
    log: quiet(),
    limits: { take: () => ({ ok: true, retryAfterMs: 0 }), check: () => ({ ok: true, retryAfterMs: 0 }) },
    clock: { now: () => 1_700_000_000_000 },
    ids: { uuid: () => 'id' },
    send() {},
    broadcast: (leaf, payload) => void broadcasts.push([leaf, payload]),
    terrain: null,
    spawn: () => false,
    despawn() {},
    apply: () => false,
    spatial: { pushOwnEntities: (L) => lua.lua_pushnil(L), mirrors: () => [] },
  };
}

interface ZoneReport {
  state: JsonObject;
  identity: JsonObject;
}

/** The zone's entities after each refusal (and an accepted input), as the next callback and the engine see them. */
function refusedInputs(typed: boolean): { reports: ZoneReport[]; texts: string[] } {
  const broadcasts: [string, JsonObject][] = [];
  const mode = { name: 'zone', kind: 'world', file: 'zone.lua', match_size: 1, max_players: 1, min_players: 1, strategy: 'fill', listed: false, quick_play: false, state_strategy: 'per_player', veto_tokens: 0, operator: {}, world: null } as unknown as ModeInfo;
  const files: Record<string, string> = { 'zone.lua': ZONE };
  const vm = ZoneVm.create({
    source: { read: (p) => files[p] ?? null, revision: () => 0 },
    mode,
    worldId: 'w-1',
    zone: [0, 0],
    services: zoneServices(broadcasts),
    // Generous clocks: the public-API path is slower, and a deadline must not make the two differ by speed alone.
    budgets: { heavyMs: 20_000, lightMs: 20_000, loadMs: 20_000 },
    entities: ZONE_ENTITIES,
    zoneState: { typed },
  });
  const texts: string[] = [];
  const step = (...inputs: JsonObject[]) => {
    vm.tick(
      inputs.map((input) => ({ playerId: 'p', input, seq: null })),
      [],
    );
    texts.push(vm.entitiesText());
  };
  step({ report: true });
  step({ refuse: 'error' }, { report: true });
  step({ refuse: 'nothing' }, { report: true });
  step({ refuse: 'nil', empty: true }, { report: true });
  step({ refuse: 'number' }, { report: true });
  step({ accept: true }, { report: true });
  vm.close();
  return { reports: broadcasts.filter(([leaf]) => leaf === 'report').map(([, p]) => p as unknown as ZoneReport), texts };
}

interface WorldTables {
  patched: boolean;
  diffs: DiffStep[];
  edges: Record<string, DiffStep[]>;
  refused: ReturnType<typeof refusedInputs>;
  refusedTyped: ReturnType<typeof refusedInputs>;
}

function worldTables(): WorldTables {
  return JSON.parse(JSON.stringify({ patched: internals !== null, diffs: diffSequence(DIFF_STEPS), edges: Object.fromEntries(Object.entries(DIFF_EDGES).map(([name, steps]) => [name, diffSequence(steps)])), refused: refusedInputs(false), refusedTyped: refusedInputs(true) }));
}

/** The same world tables in a child whose fengari internals are off. */
function unpatchedWorldTables(): WorldTables {
  const child = spawnSync(process.execPath, ['--import', 'tsx', 'test/lua-internals.test.ts'], {
    env: { ...process.env, SVC_FENGARI_UNPATCHED: '1' },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    timeout: 120_000,
  });
  if (child.status !== 0) throw new Error(`world tables child exited ${child.status ?? child.signal}: ${child.stderr}`);
  return JSON.parse(child.stdout);
}

suite('world tables under the internals and the public API (differential)', () => {
  let patched: WorldTables;
  let unpatched: WorldTables;
  beforeAll(() => {
    patched = worldTables();
    unpatched = unpatchedWorldTables();
  }, 120_000);

  it('both sides ran: this process on the internals, the child on the public API', () => {
    expect(patched.patched).toBe(true);
    expect(unpatched.patched).toBe(false);
  });

  it('diffEntities makes the same adds, updates and removals, and leaves the same mirror, step by step', () => {
    expect(unpatched.diffs).toHaveLength(patched.diffs.length);
    for (let i = 0; i < patched.diffs.length; i++) {
      expect(unpatched.diffs[i], `step ${i + 1}`).toEqual(patched.diffs[i]);
    }
  });

  it('diffEntities reads each kind of change as a client must see it', () => {
    const events = patched.diffs.map((d) => d.events);
    expect(events[0]).toEqual([
      ['a', 'a', { x: 1, y: 2.5, name: 'alpha', alive: true, inv: [1, 2, 3], meta: { k: 'v' }, empty: [] }],
      ['a', 'b', { x: 0 }],
    ]);
    // 0.0 over 0 is no change: the wire does not tell integers from floats of the same value.
    expect(events[1]).toEqual([
      ['u', 'a', { x: 2 }],
      ['u', 'b', { z: 1 }],
    ]);
    expect(events[2]).toEqual([['u', 'a', { x: 2.5, name: 'beta', alive: false }]]);
    expect(events[3]).toEqual([['u', 'a', { name: null, inv: [1, 20, 3] }]]);
    expect(events[4]).toEqual([['u', 'b', { z: null }]]);
    expect(events[5]).toEqual([
      ['u', 'a', { x: null }],
      ['r', 'b', null],
      ['a', 'junk', { x: 1 }],
    ]);
    expect(events[6]).toEqual([
      ['u', 'a', { inv: null, meta: { k: 'w' } }],
      ['a', 'c', { x: 3 }],
    ]);
    expect(events[7]).toEqual([
      ['u', 'a', { x: 1, neg: 0, big: 2 ** 40, i32: 2147483647, s: 'é 漢 😀' }],
      ['r', 'c', null],
    ]);
    expect(events[8]).toEqual([['u', 'a', { '1': 'one', '2.5': 'two and a half', true: 'yes' }]]);
    expect(events[9]).toEqual([
      ['a', '7', { x: 7 }],
      ['a', '7.5', { x: 10 }],
      ['a', '8', { x: 8 }],
      ['a', 'true', { x: 9 }],
    ]);
    expect(events[10]).toEqual([
      ['u', '7', { x: 70 }],
      ['r', '7.5', null],
      ['u', 'true', { y: 1 }],
    ]);
    expect(events[11]!.map(([op, id]) => [op, id])).toEqual([
      ['r', '7'],
      ['r', '8'],
      ['r', 'a'],
      ['r', 'junk'],
      ['r', 'true'],
    ]);
    expect(events[12]).toEqual([
      ['a', '1', { x: 1 }],
      ['a', '2', { x: 2, tags: ['t'] }],
    ]);
    expect(events[13]).toEqual([
      ['r', '1', null],
      ['u', '2', { tags: ['t', 'u'] }],
    ]);
    expect(patched.diffs.at(-1)!.mirror).toEqual([['2', { x: 2, tags: ['t', 'u'] }]]);
  });

  // Known defects, kept failing on purpose until the two sides agree. The public API reads the
  // entities through their JSON text, where an empty table or a sequence nested in a value is an
  // array, so an empty entity and one whose fields are 1..n are no entity there (and an entity
  // whose last other field goes is removed rather than updated); a cycle anywhere makes the whole
  // text fail, so every entity of the zone is removed, and added again once the cycle goes (the
  // internals leave the cyclic field out and diff the rest); and of two keys naming one id the
  // JSON text keeps the last, the internals the first.
  for (const name of Object.keys(DIFF_EDGES)) {
    it.fails(`diffEntities reads ${name} alike on both sides`, () => {
      expect(unpatched.edges[name]).toEqual(patched.edges[name]);
    });
  }

  it('a refused handle_input leaves the entities as they were, in place; its globals stay', () => {
    const { reports, texts } = patched.refusedTyped;
    const [before, ...refusals] = reports;
    const accepted = refusals.pop()!;
    expect(refusals).toHaveLength(4);
    refusals.forEach((r, i) => {
      // Every refusal kind (error, nothing, nil, a non-table), one of them after emptying the table.
      expect(r.state.entities, `refusal ${i + 1}`).toBe(before!.state.entities);
      expect(r.state.visited, `refusal ${i + 1}`).toEqual(['number:5', 'string:p', 'string:q', 'string:r']);
      expect(r.state).toMatchObject({ refusals: i + 1, global_table: i + 1, held_extra: true });
      // References taken before the refusals are the live tables, put back: they see the old values.
      expect(r.identity, `refusal ${i + 1}`).toEqual(before!.identity);
    });
    expect(before!.identity).toMatchObject({ same_entities: true, same_p: true, config_level: 1 });
    expect(before!.identity.held_items).toBe('{number:1=string:a,number:2=string:b}');
    expect(before!.identity.held_list).toBe('{number:1=integer:1,number:2=integer:2,number:3=integer:3}');
    expect(before!.state.entities).toContain('string:ratio=float:2.0');
    expect(before!.state.entities).toContain('number:1=string:first');
    // What the engine reads (the JSON text of snapshots) is the same too; an undo may change the table's order, which JSON objects do not carry.
    const parsed = texts.map((t) => JSON.parse(t));
    for (let i = 1; i < 5; i++) expect(parsed[i], `refusal ${i}`).toEqual(parsed[0]);
    // The table still takes writes after the undo, and a reference held from before sees them.
    expect(accepted.identity.held_p).toContain('string:hp=integer:11');
    expect(accepted.identity.same_entities).toBe(true);
  });

  it('on the public API a refusal leaves the same entities, as the engine and the next callback see them, and the same globals', () => {
    expect(unpatched.refused.texts.map((t) => JSON.parse(t))).toEqual(patched.refused.texts.map((t) => JSON.parse(t)));
    expect(unpatched.refused.reports.map((r) => r.state)).toEqual(patched.refused.reports.map((r) => r.state));
    expect(patched.refused.reports.map((r) => r.state.refusals)).toEqual([0, 1, 2, 3, 4, 4]);
  });

  // A known defect, kept failing on purpose until the public-API undo keeps Lua's types: the JSON
  // copy it restores from turns number keys into strings (entities[5] becomes entities["5"], and
  // the script's own entities[5] then finds nothing) and 2.0 into 2. The internals put the table back exactly.
  it.fails('on the public API a refusal keeps number keys and floats of integral value', () => {
    expect(unpatched.refusedTyped.reports.map((r) => r.state)).toEqual(patched.refusedTyped.reports.map((r) => r.state));
  });
});

/** Stack slots of a VM's thread above its top that still hold a value: a finished call's leftovers. */
function heldAboveTop(L: { top: number; stack: ({ value: unknown } | undefined)[] }): number[] {
  const held: number[] = [];
  for (let i = L.top; i < L.stack.length; i++) if (L.stack[i] !== undefined && L.stack[i]!.value !== null) held.push(i);
  return held;
}

suite('a VM between calls', () => {
  // Between two ticks a VM sleeps while its lane runs the others: whatever its stack still held
  // outlived the young generation's collections and was promoted as if live (worker GC time 2x).
  it('holds nothing of a finished call above its stack top, and its closures and coroutines still see their values', () => {
    const { vm } = vmOf(`
      local function deep(n, acc) if n == 0 then return acc end return deep(n - 1, { acc, n, tostring(n) }) end
      function init() return { ticks = 0 } end
      function join(id, state) return state end
      function leave(id, state) return state end
      function handle_input(id, input, state)
        if input.fail then error("refused") end
        state.last = { id = id, big = deep(30, {}) }
        return state
      end
      function tick(state)
        state.ticks = state.ticks + 1
        local kept = { made_at = state.ticks }
        state.reader = state.reader or function() return kept.made_at end
        state.co = state.co or coroutine.wrap(function() local seen = 0 while true do seen = seen + 1 coroutine.yield(seen) end end)
        state.resumed = state.co()
        deep(40, { string.rep("x", 100) })
        return state
      end
      function get_state(id, state) return { you = id, ticks = state.ticks, first = state.reader(), resumed = state.resumed, pad = deep(20, {}) and "ok" } end`);
    expect(vm.init().ok).toBe(true);
    vm.join('a');
    const L = (vm as unknown as { sandbox: { L: { top: number; stack: ({ value: unknown } | undefined)[] } } }).sandbox.L;
    for (let round = 1; round <= 3; round++) {
      vm.input('a', { dx: 1 });
      vm.input('a', { fail: true });
      expect(vm.tick().tick).toEqual({ ok: true });
      expect(heldAboveTop(L), `after tick ${round}`).toEqual([]);
      expect(JSON.parse(vm.viewJson('a'))).toEqual({ you: 'a', ticks: round, first: 1, resumed: round, pad: 'ok' });
      expect(heldAboveTop(L), `after the view of tick ${round}`).toEqual([]);
    }
  });
});

suite('table writes', () => {
  // The internals add new string and integer keys themselves (without ltable.js's Map.clear per key).
  it('keep insertion order, traversals that delete as they go, and re-added keys as Lua has them', () => {
    const { vm } = vmOf(`
      function init()
        local t = {}
        for i = 1, 10 do t["k" .. i] = i; t[i] = -i end
        local seen = 0
        for k in pairs(t) do t[k] = nil; seen = seen + 1 end
        assert(seen == 20 and next(t) == nil, "cleared while traversed")
        t.b = 1; t[2] = 2; t.a = 3; t[1] = 4; t.b = 5; t[2.0] = 6
        local order = {}
        for k, v in pairs(t) do order[#order + 1] = tostring(k) .. "=" .. tostring(v) end
        assert(table.concat(order, ",") == "b=5,2=6,a=3,1=4", table.concat(order, ","))
        assert(#t == 2 and math.type(next(t, "a")) == "integer")
        local list = {}
        for i = 1, 5 do table.insert(list, i * 10) end
        table.remove(list, 2)
        list[#list + 1] = 99
        return { order = order, list = list }
      end
      function join(id, state) return state end
      function leave(id, state) return state end
      function handle_input(id, input, state) return state end
      function tick(state) return state end
      function get_state(id, state) return state end`);
    expect(vm.init()).toEqual({ ok: true });
    vm.join('p');
    expect(JSON.parse(vm.viewJson('p'))).toEqual({ order: ['b=5', '2=6', 'a=3', '1=4'], list: [10, 30, 40, 50, 99] });
  });
});

type ClosureValue = { value: { p: object; upvals: object[] } };
/** The Lua function in global `name` of a VM, as fengari holds it. */
function closureOf(vm: unknown, name: string): ClosureValue['value'] {
  const L = (vm as { sandbox: { L: { top: number; stack: ClosureValue[] } } }).sandbox.L;
  lua.lua_getglobal(L, to_luastring(name));
  const closure = L.stack[L.top - 1]!.value;
  lua.lua_pop(L, 1);
  return closure;
}

suite('VMs that run the same files', () => {
  const SCRIPT = `
    local counter = require("lib.counter")
    local ticks = 0
    function init() return { n = 0 } end
    function join(id, state) return state end
    function leave(id, state) return state end
    function handle_input(id, input, state) return state end
    function tick(state)
      ticks = ticks + 1
      made = function(x) return x + 1 end
      state.n = counter.bump() + made(0) * 0
      return state
    end
    function get_state(id, state) return { n = state.n, ticks = ticks, version = 1 } end`;
  const COUNTER = 'local M = { n = 0 } function M.bump() M.n = M.n + 1 return M.n end return M';

  // Decision 0074: one compiled copy of a file per thread, each VM with closures and upvalues of its own.
  it('share the compiled code and nothing a script can see: upvalues, module tables and the functions a call makes stay per VM', () => {
    const files = { 'lib/counter.lua': COUNTER };
    const a = vmOf(SCRIPT, { files }).vm;
    const b = vmOf(SCRIPT, { files }).vm;
    for (const vm of [a, b]) {
      expect(vm.init().ok).toBe(true);
      vm.join('p');
    }
    for (let i = 0; i < 3; i++) a.tick();
    b.tick();
    expect(JSON.parse(a.viewJson('p'))).toEqual({ n: 3, ticks: 3, version: 1 });
    expect(JSON.parse(b.viewJson('p'))).toEqual({ n: 1, ticks: 1, version: 1 });

    const [tickA, tickB] = [closureOf(a, 'tick'), closureOf(b, 'tick')];
    const [madeA, madeB] = [closureOf(a, 'made'), closureOf(b, 'made')];
    expect(tickA).not.toBe(tickB);
    expect(tickA.upvals[0]).not.toBe(tickB.upvals[0]);
    // A function without upvalues made by a call: fengari's closure cache would hand B the one A made.
    expect(madeA).not.toBe(madeB);
    if (internals) {
      expect(tickA.p).toBe(tickB.p);
      expect(madeA.p).toBe(madeB.p);
    }
  });

  it('a VM made after its file changed runs the new text; one made before runs the old until it reloads', () => {
    const first = vmOf(SCRIPT, { files: { 'lib/counter.lua': COUNTER } });
    const old = first.vm;
    expect(old.init().ok).toBe(true);
    old.join('p');
    const edited = SCRIPT.replace('version = 1', 'version = 2');
    const fresh = vmOf(edited, { files: { 'lib/counter.lua': COUNTER } }).vm;
    expect(fresh.init().ok).toBe(true);
    fresh.join('p');
    old.tick();
    fresh.tick();
    expect(JSON.parse(old.viewJson('p')).version).toBe(1);
    expect(JSON.parse(fresh.viewJson('p')).version).toBe(2);
    first.source.set('match.lua', edited);
    old.tick();
    expect(JSON.parse(old.viewJson('p')).version).toBe(2);
  });

  it('keeps a bounded number of compiled files: the least recently loaded is compiled again', () => {
    const { loadChunk } = internals!;
    const L = lauxlib.luaL_newstate();
    const protoOf = (text: string): object => {
      expect(loadChunk(L, text, '=bound')).toBe(lua.LUA_OK);
      const p = (L as { stack: ClosureValue[]; top: number }).stack[(L as { top: number }).top - 1]!.value.p;
      lua.lua_pop(L, 1);
      return p;
    };
    const first = protoOf('return 0');
    const recent = protoOf('return 1');
    expect(protoOf('return 0')).toBe(first);
    for (let i = 2; i < 300; i++) protoOf(`return ${i}`);
    expect(protoOf('return 299')).toBe(protoOf('return 299'));
    expect(protoOf('return 1')).not.toBe(recent);
    expect(protoOf('return 0')).not.toBe(first);
  });

  it('a file that does not compile is reported every time, never kept', () => {
    for (let i = 0; i < 2; i++) expect(() => vmOf('function tick(state) return state')).toThrow(/match\.lua.*expected/);
  });
});

if (AS_SCRIPT) process.stdout.write(JSON.stringify(worldTables()));

suite('reading ahead a batch of VMs (decision 0076)', () => {
  // Every kind of state a batch may hold: nested tables, a cycle, an empty table, more entries than
  // the read-ahead's bound, metatables whose metamethods count the reads and writes that reach them,
  // callbacks that are Lua functions with upvalues and one that is a host function.
  const SCRIPT = `
    local touched = 0
    local watch = { __index = function(t, k) touched = touched + 1 end, __newindex = function(t, k, v) touched = touched + 1; rawset(t, k, v) end }
    function init(config)
      local state = { n = 0, players = {}, nested = { deep = { deeper = { x = 1 } } }, empty = {}, big = {} }
      state.self = state
      for i = 1, 200 do state.big[i] = { i = i } end
      state.players.a = setmetatable({ x = 1, y = 2 }, watch)
      return setmetatable(state, watch)
    end
    function join(id, state) return state end
    function leave(id, state) return state end
    function handle_input(id, input, state) return state end
    vote_requested = print
    function tick(state)
      rawset(state, "n", rawget(state, "n") + 1)
      return state
    end
    function get_state(id, state) return { n = rawget(state, "n"), touched = touched, big = #rawget(state, "big") } end`;

  function batch(count: number) {
    const vms = Array.from({ length: count }, () => vmOf(SCRIPT).vm);
    for (const vm of vms) {
      expect(vm.init()).toEqual({ ok: true });
      vm.join('p');
    }
    return vms;
  }

  it('changes nothing a script or a view can see, and runs no metamethod', () => {
    const read = batch(3);
    const plain = batch(3);
    for (let t = 0; t < 5; t++) {
      MatchVm.readAhead(read);
      for (const vm of [...read, ...plain]) expect(vm.tick().tick).toEqual({ ok: true });
      const views = [...read, ...plain].map((vm) => JSON.parse(vm.viewJson('p')));
      for (const view of views) expect(view).toEqual({ n: t + 1, touched: 0, big: 200 });
    }
  });

  it('takes a batch with a closed VM, a VM that has no state yet and an empty batch', () => {
    const [open, closed] = batch(2);
    closed!.close();
    const fresh = vmOf(SCRIPT).vm;
    MatchVm.readAhead([]);
    MatchVm.readAhead([open!, closed!, fresh]);
    expect(open!.tick().tick).toEqual({ ok: true });
    expect(JSON.parse(open!.viewJson('p'))).toEqual({ n: 1, touched: 0, big: 200 });
    expect(fresh.init()).toEqual({ ok: true });
  });
});

suite('VMs that share their library keys (decision 0077)', () => {
  const SCRIPT = `
    function init() return { n = 0 } end
    function join(id, state) return state end
    function leave(id, state) return state end
    function handle_input(id, input, state) return state end
    function tick(state)
      -- Each VM changes the shared-key tables its own way.
      if state.n == 0 and marker == "a" then math.pi = 3; string.upper = nil; rawset(table, "extra", 1) end
      state.n = state.n + 1
      return state
    end
    function get_state(id, state)
      local keys = 0
      for k in pairs(math) do keys = keys + 1 end
      return { pi = math.pi, upper = string.upper ~= nil, extra = table.extra, floor = math.floor(2.5), keys = keys, fmt = string.format("%d-%s", 7, "x") }
    end`;

  it('finds every library function, keeps each VM its own tables, and shares one string object per key between VMs', () => {
    const a = vmOf(`marker = "a"\n${SCRIPT}`).vm;
    const b = vmOf(`marker = "b"\n${SCRIPT}`).vm;
    for (const vm of [a, b]) {
      expect(vm.init().ok).toBe(true);
      vm.join('p');
      vm.tick();
    }
    const before = JSON.parse(b.viewJson('p'));
    expect(JSON.parse(a.viewJson('p'))).toEqual({ pi: 3, upper: false, extra: 1, floor: 2, keys: before.keys, fmt: '7-x' });
    expect(before).toEqual({ pi: Math.PI, upper: true, floor: 2, keys: before.keys, fmt: '7-x' });
    if (internals) {
      const keyOf = (vm: unknown, lib: string, name: string) => {
        const L = (vm as { sandbox: { L: { stack: { value: { strong: Map<unknown, { key: { value: unknown } }> } }[]; top: number } } }).sandbox.L;
        lua.lua_getglobal(L, to_luastring(lib));
        const table = L.stack[L.top - 1]!.value;
        lua.lua_pop(L, 1);
        for (const entry of table.strong.values()) if (jsString((entry.key.value as { realstring: Uint8Array }).realstring) === name) return entry.key.value;
        return undefined;
      };
      expect(keyOf(a, 'math', 'floor')).toBeDefined();
      expect(keyOf(a, 'math', 'floor')).toBe(keyOf(b, 'math', 'floor'));
      expect(keyOf(a, 'string', 'format')).toBe(keyOf(b, 'string', 'format'));
    }
  });
});
