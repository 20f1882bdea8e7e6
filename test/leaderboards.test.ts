import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RawSettings } from '../runtime/contracts/settings';
import { expectError, registerPlayer, type TestPlayer } from './support/accounts';
import { freshDatabase } from './support/database';
import { startTestServer, type TestServer } from './support/server';

const SETTINGS: RawSettings = {
  leaderboard_client_submit: ['arena', 'ties', 'golf', 'latest', 'total', 'clamps', 'checks', 'erased', 'flushed', 'around'],
  leaderboards: { golf: { order: 'asc' }, latest: { operator: 'set' }, total: { operator: 'incr' } },
};

let s: TestServer;
let players: TestPlayer[];
beforeAll(async () => {
  s = await startTestServer(SETTINGS);
  players = [];
  for (let i = 0; i < 6; i++) players.push(await registerPlayer(s));
});
afterAll(async () => {
  await s.close();
});

const submit = (p: TestPlayer, board: string, body: unknown) => s.call('POST', `/api/v1/leaderboards/${encodeURIComponent(board)}`, { token: p.access_token, body });
const top = (board: string, query = '', p = players[0]!) => s.call('GET', `/api/v1/leaderboards/${encodeURIComponent(board)}${query}`, { token: p.access_token });
const around = (board: string, playerId: string, query = '') => s.call('GET', `/api/v1/leaderboards/${encodeURIComponent(board)}/around/${playerId}${query}`, { token: players[0]!.access_token });
const order = (entries: { player_id: string; rank: number }[]) => entries.map((e) => [e.player_id, e.rank]);
const byId = (ps: TestPlayer[]) => [...ps].sort((a, b) => (a.player_id < b.player_id ? -1 : 1));

describe('leaderboards over REST', () => {
  it('answers the submitted entry with its rank; the top is highest first with whole-board ranks', async () => {
    const [a, b, c] = players as [TestPlayer, TestPlayer, TestPlayer];
    const res = await submit(a, 'arena', { score: 10 });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ leaderboard_id: 'arena', player_id: a.player_id, score: 10, sub_score: 0, rank: 1, updated_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/) });
    expect((await submit(b, 'arena', { score: 30 })).body.rank).toBe(1);
    expect((await submit(c, 'arena', { score: -5 })).body.rank).toBe(3);
    const read = await top('arena');
    expect(read.status).toBe(200);
    expect(read.body.entries.map((e: { player_id: string; score: number; rank: number }) => [e.player_id, e.score, e.rank])).toEqual([
      [b.player_id, 30, 1],
      [a.player_id, 10, 2],
      [c.player_id, -5, 3],
    ]);
  });

  it('keeps the better score by default, and the entry as it stands answers a worse one', async () => {
    const [a] = players as [TestPlayer];
    const worse = await submit(a, 'arena', { score: 3 });
    expect(worse.body).toMatchObject({ score: 10, rank: 2 });
    const better = await submit(a, 'arena', { score: 50 });
    expect(better.body).toMatchObject({ score: 50, rank: 1 });
  });

  it('orders equal scores by sub_score, then by player id ascending; ties get consecutive ranks', async () => {
    const [p0, p1, p2, p3] = byId(players.slice(0, 4));
    await submit(p3!, 'ties', { score: 7, sub_score: 2 });
    await submit(p2!, 'ties', { score: 7 });
    await submit(p0!, 'ties', { score: 7 });
    await submit(p1!, 'ties', { score: 7, sub_score: 2 });
    const read = await top('ties');
    expect(order(read.body.entries)).toEqual([
      [p1!.player_id, 1],
      [p3!.player_id, 2],
      [p0!.player_id, 3],
      [p2!.player_id, 4],
    ]);
    expect(read.body.entries.map((e: { sub_score: number }) => e.sub_score)).toEqual([2, 2, 0, 0]);
    // Under `best` a higher sub-score on the same score is better.
    expect((await submit(p2!, 'ties', { score: 7, sub_score: 3 })).body.rank).toBe(1);
  });

  it('follows the board rules of the leaderboards setting: asc, set, incr', async () => {
    const [a, b] = players as [TestPlayer, TestPlayer];
    await submit(a, 'golf', { score: 72 });
    await submit(b, 'golf', { score: 68 });
    await submit(b, 'golf', { score: 80 });
    expect((await top('golf')).body.entries.map((e: { player_id: string; score: number }) => [e.player_id, e.score])).toEqual([
      [b.player_id, 68],
      [a.player_id, 72],
    ]);
    await submit(a, 'latest', { score: 100 });
    expect((await submit(a, 'latest', { score: 20 })).body.score).toBe(20);
    await submit(a, 'total', { score: 5, sub_score: 1 });
    expect((await submit(a, 'total', { score: -2, sub_score: 1 })).body).toMatchObject({ score: 3, sub_score: 2 });
  });

  it('clamps limit to 1-100 and reads a malformed one as the default', async () => {
    for (const p of players) await submit(p, 'clamps', { score: 1 });
    expect((await top('clamps', '?limit=2')).body.entries).toHaveLength(2);
    expect((await top('clamps', '?limit=0')).body.entries).toHaveLength(1);
    expect((await top('clamps', '?limit=-4')).body.entries).toHaveLength(1);
    expect((await top('clamps', '?limit=abc')).body.entries).toHaveLength(players.length);
    expect((await top('clamps', '?limit=1000')).body.entries).toHaveLength(players.length);
  });

  it('reads around a player with whole-board ranks, clamping range to 1-50', async () => {
    const ranked = players.slice(0, 6);
    for (const [i, p] of ranked.entries()) await submit(p, 'around', { score: 100 - i });
    const mid = ranked[3]!;
    const res = await around('around', mid.player_id, '?range=1');
    expect(order(res.body.entries)).toEqual([
      [ranked[2]!.player_id, 3],
      [mid.player_id, 4],
      [ranked[4]!.player_id, 5],
    ]);
    // At the top there is nothing above; range 0 counts as 1; a bad range is the default (5).
    expect(order((await around('around', ranked[0]!.player_id, '?range=0')).body.entries)).toEqual([
      [ranked[0]!.player_id, 1],
      [ranked[1]!.player_id, 2],
    ]);
    expect((await around('around', mid.player_id, '?range=x')).body.entries).toHaveLength(6);
    // The id is matched whatever its case.
    expect((await around('around', mid.player_id.toUpperCase(), '?range=1')).body.entries).toHaveLength(3);
    // No entry, an unknown board, or an id that is not one: an empty list.
    const outsider = await registerPlayer(s);
    expect((await around('around', outsider.player_id)).body).toEqual({ entries: [] });
    expect((await around('nowhere', mid.player_id)).body).toEqual({ entries: [] });
    expect((await around('around', 'not-a-player')).body).toEqual({ entries: [] });
  });

  it('answers an unknown board with no entries and does not open it', async () => {
    expect((await top('never-written')).body).toEqual({ entries: [] });
    expect([...s.ctx.leaderboards.boards()].some((b) => b.id === 'never-written')).toBe(false);
  });

  it('needs a signed-in player', async () => {
    expectError(await s.call('GET', '/api/v1/leaderboards/arena'), 401, 'unauthenticated');
    expectError(await s.call('POST', '/api/v1/leaderboards/arena', { body: { score: 1 } }), 401, 'unauthenticated');
  });

  it('refuses client submissions to a board the operator did not open to them', async () => {
    const res = await submit(players[0]!, 'script-only', { score: 1 });
    expectError(res, 403, 'leaderboard.client_submit_disabled');
    expect((await top('script-only')).body.entries).toEqual([]);
  });

  it('takes scores only as JSON integers within ±(2^53 − 1)', async () => {
    const p = players[0]!;
    const raw = (text: string) => s.call('POST', '/api/v1/leaderboards/checks', { token: p.access_token, body: text });
    expectError(await submit(p, 'checks', {}), 400, 'missing_field');
    expect((await submit(p, 'checks', {})).body.error.details.field).toBe('score');
    expectError(await submit(p, 'checks', { score: '12' }), 422, 'validation_failed');
    expectError(await submit(p, 'checks', { score: 1.5 }), 422, 'validation_failed');
    expectError(await raw('{"score": 1.0}'), 422, 'validation_failed');
    expectError(await raw('{"score": 1e3}'), 422, 'validation_failed');
    expectError(await raw('{"score": 5, "sub_score": 2.0}'), 422, 'validation_failed');
    // 2^53 + 1 parses to 2^53: the literal is what is refused, with a message saying why.
    const big = await raw('{"score": 9007199254740993}');
    expectError(big, 422, 'validation_failed');
    expect(big.body.errors.score[0]).toMatch(/precision/);
    expectError(await raw('{"score": 9007199254740992}'), 422, 'validation_failed');
    expect((await raw('{"score": 9007199254740991}')).body.score).toBe(9007199254740991);
    expect((await raw('{"score": 5, "sub_score": -9007199254740991}')).status).toBe(200);
    expect((await top('checks')).body.entries[0]).toMatchObject({ score: 9007199254740991, sub_score: 0 });
  });

  it('answers 503 leaderboard.capacity_reached for a new board past leaderboard_max_boards', async () => {
    const small = await startTestServer({ leaderboard_client_submit: 'all', leaderboard_max_boards: 2 });
    try {
      const p = await registerPlayer(small);
      const post = (board: string) => small.call('POST', `/api/v1/leaderboards/${board}`, { token: p.access_token, body: { score: 1 } });
      expect((await post('one')).status).toBe(200);
      expect((await post('two')).status).toBe(200);
      const full = await post('three');
      expectError(full, 503, 'leaderboard.capacity_reached');
      expect(full.body.error.details).toEqual({ limit: 2 });
      // Boards already open still take scores.
      expect((await post('one')).status).toBe(200);
    } finally {
      await small.close();
    }
  });

  it('writes changed entries to leaderboard_entries on a flush, once', async () => {
    const [a, b] = players as [TestPlayer, TestPlayer];
    await s.leaderboardFlush.flush();
    await submit(a, 'flushed', { score: 9_007_199_254_740_991, sub_score: -3 });
    await submit(b, 'flushed', { score: 4 });
    const first = await s.leaderboardFlush.flush();
    expect(first.written).toBe(2);
    const rows = await sql<{ player_id: string; score: string; sub_score: string }>`
      select player_id, score::text as score, sub_score::text as sub_score from leaderboard_entries where leaderboard_id = 'flushed' order by score desc`.execute(s.ctx.db);
    expect(rows.rows).toEqual([
      { player_id: a.player_id, score: '9007199254740991', sub_score: '-3' },
      { player_id: b.player_id, score: '4', sub_score: '0' },
    ]);
    // Nothing changed since: nothing to write.
    expect((await s.leaderboardFlush.flush()).written).toBe(0);
    await submit(b, 'flushed', { score: 6 });
    expect((await s.leaderboardFlush.flush()).written).toBe(1);
  });
});

describe('leaderboards across a restart', () => {
  it('writes every board on graceful shutdown and reloads them at boot, 64-bit scores exact', async () => {
    const database = await freshDatabase();
    const first = await startTestServer(SETTINGS, { database: { ...database, close: async () => {} } });
    let second: TestServer | null = null;
    try {
      const ps: TestPlayer[] = [];
      for (let i = 0; i < 3; i++) ps.push(await registerPlayer(first));
      const [a, b, c] = ps as [TestPlayer, TestPlayer, TestPlayer];
      const post = (p: TestPlayer, board: string, body: unknown) => first.call('POST', `/api/v1/leaderboards/${board}`, { token: p.access_token, body });
      await post(a, 'arena', { score: 5, sub_score: 1 });
      await post(b, 'arena', { score: 5, sub_score: 2 });
      await post(c, 'golf', { score: 70 });
      await post(a, 'golf', { score: 71 });
      // Scores past 2^53 reach the table only from elsewhere (an import, incr sums); they order exactly.
      await sql`insert into leaderboard_entries (id, leaderboard_id, player_id, score, sub_score, updated_at) values
        (${first.ctx.ids.uuid()}, 'huge', ${a.player_id}, 4611686018427387905, 0, now()),
        (${first.ctx.ids.uuid()}, 'huge', ${b.player_id}, 4611686018427387904, 0, now()),
        (${first.ctx.ids.uuid()}, 'huge', ${c.player_id}, -9223372036854775808, 0, now())`.execute(first.ctx.db);
      const before = await first.call('GET', '/api/v1/leaderboards/arena', { token: a.access_token });
      await first.close();
      expect(first.logs.some((l) => l.event === 'leaderboards_flushed')).toBe(true);

      second = await startTestServer(SETTINGS, { database });
      const read = (board: string) => second!.call('GET', `/api/v1/leaderboards/${board}`, { token: a.access_token });
      expect((await read('arena')).body).toEqual(before.body);
      expect((await read('arena')).body.entries.map((e: { player_id: string }) => e.player_id)).toEqual([b.player_id, a.player_id]);
      // The board's rules come back with it: golf is lowest first.
      expect((await read('golf')).body.entries.map((e: { player_id: string }) => e.player_id)).toEqual([c.player_id, a.player_id]);
      expect((await read('huge')).body.entries.map((e: { player_id: string; rank: number }) => [e.player_id, e.rank])).toEqual([
        [a.player_id, 1],
        [b.player_id, 2],
        [c.player_id, 3],
      ]);
      expect(second.logs.find((l) => l.event === 'leaderboards_loaded')).toMatchObject({ entries: 7 });
    } finally {
      await second?.close();
      if (!second) await database.close();
    }
  });
});
