import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, type TestSocket } from './support/ws-client';

/**
 * A socket that closes while its player's join is in flight (`match.join`,
 * `match.find_or_create`, or the matchmaker's join of the ticket's match)
 * must not leave the player in the match for good: the script's own count,
 * which `leave` lowers, is what the players still connected see. Each
 * `join` spins, so the close reaches the node while the lane runs it.
 * Players matched over REST, who never had a socket, stay in.
 */

// A join that spins this many loop turns: long enough for the close to land while it runs (20-30
// ms on a quiet machine), short enough to stay inside the 200 ms a join may take on a loaded one (a
// join cut short proves nothing). 1M and 2M turns, once thought tens of milliseconds, took about
// 100 ms quiet and outlasted the deadline in loaded CI runs, ending the grouped match.
const SPIN = 250_000;

/** A mode whose `join` runs `spin` first; the state counts the players in and every join that landed. */
const counting = (globals: string, spin: string) => `
${globals}
function init(config) return { count = 0, joins = 0 } end
function join(player_id, state, ctx)
  ${spin}
  state.count = state.count + 1
  state.joins = state.joins + 1
  return state
end
function leave(player_id, state) state.count = state.count - 1 return state end
function handle_input(player_id, input, state) return state end
function tick(state) return state end
function get_state(player_id, state) return { count = state.count, joins = state.joins } end
`;

const ROOM = counting('match_size = 1\nmax_players = 4\nquick_play = true', 'if ctx and ctx.spin then for i = 1, ctx.spin do end end');
// The matchmaker joins a group's players one after another: the second one's join spins.
const DUO = counting('match_size = 2\nmax_players = 2', `if state.count == 1 then for i = 1, ${SPIN} do end end`);
// No spin where no race is wanted: on a loaded machine a spinning join can outlast its deadline.
const PAIR = counting('match_size = 2\nmax_players = 2', '');

const game = gameDir({ 'config.lua': 'return { room = "room.lua", duo = "duo.lua", pair = "pair.lua" }', 'room.lua': ROOM, 'duo.lua': DUO, 'pair.lua': PAIR });
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer(
    { lua_instruction_budget: { init_tick: 1_000_000, other: 5_000_000 }, matchmaker_tick_ms: 20 },
    { gameDir: game.dir },
  );
});
afterAll(async () => {
  await s.close();
  game.remove();
});

/**
 * What the match's script reports to `socket` after a second and a half: `joins` counts every join
 * that landed (so the leaver's join did run to its end), `count` the players still in.
 */
async function settled(socket: TestSocket): Promise<{ count: number; joins: number }> {
  await new Promise((r) => setTimeout(r, 1500));
  socket.frames.splice(0);
  const { count, joins } = (await socket.next('match.state', 5000)).payload;
  return { count, joins };
}

/**
 * Runs a race until it happened: the leaver's join landed (`joins` 2) after its socket closed.
 * Every attempt must leave the leaver out (`count` 1). On a loaded machine the close can land
 * before the join runs, or the join outlast its deadline (its match then ends, and no state
 * comes): those attempts raced nothing, and the next one tries again, three at most.
 */
async function raced(attempt: () => Promise<{ count: number; joins: number }>): Promise<void> {
  let last: { count: number; joins: number } | Error | null = null;
  for (let i = 0; i < 3; i++) {
    last = await attempt().catch((err: Error) => err);
    if (last instanceof Error) continue;
    expect(last.count).toBe(1);
    if (last.joins === 2) return;
  }
  if (last instanceof Error) throw last;
  expect(last).toEqual({ count: 1, joins: 2 });
}

async function ownerInRoom() {
  const owner = await connectPlayer(s, 'owner');
  const joined = await owner.socket.request('match.find_or_create', { mode: 'room' });
  expect(joined.type).toBe('match.joined');
  return { ...owner, matchId: joined.payload.match_id as string };
}

describe('a socket that closes while its join is in flight', () => {
  // Either way in: by the room's id, or by its mode (quick play converges on the owner's room).
  const joins: [string, (matchId: string) => Record<string, unknown>][] = [
    ['match.join', (matchId) => ({ match_id: matchId })],
    ['match.find_or_create', () => ({ mode: 'room' })],
  ];
  it.each(joins)('%s: the player does not stay in the match', async (type, payload) => {
    await raced(async () => {
      const owner = await ownerInRoom();
      const leaver = await connectPlayer(s, 'leaver');
      leaver.socket.send({ type, payload: { ...payload(owner.matchId), ctx: { spin: SPIN } } });
      await new Promise((r) => setTimeout(r, 5));
      leaver.socket.close();
      try {
        return await settled(owner.socket);
      } finally {
        // Out of the room either way: quick play would put the next attempt's owner in it.
        await owner.socket.request('match.leave');
        owner.socket.close();
      }
    });
  }, 60_000);

  it("the matchmaker's join: the player does not stay in the match it was grouped into", async () => {
    await raced(async () => {
      const stayer = await connectPlayer(s, 'stayer');
      const leaver = await connectPlayer(s, 'leaver');
      // Queue order is join order: the leaver's join is the second, the one that spins.
      expect((await stayer.socket.request('matchmaker.add', { mode: 'duo' })).type).toBe('matchmaker.queued');
      expect((await leaver.socket.request('matchmaker.add', { mode: 'duo' })).type).toBe('matchmaker.queued');
      // The stayer's join is quick and its match.matched goes out before the leaver's join, which
      // spins: closing on it lands the goodbye while that join runs. (A fixed wait could close
      // before the group formed on a loaded machine; the ticket then stays, as a REST player's.)
      const matched = await stayer.socket.next('match.matched', 15_000);
      leaver.socket.close();
      expect(matched.payload.players).toEqual([stayer.playerId, expect.any(String)]);
      try {
        return await settled(stayer.socket);
      } finally {
        stayer.socket.close();
      }
    });
  }, 60_000);

  it('a player matched over REST, with no socket, stays in its match', async () => {
    const stayer = await connectPlayer(s, 'stayer');
    const restOnly = await connectPlayer(s, 'rest');
    restOnly.socket.close();
    await restOnly.socket.closed;
    expect((await stayer.socket.request('matchmaker.add', { mode: 'pair' })).type).toBe('matchmaker.queued');
    expect((await s.call('POST', '/api/v1/matchmaker', { token: restOnly.token, body: { mode: 'pair' } })).status).toBe(200);
    await stayer.socket.next('match.matched', 15_000);
    expect(await settled(stayer.socket)).toEqual({ count: 2, joins: 2 });
    stayer.socket.close();
  }, 30_000);
});
