import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, type Frame, type TestSocket } from './support/ws-client';

const DEMO = path.resolve(__dirname, '../examples/demo-game');

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ matchmaker_tick_ms: 50 }, { gameDir: DEMO });
});
afterAll(async () => {
  await s.close();
});

function expectError(f: Frame, reason: string, code: string) {
  expect(f.type).toBe('error');
  expect(f.payload.reason).toBe(reason);
  expect(f.payload.error.code).toBe(code);
}

async function matchedPair(): Promise<{ a: { socket: TestSocket; playerId: string }; b: { socket: TestSocket; playerId: string }; matchId: string }> {
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
    a.socket.close();
    b.socket.close();
  });
});
