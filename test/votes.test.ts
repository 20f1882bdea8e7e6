import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, expectErrorFrame, registerPlayer, type Frame, type TestSocket } from './support/ws-client';

const GAME = path.resolve(__dirname, 'fixtures/games/votes');

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ matchmaker_tick_ms: 50 }, { gameDir: GAME });
});
afterAll(async () => {
  await s.close();
});

type Player = { socket: TestSocket; playerId: string; token: string };
interface Council {
  players: [Player, Player, Player];
  matchId: string;
}

const OPTIONS = [
  { id: 'north', label: 'North Gate' },
  { id: 'south', label: 'South Gate' },
  { id: 'east', label: 'East Gate' },
];

/** Three players the matchmaker seats together in a fresh `council` match. */
async function council(): Promise<Council> {
  const players = [await connectPlayer(s), await connectPlayer(s), await connectPlayer(s)] as Council['players'];
  for (const p of players) expect((await p.socket.request('matchmaker.add', { mode: 'council' })).type).toBe('matchmaker.queued');
  const matched = await Promise.all(players.map((p) => p.socket.next('match.matched', 10_000)));
  return { players, matchId: matched[0]!.payload.match_id };
}

/** Asks the script for a vote through an input; resolves with the `match.vote_start` every player received. */
async function openVote(c: Council, config: Record<string, unknown>): Promise<Frame> {
  c.players[0].socket.send({ type: 'match.input', payload: { vote: { options: OPTIONS, ...config } } });
  const starts = await Promise.all(c.players.map((p) => p.socket.next('match.vote_start', 10_000)));
  for (const f of starts) expect(f.payload).toEqual(starts[0]!.payload);
  return starts[0]!;
}

function cast(p: Player, voteId: string, option: unknown): Promise<Frame> {
  return p.socket.request('vote.cast', { vote_id: voteId, option_id: option });
}

async function castOk(p: Player, voteId: string, option: unknown): Promise<void> {
  const reply = await cast(p, voteId, option);
  expect(reply).toMatchObject({ type: 'vote.cast_ok', payload: { success: true } });
}

/** The result push every player gets, and what the script's `vote_resolved` received. */
async function resolved(c: Council, voteId: string): Promise<{ result: any; script: any }> {
  const results = await Promise.all(c.players.map((p) => p.socket.next((f) => f.type === 'match.vote_result' && f.payload.vote_id === voteId, 10_000)));
  for (const f of results) expect(f.payload).toEqual(results[0]!.payload);
  const script = await c.players[0].socket.next((f) => f.type === 'match.resolved' && f.payload.vote_id === voteId, 10_000);
  return { result: results[0]!.payload, script: script.payload };
}

function leave(c: Council): void {
  for (const p of c.players) p.socket.close();
}

describe('a vote in a match', () => {
  it('plurality, live: start, a tally after every cast, the result, vote_resolved, and the row on both routes', async () => {
    const c = await council();
    const [a, b, d] = c.players;
    const start = await openVote(c, { template: 'gate', window_ms: 1500 });
    const voteId = start.payload.vote_id;
    expect(start.payload).toEqual({ vote_id: voteId, options: OPTIONS, window_ms: 1500, method: 'plurality' });

    await castOk(a, voteId, 'north');
    const tallies = await Promise.all(c.players.map((p) => p.socket.next('match.vote_tally')));
    for (const t of tallies) expect(t.payload).toMatchObject({ vote_id: voteId, tallies: { north: 1, south: 0, east: 0 }, total_votes: 1 });
    expect(tallies[0]!.payload.time_remaining_ms).toBeGreaterThan(0);
    expect(tallies[0]!.payload.time_remaining_ms).toBeLessThanOrEqual(1500);
    await castOk(b, voteId, 'north');
    await castOk(d, voteId, 'south');
    expect((await d.socket.next((f) => f.type === 'match.vote_tally' && f.payload.total_votes === 3)).payload.tallies).toEqual({ north: 2, south: 1, east: 0 });

    const { result, script } = await resolved(c, voteId);
    expect(result).toEqual({
      vote_id: voteId,
      winner: 'north',
      counts: { north: 2, south: 1, east: 0 },
      distribution: { north: 2 / 3, south: 1 / 3, east: 0 },
      total_votes: 3,
      turnout: 1,
    });
    expect(script).toMatchObject({ template: 'gate', winner: 'north', no_winner: false, total_votes: 3 });
    expect(script.votes_cast).toEqual({ [a.playerId]: 'north', [b.playerId]: 'north', [d.playerId]: 'south' });

    const one = await s.call('GET', `/api/v1/votes/${voteId}`, { token: a.token });
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({
      id: voteId,
      match_id: c.matchId,
      template: 'gate',
      method: 'plurality',
      visibility: 'live',
      status: 'resolved',
      options: OPTIONS,
      votes_cast: { [a.playerId]: 'north', [b.playerId]: 'north', [d.playerId]: 'south' },
      result: { winner: 'north', counts: { north: 2, south: 1, east: 0 }, total_votes: 3 },
      turnout: 1,
      eligible_count: 3,
      window_ms: 1500,
    });
    expect(Date.parse(one.body.closed_at)).toBeGreaterThanOrEqual(Date.parse(one.body.opened_at));
    const list = await s.call('GET', `/api/v1/matches/${c.matchId}/votes`, { token: b.token });
    expect(list.status).toBe(200);
    expect(list.body.votes).toEqual([one.body]);
    leave(c);
  });

  it('approval, weighted and ranked tally as their methods say', async () => {
    const c = await council();
    const [a, b, d] = c.players;
    // ready_up: each vote closes as soon as all three have voted.
    const ready = { window_type: 'ready_up', window_ms: 10_000 };

    const approval = (await openVote(c, { ...ready, method: 'approval', visibility: 'hidden' })).payload.vote_id;
    await castOk(a, approval, ['north', 'south']);
    await castOk(b, approval, ['south']);
    await castOk(d, approval, 'east');
    expect((await resolved(c, approval)).result).toMatchObject({ winner: 'south', counts: { north: 1, south: 2, east: 1 }, total_votes: 3 });

    const weighted = (await openVote(c, { ...ready, method: 'weighted', weights: { [a.playerId]: 3 } })).payload.vote_id;
    await castOk(a, weighted, 'east');
    await castOk(b, weighted, 'north');
    await castOk(d, weighted, 'north');
    expect((await resolved(c, weighted)).result).toMatchObject({ winner: 'east', counts: { north: 2, south: 0, east: 3 }, total_votes: 3 });

    const ranked = (await openVote(c, { ...ready, method: 'ranked' })).payload.vote_id;
    await castOk(a, ranked, ['east', 'south']);
    await castOk(b, ranked, ['south', 'north']);
    await castOk(d, ranked, 'south');
    // Three ballots cannot need a second round (the unit tests run the runoff); counts are first choices.
    const r = await resolved(c, ranked);
    expect(r.result).toMatchObject({ winner: 'south', counts: { north: 0, south: 2, east: 1 } });
    const row = await s.call('GET', `/api/v1/votes/${ranked}`, { token: a.token });
    expect(row.body.result.rounds).toEqual([{ north: 0, south: 2, east: 1 }]);
    expect(row.body.votes_cast).toEqual({ [a.playerId]: ['east', 'south'], [b.playerId]: ['south', 'north'], [d.playerId]: ['south'] });
    leave(c);
  });

  it('without quorum or consensus there is no winner: null on the wire, nil for the script, and a status', async () => {
    const c = await council();
    const [a, b, d] = c.players;
    const quorum = (await openVote(c, { window_ms: 600, quorum: 1 })).payload.vote_id;
    await castOk(a, quorum, 'north');
    await castOk(b, quorum, 'north');
    const q = await resolved(c, quorum);
    expect(q.result).toMatchObject({ winner: null, status: 'no_quorum', total_votes: 2, turnout: 2 / 3 });
    expect(q.script).toMatchObject({ no_winner: true, status: 'no_quorum' });
    expect('winner' in q.script).toBe(false);

    const consensus = (await openVote(c, { window_ms: 600, require_supermajority: true, supermajority: 0.75 })).payload.vote_id;
    await castOk(a, consensus, 'north');
    await castOk(b, consensus, 'north');
    await castOk(d, consensus, 'south');
    const k = await resolved(c, consensus);
    expect(k.result).toMatchObject({ winner: null, status: 'no_consensus', counts: { north: 2, south: 1, east: 0 } });
    expect(k.script).toMatchObject({ no_winner: true, status: 'no_consensus' });
    const row = await s.call('GET', `/api/v1/votes/${consensus}`, { token: a.token });
    expect(row.body.status).toBe('resolved');
    expect(row.body.result).toMatchObject({ winner: null, status: 'no_consensus' });
    leave(c);
  });

  it('counts a cast within 500 ms after the window closes, and refuses one after the grace', async () => {
    const c = await council();
    const [a, b] = c.players;
    const start = await openVote(c, { window_ms: 400 });
    const voteId = start.payload.vote_id;
    // The window has closed by the time this arrives (it opened before vote_start reached us).
    await new Promise((r) => setTimeout(r, 400 + 150));
    await castOk(a, voteId, 'east');
    const tally = await a.socket.next('match.vote_tally');
    expect(tally.payload.time_remaining_ms).toBe(0);
    const { result } = await resolved(c, voteId);
    expect(result).toMatchObject({ winner: 'east', total_votes: 1 });
    expectErrorFrame(await cast(b, voteId, 'north'), 'vote_closed', 'ws.request_failed');
    leave(c);
  });

  it('a voter may change their vote max_revotes times; the next change is rate_limited', async () => {
    const c = await council();
    const [a] = c.players;
    const voteId = (await openVote(c, { window_ms: 1000, max_revotes: 1 })).payload.vote_id;
    await castOk(a, voteId, 'north');
    await castOk(a, voteId, 'south');
    expectErrorFrame(await cast(a, voteId, 'east'), 'rate_limited', 'rate_limited');
    const { result } = await resolved(c, voteId);
    expect(result.counts).toEqual({ north: 0, south: 1, east: 0 });
    leave(c);
  });

  it('refuses casts outside a match, for unknown votes and options, and from players the vote excludes', async () => {
    const c = await council();
    const [a, b, d] = c.players;
    const voteId = (await openVote(c, { window_ms: 1500, voters: [a.playerId, b.playerId] })).payload.vote_id;
    const outsider = await connectPlayer(s);
    expectErrorFrame(await cast(outsider, voteId, 'north'), 'not_in_match', 'match.not_in_match');
    expectErrorFrame(await cast(a, '0190c1f7-4444-7000-8000-000000000004', 'north'), 'vote_not_found', 'ws.request_failed');
    expectErrorFrame(await cast(a, voteId, 'west'), 'invalid_option', 'ws.request_failed');
    expectErrorFrame(await cast(a, voteId, ['north']), 'invalid_option', 'ws.request_failed');
    expectErrorFrame(await cast(a, voteId, 5), 'invalid_option', 'ws.request_failed');
    expectErrorFrame(await a.socket.request('vote.cast', { vote_id: voteId }), 'missing_field', 'missing_field');
    expectErrorFrame(await cast(d, voteId, 'north'), 'not_eligible', 'ws.request_failed');
    await castOk(a, voteId, 'north');
    const { result } = await resolved(c, voteId);
    expect(result.turnout).toBe(0.5);
    outsider.socket.close();
    leave(c);
  });
});

describe('veto', () => {
  it('spends a token, cancels the vote for everyone, tells the script, and records it vetoed', async () => {
    const c = await council();
    const [a, b] = c.players;
    const voteId = (await openVote(c, { window_ms: 5000, veto_enabled: true })).payload.vote_id;
    await castOk(b, voteId, 'north');
    expect(await a.socket.request('vote.veto', { vote_id: voteId })).toMatchObject({ type: 'vote.veto_ok', payload: { success: true } });
    for (const p of c.players) {
      expect((await p.socket.next('match.vote_vetoed')).payload).toEqual({ vote_id: voteId, vetoed_by: a.playerId });
    }
    const script = await a.socket.next('match.resolved');
    expect(script.payload).toMatchObject({ vote_id: voteId, no_winner: true, status: 'vetoed', vetoed_by: a.playerId });
    expect(await a.socket.quiet('match.vote_result', 300)).toBe(true);
    expectErrorFrame(await cast(b, voteId, 'south'), 'vote_closed', 'ws.request_failed');
    const row = await s.call('GET', `/api/v1/votes/${voteId}`, { token: b.token });
    expect(row.body).toMatchObject({ status: 'vetoed', visibility: 'live', votes_cast: { [b.playerId]: 'north' } });

    // One token each in this mode: the second veto finds none left.
    const next = (await openVote(c, { window_ms: 800, veto_enabled: true })).payload.vote_id;
    expectErrorFrame(await a.socket.request('vote.veto', { vote_id: next }), 'no_veto_tokens', 'ws.request_failed');
    await resolved(c, next);
    const plain = (await openVote(c, { window_ms: 800 })).payload.vote_id;
    expectErrorFrame(await b.socket.request('vote.veto', { vote_id: plain }), 'veto_disabled', 'ws.request_failed');
    await resolved(c, plain);
    leave(c);
  });
});

describe('visibility and the routes', () => {
  it('hidden: no tallies while open; votes_cast withheld from a hidden vote that did not resolve, on both routes', async () => {
    const c = await council();
    const [a, b] = c.players;
    const hidden = (await openVote(c, { window_ms: 700, visibility: 'hidden' })).payload.vote_id;
    await castOk(a, hidden, 'south');
    expect(await a.socket.quiet('match.vote_tally', 300)).toBe(true);
    expect((await resolved(c, hidden)).result).toMatchObject({ winner: 'south' });
    const shown = await s.call('GET', `/api/v1/votes/${hidden}`, { token: a.token });
    expect(shown.body).toMatchObject({ visibility: 'hidden', status: 'resolved', votes_cast: { [a.playerId]: 'south' } });

    const vetoed = (await openVote(c, { window_ms: 5000, visibility: 'hidden', veto_enabled: true })).payload.vote_id;
    await castOk(a, vetoed, 'north');
    await b.socket.request('vote.veto', { vote_id: vetoed });
    await a.socket.next('match.vote_vetoed');
    // Finishing the match while a hidden vote is open cancels it, also without showing who chose what.
    const cancelled = (await openVote(c, { window_ms: 5000, visibility: 'hidden' })).payload.vote_id;
    await castOk(a, cancelled, 'east');
    a.socket.send({ type: 'match.input', payload: { finish: true } });
    await a.socket.next('match.finished', 10_000);

    const withheld = async (id: string, status: string) => {
      const one = await waitForVote(id, a.token);
      expect(one).toMatchObject({ id, visibility: 'hidden', status });
      expect('votes_cast' in one).toBe(false);
      return one;
    };
    const v = await withheld(vetoed, 'vetoed');
    const x = await withheld(cancelled, 'cancelled');
    const list = await s.call('GET', `/api/v1/matches/${c.matchId}/votes`, { token: b.token });
    expect(list.status).toBe(200);
    expect(list.body.votes.map((row: any) => row.id)).toEqual([cancelled, vetoed, hidden]);
    expect(list.body.votes[0]).toEqual(x);
    expect(list.body.votes[1]).toEqual(v);
    expect(list.body.votes[2].votes_cast).toEqual({ [a.playerId]: 'south' });
    leave(c);
  });

  it('lists a match\'s votes for its players only, live or finished; an unknown vote is 404', async () => {
    const c = await council();
    const [a] = c.players;
    const stranger = await registerPlayer(s);
    const voteId = (await openVote(c, { window_ms: 300 })).payload.vote_id;
    await resolved(c, voteId);
    // Live: the roster of the running match.
    expect((await s.call('GET', `/api/v1/matches/${c.matchId}/votes`, { token: a.token })).body.votes).toHaveLength(1);
    const refused = await s.call('GET', `/api/v1/matches/${c.matchId}/votes`, { token: stranger.token });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('forbidden');

    a.socket.send({ type: 'match.input', payload: { finish: true } });
    await a.socket.next('match.finished', 10_000);
    // Finished: the record's roster, once the node has forgotten the match.
    await waitFor(async () => (await s.call('GET', `/api/v1/matches/${c.matchId}`, { token: a.token })).status === 200);
    leave(c);
    expect((await s.call('GET', `/api/v1/matches/${c.matchId}/votes`, { token: c.players[2].token })).status).toBe(200);
    expect((await s.call('GET', `/api/v1/matches/${c.matchId}/votes`, { token: stranger.token })).status).toBe(403);
    expect((await s.call('GET', '/api/v1/matches/0190c1f7-4444-7000-8000-000000000009/votes', { token: a.token })).status).toBe(403);

    for (const id of ['0190c1f7-4444-7000-8000-000000000004', 'not-a-uuid']) {
      const miss = await s.call('GET', `/api/v1/votes/${id}`, { token: a.token });
      expect(miss.status).toBe(404);
      expect(miss.body.error.code).toBe('vote.not_found');
    }
    // Any signed-in player may read one vote by its id.
    expect((await s.call('GET', `/api/v1/votes/${voteId}`, { token: stranger.token })).status).toBe(200);
  });
});

async function waitFor(check: () => Promise<boolean>, ms = 5000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A row written when its vote closed, read once it is there. */
async function waitForVote(id: string, token: string): Promise<any> {
  let body: any;
  await waitFor(async () => {
    const res = await s.call('GET', `/api/v1/votes/${id}`, { token });
    body = res.body;
    return res.status === 200;
  });
  return body;
}
