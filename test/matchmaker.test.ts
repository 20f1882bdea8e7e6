import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LiveHost } from '../host/realtime/live';
import { gameDir, matchScript } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, expectErrorFrame, registerPlayer } from './support/ws-client';

const game = gameDir({
  'config.lua': 'return { duo = "duo.lua", ranked = "ranked.lua", broken = "broken.lua" }',
  'duo.lua': matchScript('match_size = 2'),
  'ranked.lua': matchScript('match_size = 2\nstrategy = "skill_based"'),
  'broken.lua': matchScript('match_size = 2', 'function init(config) error("no init for you") end'),
});

/** Wall clock plus a skew the test can move, so waiting time can pass instantly. */
let skew = 0;
const clock = { now: () => Date.now() + skew };

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer(
    {
      matchmaker_tick_ms: 40,
      // Widening by a minute per step and a long expiry: only the moved clock widens a window.
      matchmaker_skill_widen_ms: 60_000,
      matchmaker_max_wait_ms: 600_000,
      ws_idle_timeout_ms: 3_600_000,
    },
    { gameDir: game.dir, clock },
  );
});
afterAll(async () => {
  await s.close();
  game.remove();
});


const tick = () => new Promise((r) => setTimeout(r, 120));

describe('REST tickets', () => {
  it('queues, repeats the live ticket, shows it to its owner only, and cancels', async () => {
    const a = await registerPlayer(s);
    const b = await registerPlayer(s);
    const post = await s.call('POST', '/api/v1/matchmaker', { token: a.token, body: { mode: 'ranked', properties: { skill: -5000 } } });
    expect(post.status).toBe(200);
    expect(post.body).toEqual({ ticket_id: expect.any(String), status: 'pending', players_needed: 2, already_queued: false });
    const again = await s.call('POST', '/api/v1/matchmaker', { token: a.token, body: { mode: 'ranked' } });
    expect(again.body).toEqual({ ...post.body, already_queued: true });
    const id = post.body.ticket_id;

    const mine = await s.call('GET', `/api/v1/matchmaker/${id}`, { token: a.token });
    expect(mine.body).toEqual({ id, mode: 'ranked', status: 'pending', properties: { skill: -5000 }, submitted_at: expect.any(Number) });
    // Another player's ticket is indistinguishable from an unknown one.
    const theirs = await s.call('GET', `/api/v1/matchmaker/${id}`, { token: b.token });
    const unknown = await s.call('GET', '/api/v1/matchmaker/0190c1f3-0000-7000-8000-00000000a001', { token: a.token });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('matchmaker.ticket_not_found');
    expect({ status: theirs.status, error: theirs.body.error }).toEqual({ status: unknown.status, error: unknown.body.error });
    const deleteTheirs = await s.call('DELETE', `/api/v1/matchmaker/${id}`, { token: b.token });
    expect({ status: deleteTheirs.status, error: deleteTheirs.body.error }).toEqual({ status: unknown.status, error: unknown.body.error });
    expect((await s.call('GET', `/api/v1/matchmaker/${id}`, { token: a.token })).status).toBe(200);
    expect((await s.call('DELETE', '/api/v1/matchmaker/nope', { token: a.token })).body.error.code).toBe('matchmaker.ticket_not_found');

    const del = await s.call('DELETE', `/api/v1/matchmaker/${id}`, { token: a.token });
    expect(del.body).toEqual({ success: true });
    expect((await s.call('GET', `/api/v1/matchmaker/${id}`, { token: a.token })).status).toBe(404);
    expect((await s.call('GET', `/api/v1/matchmaker/${id}`)).status).toBe(401);
  });

  it('answers unknown modes, a missing mode (no default mode here) and bad properties', async () => {
    const a = await registerPlayer(s);
    for (const body of [{ mode: 'nope' }, { mode: 'x'.repeat(65) }, {}, { mode: 7 }]) {
      const res = await s.call('POST', '/api/v1/matchmaker', { token: a.token, body });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('matchmaker.unknown_mode');
    }
  });

  it("takes a ticket as Unity's SDK sends it: properties as a string (empty, or JSON text), a party list, on both transports", async () => {
    const cases: [unknown, Record<string, unknown>][] = [
      ['', {}],
      ['{"skill":1234,"region":"eu"}', { skill: 1234, region: 'eu' }],
      ['not json', {}],
      ['[1,2]', {}],
      [[1], {}],
      [7, {}],
      [true, {}],
      [null, {}],
    ];
    for (const [properties, expected] of cases) {
      const a = await registerPlayer(s);
      // The exact shape of the SDK's request: JsonUtility writes every field, the party included.
      const raw = `{"mode":"ranked","properties":${JSON.stringify(properties)},"party":[]}`;
      const post = await s.call('POST', '/api/v1/matchmaker', { token: a.token, body: raw });
      expect(post.status, `${raw} ${JSON.stringify(post.body)}`).toBe(200);
      const ticket = await s.call('GET', `/api/v1/matchmaker/${post.body.ticket_id}`, { token: a.token });
      expect(ticket.body.properties).toEqual(expected);
      await s.call('DELETE', `/api/v1/matchmaker/${post.body.ticket_id}`, { token: a.token });
    }
    const b = await connectPlayer(s);
    const q = await b.socket.request('matchmaker.add', { mode: 'ranked', properties: '{"skill":42}', party: [] });
    expect(q.type).toBe('matchmaker.queued');
    const ticket = await s.call('GET', `/api/v1/matchmaker/${q.payload.ticket_id}`, { token: b.token });
    expect(ticket.body.properties).toEqual({ skill: 42 });
    expect((await b.socket.request('matchmaker.remove', { ticket_id: q.payload.ticket_id })).type).toBe('matchmaker.removed');
    b.socket.close();
  });
});

describe('WebSocket frames', () => {
  it('answers matchmaker.add and matchmaker.remove failures with their reasons', async () => {
    const a = await connectPlayer(s);
    const b = await connectPlayer(s);
    expectErrorFrame(await a.socket.request('matchmaker.add', { mode: 'nope' }), 'unknown_mode', 'matchmaker.unknown_mode', 'matchmaker.add');
    expectErrorFrame(await a.socket.request('matchmaker.add', { mode: 3 }), 'unknown_mode', 'matchmaker.unknown_mode', 'matchmaker.add');
    expectErrorFrame(await a.socket.request('matchmaker.add', {}), 'unknown_mode', 'matchmaker.unknown_mode', 'matchmaker.add');
    expectErrorFrame(await a.socket.request('matchmaker.add', 'duo'), 'invalid_payload', 'invalid_payload');

    const q = await a.socket.request('matchmaker.add', { mode: 'ranked', properties: { skill: 90_000 } });
    const id = q.payload.ticket_id;
    const notOwner = await b.socket.request('matchmaker.remove', { ticket_id: id });
    const missing = await b.socket.request('matchmaker.remove', { ticket_id: '0190c1f3-0000-7000-8000-00000000a001' });
    expectErrorFrame(missing, 'not_found', 'ws.request_failed', 'matchmaker.remove');
    expect(missing.payload.error.details).toEqual({ reason: 'not_found' });
    // Another player's ticket answers exactly as an unknown one.
    expect(notOwner.payload).toEqual(missing.payload);
    expectErrorFrame(await b.socket.request('matchmaker.remove', {}), 'unknown_type', 'unknown_type');
    expectErrorFrame(await b.socket.request('matchmaker.remove', { ticket_id: 5 }), 'invalid_payload', 'invalid_payload');
    const removed = await a.socket.request('matchmaker.remove', { ticket_id: id });
    expect(removed).toEqual({ type: 'matchmaker.removed', cid: removed.cid, payload: { success: true } });
    a.socket.close();
    b.socket.close();
  });

  it('replies without a cid to an add sent without one', async () => {
    const a = await connectPlayer(s);
    a.socket.send({ type: 'matchmaker.add', payload: { mode: 'ranked', properties: { skill: 77_000 } } });
    const q = await a.socket.next('matchmaker.queued');
    expect('cid' in q).toBe(false);
    await a.socket.request('matchmaker.remove', { ticket_id: q.payload.ticket_id });
    a.socket.close();
  });
});

describe('strategies', () => {
  it('fill groups in queue order and leaves the odd one waiting; a REST ticket matches like a socket one', async () => {
    const a = await connectPlayer(s);
    const b = await connectPlayer(s);
    const c = await connectPlayer(s);
    // a queues over REST (its socket still receives the outcome).
    await s.call('POST', '/api/v1/matchmaker', { token: a.token, body: { mode: 'duo' } });
    await b.socket.request('matchmaker.add', { mode: 'duo' });
    const ma = await a.socket.next('match.matched');
    const mb = await b.socket.next('match.matched');
    expect(mb.payload).toEqual(ma.payload);
    expect([...ma.payload.players].sort()).toEqual([a.playerId, b.playerId].sort());
    // Both are already in the match: input from either lands in the shared state.
    a.socket.send({ type: 'match.input', payload: { n: 1 } });
    await b.socket.next((f) => f.type === 'match.state' && f.payload.inputs.includes(1));

    const qc = await c.socket.request('matchmaker.add', { mode: 'duo' });
    await tick();
    expect(await c.socket.quiet('match.matched', 150)).toBe(true);
    expect((s.ctx.live.matchmaker.samples() as Record<string, any>).duo).toMatchObject({ waiting: 1 });
    expect((await s.call('GET', `/api/v1/matchmaker/${qc.payload.ticket_id}`, { token: c.token })).status).toBe(200);
    await c.socket.request('matchmaker.remove', { ticket_id: qc.payload.ticket_id });
    for (const p of [a, b, c]) p.socket.close();
  });

  it('skill_based pairs close skills at once and far ones only after the window widened', async () => {
    const low = await connectPlayer(s);
    const near = await connectPlayer(s);
    const far = await connectPlayer(s);
    await low.socket.request('matchmaker.add', { mode: 'ranked', properties: { skill: 1000 } });
    await far.socket.request('matchmaker.add', { mode: 'ranked', properties: { skill: 1300 } });
    await tick();
    // Spread 300 > 200: nobody matched yet.
    expect((s.ctx.live.matchmaker.samples() as Record<string, any>).ranked.waiting).toBe(2);
    await near.socket.request('matchmaker.add', { mode: 'ranked', properties: { skill: 1150 } });
    // 1000 and 1150 pair (spread 150); 1300 keeps waiting.
    const m1 = await low.socket.next('match.matched');
    const m2 = await near.socket.next('match.matched');
    expect(m1.payload).toEqual(m2.payload);
    await tick();
    expect(await far.socket.quiet('match.matched', 100)).toBe(true);

    const partner = await connectPlayer(s);
    await partner.socket.request('matchmaker.add', { mode: 'ranked', properties: { skill: 1590 } });
    await tick();
    expect(await far.socket.quiet('match.matched', 100)).toBe(true);
    // Two minutes of waiting widen the window by two steps: 200 + 2 * 50 = 300 >= 290.
    skew += 120_000;
    const m3 = await far.socket.next('match.matched');
    expect([...m3.payload.players].sort()).toEqual([far.playerId, partner.playerId].sort());
    for (const p of [low, near, far, partner]) p.socket.close();
  });
});

describe('failures and expiry', () => {
  it('gives up on a group whose match cannot start after three attempts', async () => {
    const a = await connectPlayer(s);
    const b = await connectPlayer(s);
    await a.socket.request('matchmaker.add', { mode: 'broken' });
    await b.socket.request('matchmaker.add', { mode: 'broken' });
    expect((await a.socket.next('match.matchmaker_failed')).payload).toEqual({ reason: 'match_start_failed' });
    expect((await b.socket.next('match.matchmaker_failed')).payload).toEqual({ reason: 'match_start_failed' });
    expect(s.logs.filter((l) => l.event === 'matchmaker_start_failed').length).toBeGreaterThanOrEqual(3);
    a.socket.close();
    b.socket.close();
  });

  it('expires tickets after matchmaker_max_wait_ms with match.matchmaker_expired', async () => {
    const a = await connectPlayer(s);
    const q = await a.socket.request('matchmaker.add', { mode: 'duo' });
    skew += 600_000;
    const f = await a.socket.next('match.matchmaker_expired');
    expect(f.payload).toEqual({ ticket_id: q.payload.ticket_id });
    expect((await s.call('GET', `/api/v1/matchmaker/${q.payload.ticket_id}`, { token: a.token })).status).toBe(404);
    a.socket.close();
  });

  it('answers queue_full once the node queue is at matchmaker_max_queue', async () => {
    const small = await startTestServer({ matchmaker_max_queue: 1, matchmaker_tick_ms: 60_000 }, { gameDir: game.dir });
    try {
      const a = await connectPlayer(small);
      const b = await connectPlayer(small);
      await a.socket.request('matchmaker.add', { mode: 'duo' });
      expectErrorFrame(await b.socket.request('matchmaker.add', { mode: 'duo' }), 'queue_full', 'matchmaker.queue_full', 'matchmaker.add');
      const rest = await small.call('POST', '/api/v1/matchmaker', { token: b.token, body: { mode: 'duo' } });
      expect(rest.status).toBe(503);
      expect(rest.body.error.code).toBe('matchmaker.queue_full');
      // The sample is computed on the tick; read it without touching the queue.
      (small.ctx.live as LiveHost).matchmaker.tick();
      expect(small.ctx.live.matchmaker.samples()).toEqual({ duo: { waiting: 1, oldest_wait_ms: expect.any(Number), average_wait_ms: expect.any(Number) } });
      a.socket.close();
      b.socket.close();
    } finally {
      await small.close();
    }
  });
});

describe('a mode that disappears', () => {
  it('fails its waiting tickets with no_game_module after the game directory drops it', async () => {
    const own = gameDir({ 'config.lua': 'return { duo = "duo.lua", solo = "duo.lua" }', 'duo.lua': matchScript('match_size = 2') });
    const server = await startTestServer({ matchmaker_tick_ms: 40 }, { gameDir: own.dir });
    try {
      const a = await connectPlayer(server);
      await a.socket.request('matchmaker.add', { mode: 'solo' });
      own.write('config.lua', 'return { duo = "duo.lua" }');
      expect((await a.socket.next('match.matchmaker_failed', 10_000)).payload).toEqual({ reason: 'no_game_module' });
      expectErrorFrame(await a.socket.request('matchmaker.add', { mode: 'solo' }), 'unknown_mode', 'matchmaker.unknown_mode', 'matchmaker.add');
      a.socket.close();
    } finally {
      await server.close();
      own.remove();
    }
  });
});
