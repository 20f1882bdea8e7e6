import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { serverPushes } from '../runtime/schemas/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, type Frame, type TestSocket } from './support/ws-client';

const BOT_ID = /^bot_[A-Za-z0-9_-]{1,32}_[a-z0-9]{6}$/;

/**
 * A small arena every mode below shares: bodies on a line, `{dx}` inputs
 * move them, a boon pick phase first, and each player's last input shown to
 * everybody, so a person watching sees what the bots decided.
 */
const ARENA = `
function init(config) return { tick = 0, phase = "boon_pick", players = {}, picks = {}, inputs = {}, seats = 0 } end
function join(id, state)
  state.seats = state.seats + 1
  state.players[id] = { x = state.seats * 3, y = 0, hp = 10 }
  return state
end
function leave(id, state) state.players[id] = nil return state end
function handle_input(id, input, state)
  if input.type == "boon_pick" then
    state.picks[id] = input.boon_id
  else
    state.inputs[id] = input
    local p = state.players[id]
    if p and type(input.dx) == "number" then p.x = p.x + input.dx end
  end
  return state
end
function tick(state)
  state.tick = state.tick + 1
  local picked = 0
  for _ in pairs(state.picks) do picked = picked + 1 end
  if state.phase == "boon_pick" and picked >= (BOTS or 0) then state.phase = "fight" end
  return state
end
function get_state(id, state)
  return { tick = state.tick, phase = state.phase, boon_offers = { { id = "haste" }, { id = "armor" } },
           players = state.players, picks = state.picks, inputs = state.inputs }
end
`;

const files: Record<string, string> = {
  'config.lua': 'return { skirmish = "skirmish.lua", broken = "modes/broken.lua", director = "director.lua", hostile = "hostile.lua", escape = "escape.lua" }',
  // One person and three scripted bots; a vote at tick 5 that only the bots answer ends it.
  'skirmish.lua': `match_size = 4
BOTS = 3
bots = { script = "bots/hunter.lua", min_players = 4 }
${ARENA}
function vote_requested(state)
  if state.tick == 5 then
    return { template = "next_map", options = { { id = "dunes", label = "Dunes" }, { id = "ruins", label = "Ruins" } }, window_ms = 6000 }
  end
end
function vote_resolved(template, result, state)
  state._result = { status = "voted", votes_cast = result.votes_cast, picks = state.picks }
  state._finished = true
  return state
end`,
  // A script that requires a module next to it, keeps module-level memory, and has no game table.
  'bots/hunter.lua': `names = { "Ada", "Bob", "Cy" }
local brain = require("brain")
local calls = 0
memory = { n = 0 }
function think(bot_id, state)
  calls = calls + 1
  memory.n = memory.n + 1
  local fresh = leaked == nil and rawget(_G, "leaked") == nil
  leaked = true
  return { dx = brain.step(), from = "script", calls = calls, memory = memory.n, fresh = fresh, no_game = game == nil, phase = state.phase, me = bot_id }
end`,
  'bots/brain.lua': 'return { step = function() return 1 end }',
  // The bot script is relative to the mode script's directory; this one cannot even load.
  'modes/broken.lua': `match_size = 2
max_players = 2
BOTS = 1
bots = { script = "../bots/broken.lua" }
${ARENA}`,
  'bots/broken.lua': 'function think(bot_id, state) error("this bot is broken") end',
  // Bots from the script: no bots global at all.
  'director.lua': `match_size = 1
max_players = 80
BOTS = 0
${ARENA}
local base_tick = tick
function tick(state)
  state = base_tick(state)
  if state.tick == 2 then
    state.first = game.bots.add("Alpha")
    game.bots.add("Alpha")
    state.bad = game.bots.add("no spaces allowed")
    for i = 1, 70 do game.bots.add("B" .. i) end
  end
  if state.tick == 6 then game.bots.remove("Alpha") end
  if state.tick == 7 then
    for id in pairs(state.players) do
      if id:match("^bot_B1_") then game.bots.remove(id) end
    end
  end
  local bots = 0
  for id in pairs(state.players) do if id:sub(1, 4) == "bot_" then bots = bots + 1 end end
  state.bot_count = bots
  return state
end
local base_view = get_state
function get_state(id, state)
  local view = base_view(id, state)
  view.bot_count = state.bot_count
  view.first = state.first
  view.bad = state.bad
  return view
end`,
  // One bot loops for ever in think; the other must still play from its script.
  'hostile.lua': `match_size = 3
BOTS = 2
bots = { script = "bots/hostile.lua" }
${ARENA}`,
  'bots/hostile.lua': `names = { "Loop", "Calm" }
function think(bot_id, state)
  if bot_id:find("Loop", 1, true) then while true do end end
  return { dx = 0, from = "script" }
end`,
  // A path that leaves the game directory: the mode has no bots.
  'escape.lua': `match_size = 2
bots = { script = "../../etc/bot.lua" }
${ARENA}`,
};
const game = gameDir(Object.fromEntries(Object.entries(files).filter(([f]) => !f.includes('/'))));
for (const sub of ['bots', 'modes']) mkdirSync(path.join(game.dir, sub));
for (const [f, text] of Object.entries(files)) if (f.includes('/')) game.write(f, text);

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ matchmaker_tick_ms: 50, matchmaker_bot_fill_ms: 200, ws_idle_timeout_ms: 3_600_000 }, { gameDir: game.dir });
});
afterAll(async () => {
  await s?.close();
  game.remove();
});

/** Queues one person alone and returns the match it was grouped into. */
async function queueAlone(socket: TestSocket, mode: string): Promise<{ matchId: string; players: string[] }> {
  const queued = await socket.request('matchmaker.add', { mode });
  expect(queued.type).toBe('matchmaker.queued');
  const matched = await socket.next('match.matched', 10_000);
  // What goes out is what the published document says, bots' ids included.
  const contract = serverPushes.find((p) => p.type === 'match.matched')!;
  expect(contract.payload.safeParse(matched.payload).error).toBeUndefined();
  return { matchId: matched.payload.match_id, players: matched.payload.players };
}

/** The first `match.state` whose payload passes `test`. */
function stateWhere(socket: TestSocket, test: (p: any) => boolean, timeoutMs = 10_000): Promise<Frame> {
  return socket.next((f) => f.type === 'match.state' && test(f.payload), timeoutMs);
}

describe('a person alone in a mode with bots', () => {
  it('is grouped with three bots from the bot script, who join, pick a boon, think from their script and vote', async () => {
    const { socket, playerId, token } = await connectPlayer(s);
    const { matchId, players } = await queueAlone(socket, 'skirmish');
    expect(players).toHaveLength(4);
    expect(players).toContain(playerId);
    const bots = players.filter((id) => id !== playerId);
    for (const id of bots) expect(id).toMatch(/^bot_(Ada|Bob|Cy)_[a-z0-9]{6}$/);

    // Each bot picks the first offer in the boon phase, then plays from its script.
    const fight = await stateWhere(socket, (p) => p.phase === 'fight' && bots.every((id) => p.inputs[id]?.from === 'script'));
    for (const id of bots) expect(fight.payload.picks[id]).toBe('haste');
    expect(Object.keys(fight.payload.players).sort()).toEqual([...players].sort());
    for (const id of bots) {
      // Module-level locals and tables are put back after every call; no game table; the view is the bot's own.
      expect(fight.payload.inputs[id]).toEqual({ dx: 1, from: 'script', calls: 1, memory: 1, fresh: true, no_game: true, phase: 'fight', me: id });
    }
    const later = await stateWhere(socket, (p) => p.tick > fight.payload.tick + 3);
    for (const id of bots) expect(later.payload.players[id].x).toBeGreaterThan(fight.payload.players[id].x);

    // The vote: the bots cast, the person did not.
    const start = await socket.next('match.vote_start', 10_000);
    const finished = await socket.next('match.finished', 15_000);
    expect(finished.payload.match_id).toBe(matchId);
    expect(finished.payload.result.status).toBe('voted');
    expect(Object.keys(finished.payload.result.votes_cast).sort()).toEqual([...bots].sort());
    for (const choice of Object.values(finished.payload.result.votes_cast)) expect(['dunes', 'ruins']).toContain(choice);
    expect(start.payload.vote_id).toBeTypeOf('string');

    // The record is written with the bots in it (they count no stats: they have no account).
    await expect.poll(async () => (await s.call('GET', `/api/v1/matches/${matchId}`, { token })).status, { timeout: 5000 }).toBe(200);
    expect(s.logs.filter((l) => l.event === 'match_record_failed')).toEqual([]);
    const line = s.logs.find((l) => l.event === 'match_finished' && l.match_id === matchId);
    expect(line?.players).toBe(4);
    socket.close();
  });

  it('plays against the built-in AI when the bot script is broken, logged once a minute per bot', async () => {
    const { socket, playerId } = await connectPlayer(s);
    const { matchId, players } = await queueAlone(socket, 'broken');
    const bot = players.find((id) => id !== playerId)!;
    expect(bot).toMatch(/^bot_(Spark|Blitz|Volt|Neon|Pulse)_[a-z0-9]{6}$/);
    // The built-in AI steps toward the nearest living player.
    const seen = await stateWhere(socket, (p) => p.phase === 'fight' && p.inputs[bot]?.target === playerId);
    expect(seen.payload.inputs[bot]).toEqual({ dx: -1, dy: 0, target: playerId });
    await stateWhere(socket, (p) => p.tick >= seen.payload.tick + 10);
    const fallback = s.logs.filter((l) => l.event === 'bot_fallback_ai' && l.match_id === matchId);
    expect(fallback).toHaveLength(1);
    expect(fallback[0]).toMatchObject({ bot_id: bot, script: 'bots/broken.lua' });
    socket.close();
  });

  it('keeps a bot whose think never returns to itself: the other bot still plays from the script', async () => {
    const { socket, playerId } = await connectPlayer(s);
    const { players } = await queueAlone(socket, 'hostile');
    const loop = players.find((id) => id.startsWith('bot_Loop_'))!;
    const calm = players.find((id) => id.startsWith('bot_Calm_'))!;
    expect(players).toEqual(expect.arrayContaining([playerId, loop, calm]));
    const seen = await stateWhere(socket, (p) => p.inputs[calm]?.from === 'script' && p.inputs[loop]?.target !== undefined);
    // The match keeps its ten ticks a second going.
    await stateWhere(socket, (p) => p.tick >= seen.payload.tick + 10);
    socket.close();
  });
});

describe('game.bots from a match script', () => {
  it('adds bots through join, refuses a bad name, skips a duplicate, stops at 64, and removes by name and by id', async () => {
    const { socket, playerId } = await connectPlayer(s);
    await queueAlone(socket, 'director');
    const added = await stateWhere(socket, (p) => p.bot_count === 64);
    expect(added.payload.first).toBe(true);
    expect(added.payload.bad).toEqual({ error: expect.stringContaining('game.bots.add(name)') });
    const ids = Object.keys(added.payload.players).filter((id) => id !== playerId);
    expect(ids).toHaveLength(64);
    for (const id of ids) expect(id).toMatch(BOT_ID);
    expect(ids.filter((id) => id.startsWith('bot_Alpha_'))).toHaveLength(1);
    // Bots with no script play the built-in AI: their inputs reach handle_input.
    const alpha = ids.find((id) => id.startsWith('bot_Alpha_'))!;
    await stateWhere(socket, (p) => p.inputs[alpha] !== undefined);
    // Removed by name at tick 6, by full id at tick 7: through leave, like a person.
    const removed = await stateWhere(socket, (p) => p.tick >= 8);
    expect(removed.payload.bot_count).toBe(62);
    expect(Object.keys(removed.payload.players).some((id) => id.startsWith('bot_Alpha_') || id.startsWith('bot_B1_'))).toBe(false);
    socket.close();
  });
});

describe('the bots global', () => {
  it('drops a bot script path that leaves the game directory, with a warning', async () => {
    expect(s.logs.some((l) => l.event === 'game_notice' && String(l.message).includes('leaves the game directory'))).toBe(true);
    const { socket } = await connectPlayer(s);
    await socket.request('matchmaker.add', { mode: 'escape' });
    // No bots come: a lone ticket in a 2-player mode stays unmatched.
    expect(await socket.quiet('match.matched', 1000)).toBe(true);
    socket.close();
  });
});
