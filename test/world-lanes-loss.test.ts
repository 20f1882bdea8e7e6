import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer } from './support/ws-client';

/**
 * A world spread over two lanes (decision 0067) loses one of them: a zone
 * on the far stripe hoards memory until its worker passes the ceiling and
 * ends. The world cannot go on without that stripe's zones, so it ends
 * worker_lost for its players, as a world whose home lane died does, and the
 * node starts and runs worlds again on the replacement.
 */
const HOARDER = `
game_type = "world"
match_size = 1
max_players = 4
tick_rate = 50
grid_size = 4
zone_size = 100
view_radius = 1
lazy_zones = false
HOARD = HOARD or {}
BIG = BIG or string.rep("x", 1000000)
function init(config) return {} end
function join(player_id, state, ctx) return state end
function leave(player_id, state) return state end
function spawn_position(player_id, state) return { x = 350, y = 50 } end
function post_tick(tick, state) return state end
function zone_tick(entities, zone_state)
  if HOARDING then for i = 1, 8 do HOARD[#HOARD + 1] = BIG .. i end end
  return entities, zone_state
end
function handle_input(player_id, input, entities)
  if input.hoard then HOARDING = true end
  if input.go then entities[player_id].x = input.go end
  return entities
end
`;

const game = gameDir({ 'config.lua': 'return { hoarder = "hoarder.lua" }', 'hoarder.lua': HOARDER });
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ match_workers: 2, world_lanes: 2, match_worker_memory_mb: 64 }, { gameDir: game.dir });
});
afterAll(async () => {
  await s.close();
  game.remove();
});

describe('a world whose stripe lane dies', () => {
  it('ends worker_lost for its players; the node makes worlds on two lanes again', async () => {
    const p = await connectPlayer(s);
    const created = await p.socket.request('world.create', { mode: 'hoarder' });
    expect(created.type).toBe('world.joined');
    const worldId = created.payload.world_id as string;
    // The player stands in column 3, the far stripe: its input reaches that lane's zone.
    await p.socket.next((f) => f.type === 'world.tick' && f.payload.zone[0] === 3, 5000);
    p.socket.send({ type: 'world.input', payload: { hoard: true } });
    const finished = await p.socket.next('world.finished', 20_000);
    expect(finished.payload).toEqual({ world_id: worldId, result: { status: 'error', reason: 'worker_lost' } });
    // The world's home took the first lane; the far stripe, the second: that one died.
    expect(s.logs.find((l) => l.event === 'script_worker_lost')).toMatchObject({ reason: 'memory', worker: 1 });

    // A new world on the replaced lanes: its player's input reaches the far stripe's zone, is
    // acknowledged from the home lane, and walks it across the border into the home stripe.
    const q = await connectPlayer(s);
    const again = await q.socket.request('world.create', { mode: 'hoarder' });
    expect(again.type).toBe('world.joined');
    await q.socket.next((f) => f.type === 'world.tick' && f.payload.zone[0] === 3, 10_000);
    q.socket.send({ type: 'world.input', seq: 7, payload: { go: 50 } });
    expect((await q.socket.next('world.ack', 5000)).payload.seq).toBe(7);
    await q.socket.next((f) => f.type === 'world.tick' && f.payload.zone[0] === 0 && f.payload.kf === true, 5000);
    p.socket.close();
    q.socket.close();
  });
});
