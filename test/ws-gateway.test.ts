import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../runtime/contracts/errors';
import { FrameError } from '../runtime/contracts/frame-envelope';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, expectErrorFrame, registerPlayer, TestSocket, type Frame } from './support/ws-client';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ rate_limits: { ws_connect: { limit: 1000, window: 1000 } } });
});
afterAll(async () => {
  await s.close();
});


describe('session.connect', () => {
  it('answers session.connected with the player id and the json wire, echoing the cid', async () => {
    const player = await registerPlayer(s);
    const sock = await TestSocket.open(s);
    sock.send({ type: 'session.connect', cid: '1', payload: { token: player.token, wire: 'binary' } });
    const f = await sock.next();
    expect(f).toEqual({ type: 'session.connected', cid: '1', payload: { player_id: player.playerId, wire: 'json' } });
    sock.close();
  });

  it('answers a bad, missing or absent token with invalid_token and keeps the socket open for a retry', async () => {
    const player = await registerPlayer(s);
    const sock = await TestSocket.open(s);
    for (const payload of [{ token: 'nope' }, {}, { token: 42 }, undefined]) {
      const f = await sock.request('session.connect', payload);
      expectErrorFrame(f, 'invalid_token', 'unauthenticated');
      expect(f.payload.error.details).toEqual({});
    }
    const ok = await sock.request('session.connect', { token: player.token });
    expect(ok.type).toBe('session.connected');
    sock.close();
  });

  it('resolves a burst of cold tokens together, each to its own player, garbage and revoked ones refused', async () => {
    // Cold tokens arriving in one turn of the event loop are looked up in one read.
    const players = await Promise.all(Array.from({ length: 24 }, () => registerPlayer(s)));
    const revoked = await registerPlayer(s);
    await s.call('POST', '/api/v1/auth/logout', { token: revoked.token, body: {} });
    const sockets = await Promise.all(Array.from({ length: players.length + 4 }, () => TestSocket.open(s)));
    const tokens = [...players.map((p) => p.token), 'garbage-one', 'garbage-two', revoked.token, players[0]!.token];
    const answers = await Promise.all(sockets.map((sock, i) => sock.request('session.connect', { token: tokens[i] })));
    players.forEach((p, i) => expect(answers[i]).toMatchObject({ type: 'session.connected', payload: { player_id: p.playerId } }));
    for (const f of answers.slice(players.length, players.length + 3)) expectErrorFrame(f, 'invalid_token', 'unauthenticated');
    // The same token twice in one burst: both sockets are that player.
    expect(answers.at(-1)).toMatchObject({ type: 'session.connected', payload: { player_id: players[0]!.playerId } });
    for (const sock of sockets) sock.close();
  });

  it('re-authenticates an authenticated socket; a failed re-auth keeps the old identity', async () => {
    const a = await connectPlayer(s);
    const b = await registerPlayer(s);
    const bad = await a.socket.request('session.connect', { token: 'garbage' });
    expectErrorFrame(bad, 'invalid_token', 'unauthenticated');
    // Still authenticated as a: an auth-only frame is served.
    expect((await a.socket.request('match.list', {})).type).toBe('match.list');
    const again = await a.socket.request('session.connect', { token: b.token });
    expect(again.payload.player_id).toBe(b.playerId);
    a.socket.close();
  });
});

describe('envelope and cid rules', () => {
  let sock: TestSocket;
  beforeAll(async () => {
    sock = (await connectPlayer(s)).socket;
  });
  afterAll(() => sock.close());

  it('heartbeat replies with the server clock, with and without cid', async () => {
    const before = Date.now();
    const f = await sock.request('session.heartbeat', {});
    expect(f.type).toBe('session.heartbeat');
    expect(Number.isInteger(f.payload.ts)).toBe(true);
    expect(f.payload.ts).toBeGreaterThanOrEqual(before - 5);
    sock.send({ type: 'session.heartbeat' });
    const bare = await sock.next('session.heartbeat');
    expect('cid' in bare).toBe(false);
  });

  it('echoes any JSON cid value unchanged, null and numbers included', async () => {
    for (const cid of [null, 7, { a: 1 }, 'x']) {
      sock.send({ type: 'session.heartbeat', cid });
      const f = await sock.next('session.heartbeat');
      expect('cid' in f).toBe(true);
      expect(f.cid).toEqual(cid);
    }
  });

  it('answers malformed JSON invalid_json and non-objects invalid_message, never with a cid', async () => {
    sock.sendRaw('{"type": "session.heartbeat", "cid": "1"');
    const a = await sock.next('error');
    expectErrorFrame(a, 'invalid_json', 'invalid_json');
    expect('cid' in a).toBe(false);
    for (const raw of ['[1]', '"x"', '{"cid":"2"}', '{"type":5,"cid":"3"}']) {
      sock.sendRaw(raw);
      const f = await sock.next('error');
      expectErrorFrame(f, 'invalid_message', 'invalid_message');
      expect('cid' in f).toBe(false);
    }
  });

  it('answers an unknown type unknown_type with the cid and without echoing the type', async () => {
    const f = await sock.request('nope.nothing', {});
    expectErrorFrame(f, 'unknown_type', 'unknown_type');
    expect(JSON.stringify(f)).not.toContain('nope.nothing');
  });

  it('carries a domain error whose code has no reason of its own as ws.request_failed (13.1 is complete)', () => {
    expect(FrameError.from(new ApiError('social.group_not_found')).payload()).toEqual({
      reason: 'social.group_not_found',
      error: { code: 'ws.request_failed', message: expect.any(String), details: { reason: 'social.group_not_found' } },
    });
    // An unknown player travels under the socket's generic `not_found` reason.
    expect(FrameError.from(new ApiError('player.not_found')).payload()).toMatchObject({ reason: 'not_found', error: { code: 'ws.request_failed', details: { reason: 'not_found' } } });
    expect(FrameError.from(new ApiError('dm.blocked')).payload()).toMatchObject({ reason: 'blocked', error: { code: 'dm.blocked', details: {} } });
  });

  it('answers a binary frame binary_uplink_unsupported as ws.request_failed', async () => {
    sock.sendRaw(Buffer.from('{"type":"session.heartbeat"}'), true);
    const f = await sock.next('error');
    expectErrorFrame(f, 'binary_uplink_unsupported', 'ws.request_failed');
    expect(f.payload.error.details).toEqual({ reason: 'binary_uplink_unsupported' });
  });
});

describe('pre-auth frames', () => {
  it('answers auth-only frames unknown_type, rpc.call unauthenticated, and serves heartbeat', async () => {
    const sock = await TestSocket.open(s);
    for (const type of ['match.list', 'matchmaker.add', 'match.join', 'match.input']) {
      const f = await sock.request(type, {});
      expectErrorFrame(f, 'unknown_type', 'unknown_type');
    }
    const rpc = await sock.request('rpc.call', { protocol: 1, method: 'x.y', params: {} });
    expect(rpc.type).toBe('rpc.error');
    expect(rpc.payload.error.code).toBe('unauthenticated');
    expect((await sock.request('session.heartbeat')).type).toBe('session.heartbeat');
    sock.close();
  });
});

describe('limits', () => {
  it('answers a frame over 65536 bytes payload_too_large and accepts one of exactly 65536', async () => {
    const { socket } = await connectPlayer(s);
    const base = '{"type":"session.heartbeat","cid":"big","payload":{"pad":""}}';
    const exact = base.replace('"pad":""', `"pad":"${'a'.repeat(65_536 - base.length)}"`);
    expect(Buffer.byteLength(exact)).toBe(65_536);
    socket.sendRaw(exact);
    expect((await socket.next()).type).toBe('session.heartbeat');
    socket.sendRaw(exact.replace('"pad":"', '"pad":"b'));
    const f = await socket.next();
    expectErrorFrame(f, 'payload_too_large', 'payload_too_large');
    expect('cid' in f).toBe(false);
    // Still open.
    expect((await socket.request('session.heartbeat')).type).toBe('session.heartbeat');
    socket.close();
  });

  it('admits 60 frames per window and answers the rest rate_limited without cid', async () => {
    const sock = await TestSocket.open(s);
    // 130 frames arrive well within two windows: at most 120 can pass, whatever the boundary.
    const N = 130;
    for (let i = 0; i < N; i++) sock.send({ type: 'session.heartbeat', cid: `h${i}` });
    const replies: Frame[] = [];
    for (let i = 0; i < N; i++) replies.push(await sock.next());
    const ok = replies.filter((f) => f.type === 'session.heartbeat');
    const limited = replies.filter((f) => f.type === 'error');
    expect(ok.length).toBeGreaterThanOrEqual(60);
    expect(ok.length).toBeLessThanOrEqual(120);
    expect(limited.length).toBe(N - ok.length);
    for (const f of limited) {
      expectErrorFrame(f, 'rate_limited', 'rate_limited');
      expect('cid' in f).toBe(false);
    }
    sock.close();
  });

  it('closes a socket that never authenticates with 1008 idle_auth_timeout, despite failed attempts', async () => {
    const short = await startTestServer({ ws_idle_auth_timeout_ms: 300 });
    try {
      const sock = await TestSocket.open(short);
      expectErrorFrame(await sock.request('session.connect', { token: 'bad' }), 'invalid_token', 'unauthenticated');
      expect(await sock.closed).toEqual({ code: 1008, reason: 'idle_auth_timeout' });
      // An authenticated socket outlives the timer.
      const { socket } = await connectPlayer(short);
      await new Promise((r) => setTimeout(r, 500));
      expect((await socket.request('session.heartbeat')).type).toBe('session.heartbeat');
      socket.close();
    } finally {
      await short.close();
    }
  });

  it('closes an authenticated socket that sends nothing for ws_idle_timeout_ms', async () => {
    const short = await startTestServer({ ws_idle_timeout_ms: 300 });
    try {
      const { socket } = await connectPlayer(short);
      const closed = await socket.closed;
      expect(closed.code).toBe(1000);
    } finally {
      await short.close();
    }
  });
});

describe('upgrade checks', () => {
  it('spends the ws_connect budget before the origin check, closing 1008 rate_limited', async () => {
    const limited = await startTestServer({ rate_limits: { ws_connect: { limit: 2, window: 60_000 } }, ws_allowed_origins: ['https://good.example'] });
    try {
      const bad = await TestSocket.open(limited, { origin: 'https://evil.example' });
      expect(await bad.closed).toEqual({ code: 1008, reason: 'origin_rejected' });
      const good = await TestSocket.open(limited, { origin: 'https://good.example' });
      expect((await good.request('session.heartbeat')).type).toBe('session.heartbeat');
      const third = await TestSocket.open(limited, { origin: 'https://good.example' });
      expect(await third.closed).toEqual({ code: 1008, reason: 'rate_limited' });
      good.close();
    } finally {
      await limited.close();
    }
  });

  it('keys ws_connect on the forwarded client address behind a trusted proxy, and on the peer otherwise', async () => {
    const limits = { rate_limits: { ws_connect: { limit: 1, window: 60_000 } } };
    const proxied = await startTestServer({ ...limits, trusted_proxies: ['127.0.0.0/8'] });
    const direct = await startTestServer(limits);
    try {
      const from = (server: TestServer, client: string) => TestSocket.open(server, { 'x-forwarded-for': client });
      // Two clients behind the same proxy have a budget each.
      const a = await from(proxied, '203.0.113.7');
      const b = await from(proxied, '198.51.100.9');
      for (const sock of [a, b]) expect((await sock.request('session.heartbeat')).type).toBe('session.heartbeat');
      expect(await (await from(proxied, '203.0.113.7')).closed).toEqual({ code: 1008, reason: 'rate_limited' });
      // Without a trusted proxy the header is the client's own claim: ignored.
      const c = await from(direct, '203.0.113.7');
      expect((await c.request('session.heartbeat')).type).toBe('session.heartbeat');
      expect(await (await from(direct, '198.51.100.9')).closed).toEqual({ code: 1008, reason: 'rate_limited' });
      for (const sock of [a, b, c]) sock.close();
    } finally {
      await proxied.close();
      await direct.close();
    }
  });

  it('admits native clients without Origin, and refuses a malformed allowlist at boot', async () => {
    await expect(startTestServer({ ws_allowed_origins: 'https://good.example' } as never)).rejects.toThrow(/ws_allowed_origins/);
    const strict = await startTestServer({ ws_allowed_origins: ['https://good.example'] });
    try {
      const stranger = await TestSocket.open(strict, { origin: 'https://evil.example' });
      expect(await stranger.closed).toEqual({ code: 1008, reason: 'origin_rejected' });
      const native = await TestSocket.open(strict);
      expect((await native.request('session.heartbeat')).type).toBe('session.heartbeat');
      native.close();
    } finally {
      await strict.close();
    }
  });

  it('refuses upgrades on other paths', async () => {
    const { WebSocket } = await import('ws');
    const ws = new WebSocket(`ws://127.0.0.1:${s.port}/elsewhere`);
    const err = await new Promise<Error>((resolve) => ws.once('error', resolve));
    expect(err.message).toMatch(/404/);
  });
});

describe('one player, two sockets', () => {
  it('keeps both live and delivers player-addressed pushes to both', async () => {
    const a = await connectPlayer(s);
    const second = await TestSocket.open(s);
    const again = await second.request('session.connect', { token: a.token });
    expect(again.payload.player_id).toBe(a.playerId);
    // Both answer, and a push reaches both.
    expect((await a.socket.request('session.heartbeat')).type).toBe('session.heartbeat');
    // A notification as the server stores and pushes it: response checks hold back a push that fails its published schema.
    const note = (subject: string) => ({ id: '01a22256-8a6d-7000-bce8-214233d5de27', player_id: a.playerId, type: 'test', subject, content: {}, read: false, sent_at: '2026-01-01T00:00:00Z' });
    expect(s.ctx.live.push(a.playerId, { type: 'notification.new', payload: note('one') })).toBe(2);
    expect((await a.socket.next('notification.new')).payload).toEqual(note('one'));
    expect((await second.next('notification.new')).payload).toEqual(note('one'));
    second.close();
    await second.closed;
    await new Promise((r) => setTimeout(r, 50));
    expect(s.ctx.live.push(a.playerId, { type: 'notification.new', payload: note('two') })).toBe(1);
    a.socket.close();
  });
});

describe('shutdown', () => {
  it('closes open sockets with 1001', async () => {
    const own = await startTestServer();
    const { socket } = await connectPlayer(own);
    const closing = own.close();
    expect((await socket.closed).code).toBe(1001);
    await closing;
  });
});
