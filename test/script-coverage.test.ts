import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bindingsOf, REFERENCE_SURFACE, withCoverageTable, type VmKind } from '../runtime/lua/coverage';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer } from './support/ws-client';

/**
 * The binding registry (runtime/lua/coverage.ts) against what real VMs
 * carry and against docs/scripting.md: a binding added without a registry row,
 * a row claiming a binding no VM has, or a table there not regenerated
 * (`npm run coverage-table`) fails here.
 */

// Every function reachable in `game`, as dotted paths, logged in chunks (a log line's meta is bounded).
const DUMP = `
local function game_functions()
  local out = {}
  for k, v in pairs(game) do
    if type(v) == "function" then out[#out + 1] = "game." .. k
    elseif type(v) == "table" then
      for k2, v2 in pairs(v) do if type(v2) == "function" then out[#out + 1] = "game." .. k .. "." .. k2 end end
    end
  end
  table.sort(out)
  return out
end
local function dump(kind)
  local fns = game_functions()
  for i = 1, #fns, 10 do
    game.log("info", "coverage:" .. kind, { fns = { table.unpack(fns, i, math.min(i + 9, #fns)) } })
  end
end
`;

const game = gameDir({
  'config.lua': 'return { duel = "duel.lua", realm = "realm.lua" }',
  'duel.lua': `
match_size = 1
quick_play = true
${DUMP}
function init(config) dump("match") return {} end
function join(player_id, state) return state end
function leave(player_id, state) return state end
function handle_input(player_id, input, state) return state end
function tick(state) return state end
function get_state(player_id, state) return {} end
`,
  'realm.lua': `
game_type = "world"
match_size = 1
grid_size = 1
${DUMP}
function init(config) dump("world") return {} end
function join(player_id, state) return state end
function leave(player_id, state) return state end
function spawn_position(player_id, state) return { x = 1, y = 1 } end
function handle_input(player_id, input, entities) return entities end
function post_tick(tick, state) return state end
local dumped = false
function zone_tick(entities, zone_state)
  if not dumped then dumped = true dump("zone") end
  return entities, zone_state
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

/** The `game.*` functions a VM kind logged, once its lines are all in. */
async function loggedBindings(kind: VmKind): Promise<string[]> {
  const lines = () => s.logs.filter((l) => l.event === 'game.log' && l.message === `coverage:${kind}`);
  for (let i = 0; i < 100 && lines().length === 0; i++) await new Promise((r) => setTimeout(r, 50));
  // The lines of one dump are written in one batch; wait a beat for the last of them.
  await new Promise((r) => setTimeout(r, 200));
  return lines().flatMap((l) => (l.meta as { fns: string[] }).fns);
}

describe('the coverage registry', () => {
  it('is what docs/scripting.md shows (run `npm run coverage-table` after changing it)', () => {
    const page = readFileSync(new URL('../docs/scripting.md', import.meta.url), 'utf8');
    expect(withCoverageTable(page)).toBe(page);
  });

  it('names each entry once', () => {
    const names = REFERENCE_SURFACE.map((e) => `${e.kind}:${e.name}`);
    expect(new Set(names).size).toBe(names.length);
  });

  it('matches the game table of a match, a world and a zone VM', async () => {
    const p = await connectPlayer(s);
    expect((await p.socket.request('match.find_or_create', { mode: 'duel' })).type).toBe('match.joined');
    const created = await p.socket.request('world.create', { mode: 'realm' });
    expect(created.type).toBe('world.joined');
    for (const kind of ['match', 'world', 'zone'] as const) {
      const carried = (await loggedBindings(kind)).sort();
      expect(carried, kind).toEqual(bindingsOf(kind).sort());
    }
    p.socket.close();
  });
});
