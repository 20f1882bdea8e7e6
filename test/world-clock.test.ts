import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LiveHost } from '../host/realtime/live';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer } from './support/ws-client';

/**
 * A world's ticks run on its script lane; the main thread's wheel says when
 * each is due and brings the inputs before it. A main thread held up past a
 * due time (a long collection, a burst of writes; here the test blocks it)
 * must not cost the world that tick: the lane runs it on its own clock a
 * little past its due time, for a few ticks in a row (decision 0070).
 * Without that standby, a main thread held up 75 ms made the lane see the
 * tick a period late and skip it, in about half of the hold-ups.
 */
const world = `
game_type = "world"
match_size = 1
max_players = 4
tick_rate = 50
grid_size = 1
zone_size = 100
lazy_zones = false
function init(config) return {} end
function join(player_id, state, ctx) return state end
function leave(player_id, state) return state end
function spawn_position(player_id, state) return { x = 50, y = 50 } end
function post_tick(tick, state) return state end
function zone_tick(entities, zone_state)
  for id, e in pairs(entities) do
    if e.type == "player" then e.ticks = (e.ticks or 0) + 1 end
  end
  return entities, zone_state
end
function handle_input(player_id, input, entities) return entities end
`;

const game = gameDir({ 'config.lua': 'return { clock = "clock.lua" }', 'clock.lua': world });
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ match_workers: 1 }, { gameDir: game.dir });
});
afterAll(async () => {
  await s.close();
  game.remove();
});

const stats = () => (s.ctx.live as LiveHost).worlds.takeStats();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const held = new Int32Array(new SharedArrayBuffer(4));
/** Blocks this thread, the node's main thread, for `ms`: nothing of it runs meanwhile. */
const holdUp = (ms: number) => Atomics.wait(held, 0, 0, ms);

describe('a world on a worker lane', () => {
  it('runs every tick through main-thread hold-ups of 1.5 and 3 periods', async () => {
    const p = await connectPlayer(s);
    expect((await p.socket.request('world.create', { mode: 'clock' })).type).toBe('world.joined');
    let seen = 0;
    p.socket.ws.on('message', (data) => {
      const f = JSON.parse(String(data));
      if (f.type !== 'world.tick') return;
      for (const u of f.payload.updates ?? []) if (u.id === p.playerId && typeof u.ticks === 'number') seen = Math.max(seen, u.ticks);
    });
    await sleep(500);
    stats();
    const from = seen;
    const started = Date.now();
    // Hold-ups at phases spread over the period, of 75 and 150 ms.
    for (let i = 0; i < 8; i++) {
      await sleep(60 + 7 * i);
      holdUp(i % 2 === 0 ? 75 : 150);
    }
    await sleep(300);
    const elapsed = Date.now() - started;
    const { skipped, busy } = stats();
    expect(skipped, `ticks run ${busy.length} in ${elapsed} ms`).toBe(0);
    // What the player saw: a tick for every period of the window, give or take the edges.
    expect(seen - from).toBeGreaterThanOrEqual(Math.floor(elapsed / 50) - 3);
  });

  it('stops the clock after four ticks of its own when the main thread stops sending them', async () => {
    await sleep(300);
    stats();
    // Ten periods without the main thread: four run on the lane's clock, the rest are skipped.
    holdUp(500);
    await sleep(200);
    const { skipped, busy } = stats();
    expect(skipped, `ticks run ${busy.length}`).toBeGreaterThanOrEqual(4);
    expect(busy.length).toBeGreaterThanOrEqual(4);
  });
});
