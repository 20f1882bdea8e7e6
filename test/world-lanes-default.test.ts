import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LiveHost } from '../host/realtime/live';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer } from './support/ws-client';

/**
 * Without `world_lanes`, a node of two script workers spreads a world over
 * both only when each stripe gets at least four columns (decision 0067): a
 * 4 × 4 world stays on its home lane, an 8 × 8 one takes both. Which lanes
 * worked is read from the node's tick figures (what the worlds benchmark
 * prints), the one place a client-invisible placement shows.
 */
const world = (grid: number) => `
game_type = "world"
match_size = 1
max_players = 4
tick_rate = 50
grid_size = ${grid}
zone_size = 100
lazy_zones = false
function init(config) return {} end
function join(player_id, state, ctx) return state end
function leave(player_id, state) return state end
function spawn_position(player_id, state) return { x = 50, y = 50 } end
function post_tick(tick, state) return state end
function zone_tick(entities, zone_state) return entities, zone_state end
function handle_input(player_id, input, entities) return entities end
`;

const game = gameDir({ 'config.lua': 'return { small = "small.lua", big = "big.lua" }', 'small.lua': world(4), 'big.lua': world(8) });
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ match_workers: 2 }, { gameDir: game.dir });
});
afterAll(async () => {
  await s.close();
  game.remove();
});

const lanesWorked = () => (s.ctx.live as LiveHost).worlds.takeStats().lanes;
const ticks = (n: number) => new Promise((r) => setTimeout(r, n * 50));

describe('world_lanes unset', () => {
  it('keeps a world narrower than two stripes of four columns on one lane and spreads a wider one', async () => {
    const p = await connectPlayer(s);
    expect((await p.socket.request('world.create', { mode: 'small' })).type).toBe('world.joined');
    await ticks(10);
    lanesWorked();
    await ticks(10);
    expect(lanesWorked()).toHaveLength(1);

    const q = await connectPlayer(s);
    expect((await q.socket.request('world.create', { mode: 'big' })).type).toBe('world.joined');
    await ticks(10);
    lanesWorked();
    await ticks(10);
    const lanes = lanesWorked();
    expect(lanes, JSON.stringify(lanes)).toHaveLength(2);
    expect(lanes[1]).toBeGreaterThan(0);
    p.socket.close();
    q.socket.close();
  });
});
