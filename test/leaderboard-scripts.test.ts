import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerPlayer, type TestPlayer } from './support/accounts';
import { gameDir, matchScript } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer } from './support/ws-client';

// game.leaderboard.* from real Lua scripts: rpc.lua methods that hand their
// arguments to the bindings, and a match script that submits when a player
// joins. Scripts run in the worker pool and, in a second server, on the main thread.

const RPC = `
rpc = {}
function rpc.submit(player_id, params)
  return { result = game.leaderboard.submit(params.board, params.player or player_id, params.score, params.sub) }
end
function rpc.top(player_id, params) return game.leaderboard.top(params.board, params.count) end
function rpc.rank(player_id, params) return game.leaderboard.rank(params.board, params.player or player_id) end
function rpc.around(player_id, params) return game.leaderboard.around(params.board, params.player or player_id, params.count) end
function rpc.misuse(player_id, params)
  return {
    no_board = game.leaderboard.submit(7, player_id, 1),
    not_a_player = game.leaderboard.submit("b", "someone", 1),
    no_score = game.leaderboard.submit("b", player_id, "ten"),
    top_count = game.leaderboard.top("b"),
    around_count = game.leaderboard.around("b", player_id),
  }
end
`;

const game = gameDir({
  'match.lua': matchScript('match_size = 2\nmin_players = 1\nquick_play = true', 'function join(player_id, state) game.leaderboard.submit("joins", player_id, 1) return state end'),
  'rpc.lua': RPC,
});

afterAll(() => game.remove());

for (const mode of [{ name: 'worker pool', settings: {} }, { name: 'main thread', settings: { match_workers: 0 } }]) {
  describe(`game.leaderboard.* (${mode.name})`, () => {
    let s: TestServer;
    let a: TestPlayer;
    let b: TestPlayer;
    beforeAll(async () => {
      s = await startTestServer({ ...mode.settings, leaderboards: { low: { order: 'asc' } } }, { gameDir: game.dir });
      a = await registerPlayer(s);
      b = await registerPlayer(s);
    });
    afterAll(async () => {
      await s.close();
    });

    const rpc = async (method: string, params: Record<string, unknown>, p = a) => {
      const res = await s.call('POST', `/api/v1/rpc/game.${method}`, { token: p.access_token, body: { params } });
      expect(res.status).toBe(200);
      return res.body.payload.result;
    };

    it('submits without the REST opt-in, truncating toward zero, and reads top and rank back', async () => {
      expect(await rpc('submit', { board: 'scripted', score: 10.9 })).toEqual({ result: true });
      expect(await rpc('submit', { board: 'scripted', score: -1.5 }, b)).toEqual({ result: true });
      expect(await rpc('submit', { board: 'scripted', player: b.player_id, score: 25, sub: 3 })).toEqual({ result: true });
      expect(await rpc('top', { board: 'scripted', count: 10 })).toEqual({
        ok: [
          { player_id: b.player_id, score: 25, sub_score: 3, rank: 1 },
          { player_id: a.player_id, score: 10, sub_score: 0, rank: 2 },
        ],
      });
      expect(await rpc('rank', { board: 'scripted' })).toEqual({ ok: 2 });
      // What a script wrote, REST reads.
      const rest = await s.call('GET', '/api/v1/leaderboards/scripted', { token: a.access_token });
      expect(rest.body.entries.map((e: { player_id: string; score: number }) => [e.player_id, e.score])).toEqual([
        [b.player_id, 25],
        [a.player_id, 10],
      ]);
    });

    it('reads around a player, honours the board order, and answers not_found and empty lists', async () => {
      await rpc('submit', { board: 'low', score: 3 });
      await rpc('submit', { board: 'low', score: 1 }, b);
      expect(await rpc('around', { board: 'low', count: 1 })).toEqual({
        ok: [
          { player_id: b.player_id, score: 1, sub_score: 0, rank: 1 },
          { player_id: a.player_id, score: 3, sub_score: 0, rank: 2 },
        ],
      });
      const outsider = await registerPlayer(s);
      expect(await rpc('rank', { board: 'low', player: outsider.player_id })).toEqual({ error: 'not_found' });
      expect(await rpc('rank', { board: 'nowhere' })).toEqual({ error: 'not_found' });
      expect(await rpc('top', { board: 'nowhere', count: 5 })).toEqual({ ok: [] });
      expect(await rpc('around', { board: 'low', player: outsider.player_id, count: 2 })).toEqual({ ok: [] });
    });

    it('answers wrong arguments with an error naming the expected ones', async () => {
      const out = await rpc('misuse', {});
      for (const key of ['no_board', 'not_a_player', 'no_score']) expect(out[key].error).toMatch(/^game\.leaderboard\.submit\(board_id, player_id, score/);
      expect(out.top_count.error).toMatch(/^game\.leaderboard\.top\(board_id, count\)/);
      expect(out.around_count.error).toMatch(/^game\.leaderboard\.around\(board_id, player_id, count\)/);
      expect([...s.ctx.leaderboards.boards()].some((board) => board.id === 'b')).toBe(false);
    });

    it('answers false at the board capacity', async () => {
      const capped = await startTestServer({ ...mode.settings, leaderboard_max_boards: 1 }, { gameDir: game.dir });
      try {
        const p = await registerPlayer(capped);
        const call = (board: string) => capped.call('POST', '/api/v1/rpc/game.submit', { token: p.access_token, body: { params: { board, score: 1 } } });
        expect((await call('first')).body.payload.result).toEqual({ result: true });
        expect((await call('second')).body.payload.result).toEqual({ result: false });
      } finally {
        await capped.close();
      }
    });

    it('takes scores from match scripts', async () => {
      const { socket, playerId } = await connectPlayer(s, 'm');
      const joined = await socket.request('match.find_or_create', { mode: 'default' });
      expect(joined.type).toBe('match.joined');
      socket.close();
      const rest = await s.call('GET', '/api/v1/leaderboards/joins', { token: a.access_token });
      expect(rest.body.entries.map((e: { player_id: string }) => e.player_id)).toContain(playerId);
    });
  });
}
