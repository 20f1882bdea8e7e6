import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, expectErrorFrame, TestSocket } from './support/ws-client';

const DEMO = path.resolve(__dirname, '../examples/demo-game');

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ matchmaker_tick_ms: 50 }, { gameDir: DEMO });
});
afterAll(async () => {
  await s.close();
});


type Player = { socket: TestSocket; playerId: string; token: string };

async function matchedPair(): Promise<{ a: Player; b: Player; matchId: string }> {
  const a = await connectPlayer(s);
  const b = await connectPlayer(s);
  const qa = await a.socket.request('matchmaker.add', { mode: 'arena', properties: {} });
  const qb = await b.socket.request('matchmaker.add', { mode: 'arena' });
  expect(qa.payload).toMatchObject({ status: 'pending', players_needed: 2, already_queued: false });
  expect(qb.payload.ticket_id).not.toBe(qa.payload.ticket_id);
  const ma = await a.socket.next('match.matched');
  const mb = await b.socket.next('match.matched');
  expect(ma.payload).toEqual(mb.payload);
  expect('cid' in ma).toBe(false);
  return { a, b, matchId: ma.payload.match_id };
}

describe('two players, end to end', () => {
  it('register → connect → matchmaker → matched → input applied → finished → record', async () => {
    const { a, b, matchId } = await matchedPair();
    const matched = { match_id: matchId, players: [a.playerId, b.playerId] };
    expect(matched.players.sort()).toEqual([a.playerId, b.playerId].sort());

    // match.state arrives every tick with each player's own view.
    const first = await a.socket.next('match.state');
    expect(first.payload.you).toBe(a.playerId);
    const seatA = first.payload.players[a.playerId];
    const dx = seatA.x === 0 ? 1 : -1;
    a.socket.send({ type: 'match.input', payload: { dx, dy: 0 } });
    const moved = await a.socket.next((f) => f.type === 'match.state' && f.payload.players[a.playerId].x === seatA.x + dx);
    expect(moved.payload.players[a.playerId].y).toBe(seatA.y);
    // The other player sees the same move in its own view.
    const seen = await b.socket.next((f) => f.type === 'match.state' && f.payload.players[a.playerId].x === seatA.x + dx);
    expect(seen.payload.you).toBe(b.playerId);

    // b leaves: the arena script declares a as the winner by forfeit.
    const left = await b.socket.request('match.leave');
    expect(left.payload).toEqual({ success: true });
    const fin = await a.socket.next('match.finished');
    expect(fin.payload).toEqual({ match_id: matchId, result: { winner: a.playerId, reason: 'forfeit' } });

    // The record lands (written right after the finish), without a roster.
    let rec: any;
    for (let i = 0; i < 50 && !rec; i++) {
      const res = await s.call('GET', `/api/v1/matches/${matchId}`, { token: a.token });
      if (res.status === 200) rec = res.body;
      else await new Promise((r) => setTimeout(r, 50));
    }
    expect(rec).toMatchObject({ id: matchId, mode: 'arena', status: 'finished', result: { winner: a.playerId, reason: 'forfeit' } });
    expect(rec.started_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(rec.finished_at).toMatch(/Z$/);
    expect(rec).not.toHaveProperty('players');
    expect(rec).not.toHaveProperty('metadata');
    // The result moved the players' counters in the same transaction (not exposed over REST).
    const stats = await s.ctx.db.selectFrom('player_stats').select(['player_id', 'games_played', 'wins', 'losses']).where('player_id', 'in', [a.playerId, b.playerId]).execute();
    const of = (id: string) => stats.find((r) => r.player_id === id);
    expect(of(a.playerId)).toMatchObject({ games_played: 1, wins: 1, losses: 0 });
    expect(of(b.playerId)).toMatchObject({ games_played: 1, wins: 0, losses: 0 });
    a.socket.close();
    b.socket.close();
  });
});

describe('live matches: listing, find_or_create, join', () => {
  it('find_or_create opens a lobby and converges later callers on it; arena is not quick-play', async () => {
    const a = await connectPlayer(s);
    const b = await connectPlayer(s);
    const ja = await a.socket.request('match.find_or_create', { mode: 'lobby', ctx: { name: 'ann' } });
    expect(ja.type).toBe('match.joined');
    expect(ja.payload).toMatchObject({ mode: 'lobby', status: 'running', player_count: 1, max_players: 16, listed: true, joinable: true, players: [a.playerId] });
    // The lobby script greets only the joiner, as module.message.
    expect((await a.socket.next('module.message')).payload).toEqual({ module: 'lua', message: { welcome: 'hello ann' } });
    const jb = await b.socket.request('match.find_or_create', { mode: 'lobby' });
    expect(jb.payload.match_id).toBe(ja.payload.match_id);
    expect(jb.payload.players).toEqual([a.playerId, b.playerId]);

    expectErrorFrame(await a.socket.request('match.find_or_create', { mode: 'arena' }), 'quick_play_disabled', 'ws.request_failed');
    expectErrorFrame(await a.socket.request('match.find_or_create', { mode: 'nope' }), 'not_found', 'ws.request_failed');
    expectErrorFrame(await a.socket.request('match.find_or_create', { mode: 5 }), 'unknown_request', 'ws.request_failed');
    expectErrorFrame(await a.socket.request('match.find_or_create', {}), 'unknown_type', 'unknown_type');

    // Shared view: both get the same match.state; a script broadcast reaches both.
    a.socket.send({ type: 'match.input', payload: { wave: true } });
    expect((await b.socket.next('match.wave')).payload).toEqual({ from: a.playerId });
    const st = await b.socket.next((f) => f.type === 'match.state' && f.payload.waves === 1);
    expect(Object.keys(st.payload.members).sort()).toEqual([a.playerId, b.playerId].sort());

    // Listing: WS and REST agree; no roster anywhere; arena (unlisted) never appears.
    const wsList = await a.socket.request('match.list', { mode: 'lobby' });
    const entry = wsList.payload.matches.find((m: any) => m.match_id === ja.payload.match_id);
    expect(entry).toEqual({ match_id: ja.payload.match_id, mode: 'lobby', status: 'running', player_count: 2, max_players: 16, joinable: true });
    const rest = await s.call('GET', '/api/v1/matches/live?has_capacity=true&joinable=true', { token: a.token });
    expect(rest.status).toBe(200);
    expect(rest.body.matches).toContainEqual(entry);
    expect(rest.body.matches.every((m: any) => m.mode === 'lobby' && !('players' in m) && !('listed' in m))).toBe(true);
    expect((await s.call('GET', '/api/v1/matches/live?mode=arena', { token: a.token })).body.matches).toEqual([]);
    expect((await s.call('GET', '/api/v1/matches/live?joinable=false', { token: a.token })).body.matches).toEqual([]);
    expect((await s.call('GET', '/api/v1/matches/live')).status).toBe(401);

    // The script closes the match: joins are then match_locked, listings say joinable false.
    a.socket.send({ type: 'match.input', payload: { close: true } });
    await a.socket.next((f) => f.type === 'match.state');
    await a.socket.next((f) => f.type === 'match.state');
    const c = await connectPlayer(s);
    expectErrorFrame(await c.socket.request('match.join', { match_id: ja.payload.match_id }), 'match_locked', 'match.locked');
    const closed = await s.call('GET', '/api/v1/matches/live?joinable=false', { token: a.token });
    expect(closed.body.matches.map((m: any) => m.match_id)).toContain(ja.payload.match_id);
    for (const p of [a, b, c]) p.socket.close();
  });

  it('match.join answers every failure with its reason', async () => {
    const { a, b, matchId } = await matchedPair();
    const c = await connectPlayer(s);
    expectErrorFrame(await c.socket.request('match.join', { match_id: '0190c1f4-1111-7000-8000-000000000001' }), 'match_not_found', 'match.not_found');
    expectErrorFrame(await c.socket.request('match.join', { match_id: 42 }), 'match_not_found', 'match.not_found');
    expectErrorFrame(await c.socket.request('match.join', {}), 'unknown_type', 'unknown_type');
    expectErrorFrame(await c.socket.request('match.join'), 'unknown_type', 'unknown_type');
    expectErrorFrame(await c.socket.request('match.join', { match_id: matchId }), 'match_full', 'match.full');
    // Join context bounds, checked before the match's own checks.
    const ctxCases: [unknown, string][] = [
      [null, 'invalid_join_ctx'],
      [[1], 'invalid_join_ctx'],
      [Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`k${i}`, 1])), 'join_ctx_too_many_keys'],
      [{ ['k'.repeat(65)]: 1 }, 'join_ctx_key_too_long'],
      [{ k: 'v'.repeat(257) }, 'join_ctx_value_too_long'],
      [{ k: 1.5 }, 'invalid_join_ctx_value'],
      [{ k: null }, 'invalid_join_ctx_value'],
      [{ k: { nested: 1 } }, 'invalid_join_ctx_value'],
    ];
    for (const [ctx, reason] of ctxCases) {
      const f = await c.socket.request('match.join', { match_id: matchId, ctx });
      expectErrorFrame(f, reason, 'ws.request_failed');
      expect(f.payload.error.details).toEqual({ reason });
    }
    for (const p of [a, b, c]) p.socket.close();
  });

  it('match.list validates its filters and ignores an over-long mode', async () => {
    const { socket } = await connectPlayer(s);
    expectErrorFrame(await socket.request('match.list', { mode: null }), 'invalid_mode_filter', 'ws.request_failed');
    expectErrorFrame(await socket.request('match.list', { has_capacity: 'yes' }), 'invalid_has_capacity_filter', 'ws.request_failed');
    expectErrorFrame(await socket.request('match.list', { joinable: 1 }), 'invalid_joinable_filter', 'ws.request_failed');
    expectErrorFrame(await socket.request('match.list', 'x'), 'unknown_type', 'unknown_type');
    const all = await socket.request('match.list', {});
    const long = await socket.request('match.list', { mode: 'm'.repeat(65) });
    expect(long.payload.matches).toEqual(all.payload.matches);
    socket.close();
  });
});

describe('match.input and match.leave', () => {
  it('answers input outside a match with the not_in_match notice (no cid) and bad payloads invalid_payload', async () => {
    const { socket } = await connectPlayer(s);
    socket.send({ type: 'match.input', cid: 'i1', payload: { dx: 1 } });
    const notice = await socket.next('error');
    expect(notice).toEqual({
      type: 'error',
      payload: { type: 'match.input', reason: 'not_in_match', error: { code: 'match.not_in_match', message: expect.any(String), details: {} } },
    });
    for (const payload of ['str', [1], { data: 'not json' }, { data: '[1]' }]) {
      const f = await socket.request('match.input', payload);
      expectErrorFrame(f, 'invalid_payload', 'invalid_payload');
    }
    // A type that needs a payload, sent without one, is unknown_type.
    expectErrorFrame(await socket.request('match.input'), 'unknown_type', 'unknown_type');
    // match.leave is always a success, in a match or not.
    expect((await socket.request('match.leave')).payload).toEqual({ success: true });
    socket.close();
  });

  it('unwraps the legacy {data: ...} input shapes', async () => {
    const { a, b } = await matchedPair();
    const first = await a.socket.next('match.state');
    const start = first.payload.players[a.playerId];
    const step = start.x === 0 ? 1 : -1;
    a.socket.send({ type: 'match.input', payload: { data: { dx: step } } });
    a.socket.send({ type: 'match.input', payload: { data: JSON.stringify({ dx: step }) } });
    await a.socket.next((f) => f.type === 'match.state' && f.payload.players[a.playerId].x === start.x + 2 * step);
    a.socket.close();
    b.socket.close();
  });
});

describe('REST match records', () => {
  it('lists finished records newest first with filters, limit clamping and a before cursor', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { a, b, matchId } = await matchedPair();
      await b.socket.request('match.leave');
      await a.socket.next('match.finished');
      ids.push(matchId);
      a.socket.close();
      b.socket.close();
    }
    const { token } = await connectPlayer(s);
    let list: any[] = [];
    for (let i = 0; i < 50; i++) {
      list = (await s.call('GET', '/api/v1/matches?mode=arena', { token })).body.matches;
      if (ids.every((id) => list.some((m) => m.id === id))) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const positions = ids.map((id) => list.findIndex((m) => m.id === id));
    expect(positions[2]).toBeLessThan(positions[1]!);
    expect(positions[1]).toBeLessThan(positions[0]!);
    expect(list.every((m) => m.mode === 'arena' && m.status === 'finished' && !('players' in m))).toBe(true);
    expect((await s.call('GET', '/api/v1/matches?limit=1', { token })).body.matches).toHaveLength(1);
    expect((await s.call('GET', '/api/v1/matches?limit=0', { token })).body.matches).toHaveLength(1);
    expect((await s.call('GET', '/api/v1/matches?limit=abc', { token })).body.matches.length).toBeGreaterThanOrEqual(3);
    expect((await s.call('GET', '/api/v1/matches?status=running', { token })).body.matches).toEqual([]);
    expect((await s.call('GET', '/api/v1/matches?mode=lobby', { token })).body.matches).toEqual([]);
    const older = (await s.call('GET', `/api/v1/matches?mode=arena&before=${ids[2]}`, { token })).body.matches;
    expect(older.map((m: any) => m.id)).not.toContain(ids[2]);
    expect(older.map((m: any) => m.id)).toContain(ids[1]);
    const miss = await s.call('GET', '/api/v1/matches/0190c1f4-1111-7000-8000-000000000001', { token });
    expect(miss.status).toBe(404);
    expect(miss.body.error.code).toBe('match.not_found');
    expect((await s.call('GET', '/api/v1/matches/not-a-uuid', { token })).body.error.code).toBe('match.not_found');
    expect((await s.call('GET', '/api/v1/matches')).status).toBe(401);
  });
});

describe('match record pages', () => {
  it('walk every record exactly once when matches end in another order than they started', async () => {
    // Five matches started in id order (ids are made at start) but finished in reverse order,
    // each a second apart, as long and short matches do.
    const mode = `pages_${Date.now().toString(36)}`;
    const base = Date.parse('2026-01-01T00:00:00Z');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(s.ctx.ids.uuid());
    for (let i = 0; i < 5; i++) {
      await s.ctx.db
        .insertInto('match_records')
        .values({ id: ids[i]!, mode, status: 'finished', players: JSON.stringify([]), result: JSON.stringify({}), metadata: JSON.stringify({}), started_at: new Date(base), finished_at: new Date(base + (5 - i) * 1000), inserted_at: new Date(base + (5 - i) * 1000) } as never)
        .execute();
    }
    const { token } = await connectPlayer(s);
    const seen: string[] = [];
    let before = '';
    for (let page = 0; page < 10; page++) {
      const got = (await s.call('GET', `/api/v1/matches?mode=${mode}&limit=2${before}`, { token })).body.matches as any[];
      if (got.length === 0) break;
      seen.push(...got.map((m) => m.id));
      before = `&before=${got.at(-1).id}`;
    }
    // Newest record first: the one that finished last, whose id is the oldest.
    expect(seen).toEqual([...ids]);
  });
});

describe('one player, two sockets, one match', () => {
  it('keeps the player in the match until the last socket closes', async () => {
    const p = await connectPlayer(s);
    const second = await TestSocket.open(s);
    await second.request('session.connect', { token: p.token });
    const joined = await p.socket.request('match.find_or_create', { mode: 'lobby' });
    const matchId = joined.payload.match_id;
    // Both sockets see the player's match; input from the second socket reaches it.
    await second.next('match.state');
    second.send({ type: 'match.input', payload: { wave: true } });
    await p.socket.next((f) => f.type === 'match.state' && f.payload.waves === 1);
    const live = async () => (await s.call('GET', '/api/v1/matches/live?mode=lobby', { token: p.token })).body.matches.map((m: any) => m.match_id);
    p.socket.close();
    await p.socket.closed;
    await second.next('match.state');
    expect(await live()).toContain(matchId);
    second.close();
    await second.closed;
    let ids: string[] = [matchId];
    for (let i = 0; i < 50 && ids.includes(matchId); i++) {
      await new Promise((r) => setTimeout(r, 20));
      const other = await registerProbe();
      ids = (await s.call('GET', '/api/v1/matches/live?mode=lobby', { token: other })).body.matches.map((m: any) => m.match_id);
    }
    expect(ids).not.toContain(matchId);
  });
});

let probeToken: string | null = null;
async function registerProbe(): Promise<string> {
  probeToken ??= (await connectPlayer(s)).token;
  return probeToken;
}
