import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, recordFrames, type Frame } from './support/ws-client';

/**
 * Spawn templates as the reference runtime's zone-spawn, world-integration
 * and hot-reload tests use them: a `{type, base_state}` template makes an
 * entity whose own fields are `base_state`'s (a zone script reads
 * `e.health`), and a template an edit adds is spawnable on the tick the edit
 * is taken.
 */

const COMMON = `
game_type = "world"
match_size = 1
max_players = 4
tick_rate = 50
grid_size = 1
zone_size = 100
broadcast_interval = 1
function init(config) return {} end
function join(player_id, state) return state end
function leave(player_id, state) return state end
function spawn_position(player_id, state) return { x = 10, y = 10 } end
function handle_input(player_id, input, entities) return entities end
`;

const SPAWNER = `${COMMON}
function spawn_templates(config)
  return {
    goblin = { type = "goblin", base_state = { health = 30, ai = "patrol", loot = { "gold", "dagger" }, solid = true } },
    rock = { type = "rock", weight = 5 },
  }
end
function zone_tick(entities, zone_state)
  zone_state = zone_state or {}
  if not zone_state.spawned then
    zone_state.spawned = true
    game.zone.spawn("goblin", 50, 50, { ai = "guard", type = "not-a-goblin" })
    game.zone.spawn("rock", 60, 60)
  end
  -- What a zone script reads of its goblins: the template's base_state as the entity's own fields.
  for id, e in pairs(entities) do
    if e.type == "goblin" and e.read == nil then
      e.read = { health = e.health, ai = e.ai, solid = e.solid, nested = type(e.base_state) }
    end
  end
  return entities, zone_state
end
`;

const RELOAD = (version: 1 | 2) => `${COMMON}
function spawn_templates(config)
  local t = { rock = { type = "rock" } }
  ${version === 2 ? 't.dragon = { type = "dragon", base_state = { health = 500 } }' : ''}
  return t
end
function zone_tick(entities, zone_state)
  zone_state = zone_state or {}
  ${
    version === 2
      ? `if not zone_state.tried then
    -- The first tick of the new code: the template it adds must already be spawnable.
    zone_state.tried = true
    if not game.zone.spawn("dragon", 50, 50) then game.zone.spawn("rock", 70, 70, { refused = "dragon" }) end
  end`
      : ''
  }
  return entities, zone_state
end
`;

let s: TestServer;
const game = gameDir({ 'config.lua': 'return { spawner = "spawner.lua", reload = "reload.lua" }', 'spawner.lua': SPAWNER, 'reload.lua': RELOAD(1) });
beforeAll(async () => {
  s = await startTestServer({}, { gameDir: game.dir });
});
afterAll(async () => {
  await s.close();
  game.remove();
});

/** Every entity's fields as the player has been told them so far (adds and updates merged). */
function entities(frames: Frame[]): Map<string, Record<string, unknown>> {
  const out = new Map<string, Record<string, unknown>>();
  for (const f of frames) {
    if (f.type !== 'world.tick') continue;
    for (const u of f.payload.updates as { op: string; id: string }[]) {
      if (u.op === 'r') out.delete(u.id);
      else out.set(u.id, { ...(out.get(u.id) ?? {}), ...u });
    }
  }
  return out;
}

async function until<T>(what: () => T | undefined, ms = 10_000): Promise<T> {
  const started = Date.now();
  for (;;) {
    const v = what();
    if (v !== undefined) return v;
    if (Date.now() - started > ms) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('spawn templates', () => {
  it("a {type, base_state} template's base_state becomes the entity's own fields; overrides apply; the template's type wins", async () => {
    const p = await connectPlayer(s);
    const frames = recordFrames(p.socket);
    expect((await p.socket.request('world.create', { mode: 'spawner' })).type).toBe('world.joined');
    const goblin = await until(() => [...entities(frames).values()].find((e) => e.type === 'goblin' && e.read !== undefined));
    expect(goblin).toMatchObject({ type: 'goblin', health: 30, ai: 'guard', loot: ['gold', 'dagger'], solid: true, x: 50, y: 50 });
    expect(goblin).not.toHaveProperty('base_state');
    expect(String(goblin.id)).toMatch(/^goblin-/);
    // Read by the zone script itself: e.health is the number, nothing nested.
    expect(goblin.read).toEqual({ health: 30, ai: 'guard', solid: true, nested: 'nil' });
    // A flat template is still its own fields.
    const rock = [...entities(frames).values()].find((e) => e.type === 'rock');
    expect(rock).toMatchObject({ type: 'rock', weight: 5, x: 60, y: 60 });
    await p.socket.request('world.leave');
    p.socket.close();
  });

  it('a template an edit adds is spawnable on the tick the edit is taken', async () => {
    const p = await connectPlayer(s);
    const frames = recordFrames(p.socket);
    expect((await p.socket.request('world.create', { mode: 'reload' })).type).toBe('world.joined');
    // The world runs the first version for a while (the player's own entity is told).
    await until(() => (entities(frames).has(p.playerId) ? true : undefined));
    await new Promise((r) => setTimeout(r, 200));
    game.write('reload.lua', RELOAD(2));
    const spawned = await until(() => [...entities(frames).values()].find((e) => e.type === 'dragon' || e.refused !== undefined), 15_000);
    expect(spawned).toMatchObject({ type: 'dragon', health: 500, x: 50, y: 50 });
    await new Promise((r) => setTimeout(r, 200));
    expect([...entities(frames).values()].filter((e) => e.refused !== undefined)).toEqual([]);
    await p.socket.request('world.leave');
    p.socket.close();
  });
});
