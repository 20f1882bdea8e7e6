import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gameDir, matchScript } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer } from './support/ws-client';

// A script that keeps what it builds in a global grows its worker past the
// worker's memory ceiling: the worker ends, its matches finish worker_lost,
// the other worker's matches never notice, and a new worker takes its place.
const game = gameDir({
  'match.lua': matchScript(
    'match_size = 1\nmax_players = 1\nquick_play = true\nHOARD = HOARD or {}\nBIG = BIG or string.rep("x", 1000000)',
    // Copies of one megabyte built once keep a hoarding tick well inside a
    // period; eight fresh string.rep calls took longer, and a match whose ticks
    // overrun a period is throttled (decision 0052), which would only slow the hoard.
    `function handle_input(id, input, state) if input.hoard then state.hoard = true end return state end
function tick(state)
  if state.hoard then for i = 1, 8 do HOARD[#HOARD + 1] = BIG .. i end end
  state.tick = state.tick + 1
  return state
end`,
  ),
});

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ match_workers: 2, match_worker_memory_mb: 64 }, { gameDir: game.dir });
});
afterAll(async () => {
  await s.close();
  game.remove();
});

async function playing() {
  const p = await connectPlayer(s);
  const joined = await p.socket.request('match.find_or_create', { mode: 'default' });
  expect(joined.type).toBe('match.joined');
  await p.socket.next('match.state', 10_000);
  return { ...p, matchId: joined.payload.match_id as string };
}

describe('a script worker that dies', () => {
  it('ends its matches with worker_lost, leaves the other worker alone, and is replaced', async () => {
    // New matches go to the worker holding fewer: a and c share one, b and d the other.
    const [a, b, c, d] = [await playing(), await playing(), await playing(), await playing()];
    b.socket.send({ type: 'match.input', payload: { hoard: true } });
    const lost = { match_id: b.matchId, result: { status: 'error', reason: 'worker_lost' } };
    expect((await b.socket.next('match.finished', 20_000)).payload).toEqual(lost);
    expect((await d.socket.next('match.finished', 5000)).payload).toEqual({ ...lost, match_id: d.matchId });
    expect(s.logs.find((l) => l.event === 'script_worker_lost')).toMatchObject({ reason: 'memory', matches: 2 });

    // The other worker's matches keep ticking and never hear of it.
    for (const p of [a, c]) {
      p.socket.frames.length = 0;
      const t0 = (await p.socket.next('match.state', 5000)).payload.tick;
      await p.socket.next((f) => f.type === 'match.state' && f.payload.tick >= t0 + 5, 5000);
      expect(p.socket.frames.some((f) => f.type === 'match.finished')).toBe(false);
    }

    // The record says why.
    let rec;
    for (let i = 0; i < 50; i++) {
      rec = await s.call('GET', `/api/v1/matches/${b.matchId}`, { token: b.token });
      if (rec.status === 200) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(rec!.body).toMatchObject({ status: 'finished', result: { status: 'error', reason: 'worker_lost' } });

    // Matches start and tick again on both workers, the replacement included.
    const [e, f] = [await playing(), await playing()];
    for (const p of [e, f]) await p.socket.next((fr) => fr.type === 'match.state' && fr.payload.tick >= 3, 5000);
    for (const p of [a, b, c, d, e, f]) p.socket.close();
  });
});
