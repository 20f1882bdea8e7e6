import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gameDir } from './support/game-dir';
import { productionHosts } from './support/production-host';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, recordFrames, TestSocket, type Frame } from './support/ws-client';

/**
 * Development errors (setting `dev_errors`): a `handle_input` that fails on a
 * player's input, in a match or in a world zone, also sends that player
 * `module.error {module: "lua", callback, script, message}` after its legacy
 * twin `game.error`, at most one a second per match or zone; nobody else
 * hears of it. Off by default, and never in production (NODE_ENV), whatever
 * the settings say.
 */

const ROOM = `
match_size = 1
max_players = 4
quick_play = true
function init(config) return { inputs = {} } end
function join(player_id, state) return state end
function leave(player_id, state) return state end
function handle_input(player_id, input, state)
  if input.boom then error("boom " .. input.boom) end
  if input.n then state.inputs[#state.inputs + 1] = input.n end
  return state
end
function tick(state) return state end
function get_state(player_id, state) return { inputs = state.inputs } end
`;

const ZONES = `
game_type = "world"
match_size = 1
max_players = 8
tick_rate = 50
grid_size = 2
zone_size = 100
view_radius = 1
function init(config) return {} end
function join(player_id, state) return state end
function leave(player_id, state) return state end
function spawn_position(player_id, state) return { x = 50, y = 50 } end
function zone_tick(entities, zone_state) return entities, zone_state end
function handle_input(player_id, input, entities)
  if input.boom then error("zone boom") end
  if input.nothing then return nil end
  return entities
end
`;

const game = gameDir({ 'config.lua': 'return { room = "room.lua", zones = "zones.lua" }', 'room.lua': ROOM, 'zones.lua': ZONES });
afterAll(() => game.remove());

type Player = Awaited<ReturnType<typeof connectPlayer>>;
const errorFrames = (frames: Frame[]) => frames.filter((f) => f.type === 'module.error' || f.type === 'game.error');
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

async function inRoom(s: TestServer): Promise<Player> {
  const p = await connectPlayer(s);
  expect((await p.socket.request('match.find_or_create', { mode: 'room' })).type).toBe('match.joined');
  return p;
}

describe('with dev_errors on', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ dev_errors: true }, { gameDir: game.dir });
  });
  afterAll(async () => {
    await s.close();
  });

  it("a failing match handle_input sends its player game.error then module.error, at most one a second; the others hear nothing", async () => {
    const a = await inRoom(s);
    const b = await inRoom(s);
    const seenA = recordFrames(a.socket);
    const seenB = recordFrames(b.socket);
    a.socket.send({ type: 'match.input', payload: { boom: 1 } });
    a.socket.send({ type: 'match.input', payload: { boom: 2 } });
    a.socket.send({ type: 'match.input', payload: { n: 7 } });
    const error = await a.socket.next('module.error', 10_000);
    expect(error.payload).toEqual({ module: 'lua', callback: 'handle_input', script: 'room.lua', message: expect.stringContaining('boom 1') });
    expect(error).not.toHaveProperty('cid');
    await a.socket.next((f) => f.type === 'match.state' && list(f.payload.inputs).includes(7), 10_000);
    await new Promise((r) => setTimeout(r, 200));
    // The second failure came within the second: logged, not sent.
    expect(errorFrames(seenA).map((f) => f.type)).toEqual(['game.error', 'module.error']);
    expect(errorFrames(seenA)[0]!.payload).toEqual(error.payload);
    expect(errorFrames(seenB)).toEqual([]);
    // A second later the next failure is told again.
    await new Promise((r) => setTimeout(r, 1000));
    a.socket.send({ type: 'match.input', payload: { boom: 3 } });
    expect((await a.socket.next((f) => f.type === 'module.error' && String(f.payload.message).includes('boom 3'), 10_000)).payload.script).toBe('room.lua');
    a.socket.close();
    b.socket.close();
  });

  it("a failing zone handle_input (an error, or no entity table) sends its player module.error", async () => {
    const p = await connectPlayer(s);
    expect((await p.socket.request('world.create', { mode: 'zones' })).type).toBe('world.joined');
    p.socket.send({ type: 'world.input', payload: { boom: true } });
    const error = await p.socket.next('module.error', 10_000);
    expect(error.payload).toEqual({ module: 'lua', callback: 'handle_input', script: 'zones.lua', message: expect.stringContaining('zone boom') });
    await new Promise((r) => setTimeout(r, 1100));
    p.socket.send({ type: 'world.input', payload: { nothing: true } });
    const malformed = await p.socket.next('module.error', 10_000);
    expect(malformed.payload.message).toBe('handle_input must return the entity table');
    await p.socket.request('world.leave');
    p.socket.close();
  });
});

describe('with ws_legacy_game_frames off', () => {
  it('module.error comes alone', async () => {
    const s = await startTestServer({ dev_errors: true, ws_legacy_game_frames: false }, { gameDir: game.dir });
    const a = await inRoom(s);
    const seen = recordFrames(a.socket);
    a.socket.send({ type: 'match.input', payload: { boom: 1 } });
    await a.socket.next('module.error', 10_000);
    await new Promise((r) => setTimeout(r, 200));
    expect(errorFrames(seen).map((f) => f.type)).toEqual(['module.error']);
    a.socket.close();
    await s.close();
  });
});

describe('by default (dev_errors off)', () => {
  it('a failing handle_input sends the player nothing; the failure is in the log', async () => {
    const s = await startTestServer({}, { gameDir: game.dir });
    const a = await inRoom(s);
    const seen = recordFrames(a.socket);
    a.socket.send({ type: 'match.input', payload: { boom: 1 } });
    a.socket.send({ type: 'match.input', payload: { n: 1 } });
    await a.socket.next((f) => f.type === 'match.state' && list(f.payload.inputs).includes(1), 10_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(errorFrames(seen)).toEqual([]);
    expect(s.logs.some((l) => l.event === 'lua_callback_failed' && l.callback === 'handle_input')).toBe(true);
    a.socket.close();
    await s.close();
  });
});

describe('in production (NODE_ENV=production)', () => {
  const host = productionHosts();

  it('the production host sends no module.error although its settings turn dev_errors on', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-dev-errors-'));
    const config = path.join(dir, 'settings.json');
    writeFileSync(config, JSON.stringify({ dev_errors: true }));
    const h = await host({ NODE_ENV: 'production', SVC_DATA_DIR: path.join(dir, 'data'), SVC_CONFIG: config, GAME_DIR: game.dir });
    await h.ready();
    const registered = await fetch(`${h.url}/api/v1/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: `prod_${process.pid}_${Date.now().toString(36)}`, password: 'correct horse battery' }),
    });
    expect(registered.status).toBe(200);
    const { access_token } = (await registered.json()) as { access_token: string };
    const socket = await TestSocket.open({ port: h.port });
    expect((await socket.request('session.connect', { token: access_token })).type).toBe('session.connected');
    expect((await socket.request('match.find_or_create', { mode: 'room' })).type).toBe('match.joined');
    const seen = recordFrames(socket);
    socket.send({ type: 'match.input', payload: { boom: 1 } });
    socket.send({ type: 'match.input', payload: { n: 1 } });
    await socket.next((f) => f.type === 'match.state' && list(f.payload.inputs).includes(1), 10_000);
    await new Promise((r) => setTimeout(r, 500));
    expect(errorFrames(seen)).toEqual([]);
    socket.close();
  }, 120_000);
});
