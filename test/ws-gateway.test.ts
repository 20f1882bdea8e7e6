import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { LiveHost } from '../host/realtime/live';
import { SharedFrame } from '../host/realtime/sessions';
import { ApiError } from '../runtime/contracts/errors';
import { FrameError } from '../runtime/contracts/frame-envelope';
import { encodeWorldTick } from '../runtime/worlds/binary-wire';
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
    sock.send({ type: 'session.connect', cid: '1', payload: { token: player.token } });
    const f = await sock.next();
    expect(f).toEqual({ type: 'session.connected', cid: '1', payload: { player_id: player.playerId, wire: 'json' } });
    sock.close();
  });

  it('grants the binary wire to a connect that asks for it, text to any other wire value, and negotiates again on re-auth', async () => {
    const player = await registerPlayer(s);
    const sock = await TestSocket.open(s);
    const wireOf = async (wire: unknown) => (await sock.request('session.connect', { token: player.token, ...(wire === undefined ? {} : { wire }) })).payload.wire;
    expect(await wireOf('binary')).toBe('binary');
    expect(await wireOf(undefined)).toBe('json');
    expect(await wireOf('binary')).toBe('binary');
    expect(await wireOf('json')).toBe('json');
    expect(await wireOf('protobuf')).toBe('json');
    expect(await wireOf(7)).toBe('json');
    sock.close();
  });

  it('answers the json wire to every connect while the operator turned binary_wire off', async () => {
    const own = await startTestServer({ binary_wire: false });
    const player = await registerPlayer(own);
    const sock = await TestSocket.open(own);
    expect((await sock.request('session.connect', { token: player.token, wire: 'binary' })).payload).toEqual({ player_id: player.playerId, wire: 'json' });
    sock.close();
    await own.close();
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

/** A raw socket (TestSocket parses every message as JSON): text frames parsed, binary ones kept as bytes, in arrival order. */
async function rawSocket(token: string, wire?: string, server: TestServer = s): Promise<{ ws: WebSocket; got: (Frame | Buffer)[]; wire: string }> {
  const ws = new WebSocket(`ws://127.0.0.1:${server.port}/ws`);
  const got: (Frame | Buffer)[] = [];
  ws.on('message', (data: Buffer, isBinary) => got.push(isBinary ? data : (JSON.parse(data.toString()) as Frame)));
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  ws.send(JSON.stringify({ type: 'session.connect', payload: { token, ...(wire ? { wire } : {}) } }));
  await until(() => got.length === 1);
  const connected = got.shift() as Frame;
  return { ws, got, wire: connected.payload.wire };
}

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(done()).toBe(true);
}

describe('the binary world.tick wire', () => {
  it('delivers a world.tick as bytes to the player\'s binary sockets and as text to the others, and as text everywhere when it has no binary form', async () => {
    const player = await registerPlayer(s);
    const binary = await rawSocket(player.token, 'binary');
    const text = await rawSocket(player.token);
    expect([binary.wire, text.wire]).toEqual(['binary', 'json']);
    const sessions = (s.ctx.live as LiveHost).gateway.sessions;
    const payload = { zone: [2, 3], frame_seq: 4, kf: false, tick: 30, updates: [{ op: 'a', id: 'e1', x: 1.5 }] };
    const frameText = JSON.stringify({ type: 'world.tick', payload });
    const bytes = encodeWorldTick({ kind: 'sequenced', zone: [2, 3], frame_seq: 4, kf: false, tick: 30, records: [{ op: 'add', slot: 0, gen: 0, id: 'e1', fields: { x: 1.5 } }] })!;

    sessions.pushShared(player.playerId, new SharedFrame(frameText, bytes), sessions.metrics.frameOutOf(frameText));
    await until(() => binary.got.length === 1 && text.got.length === 1);
    expect(Buffer.isBuffer(binary.got[0])).toBe(true);
    expect((binary.got[0] as Buffer).equals(Buffer.from(bytes))).toBe(true);
    expect(text.got[0]).toEqual({ type: 'world.tick', payload });

    // No binary form: the text twin goes to both.
    sessions.pushShared(player.playerId, new SharedFrame(frameText, null), sessions.metrics.frameOutOf(frameText));
    await until(() => binary.got.length === 2 && text.got.length === 2);
    expect(binary.got[1]).toEqual({ type: 'world.tick', payload });
    expect(text.got[1]).toEqual({ type: 'world.tick', payload });

    // Every other frame stays text on the binary wire.
    s.ctx.live.push(player.playerId, { type: 'world.ack', payload: { tick: 30, seq: 2 } });
    await until(() => binary.got.length === 3);
    expect(binary.got[2]).toEqual({ type: 'world.ack', payload: { tick: 30, seq: 2 } });
    binary.ws.close();
    text.ws.close();
  });

  it('frames a shared frame of every length class whole and in order with the frames ws writes', async () => {
    const player = await registerPlayer(s);
    const binary = await rawSocket(player.token, 'binary');
    const text = await rawSocket(player.token);
    const sessions = (s.ctx.live as LiveHost).gateway.sessions;
    // Payload lengths at the edges of RFC 6455's 7-bit, 16-bit and 64-bit length forms; text with multi-byte characters.
    const lengths = [0, 1, 125, 126, 127, 65535, 65536, 70000];
    const sent: { text: string; bytes: Uint8Array }[] = [];
    for (const n of lengths) {
      const frameText = JSON.stringify({ type: 'world.tick', payload: { zone: [0, 0], frame_seq: n, kf: false, tick: 1, updates: [{ op: 'u', id: 'é'.repeat(Math.max(0, (n - 60) >> 1)) }] } });
      const bytes = new Uint8Array(n).map((_, i) => (i * 7 + n) & 0xff);
      sent.push({ text: frameText, bytes });
      sessions.pushShared(player.playerId, new SharedFrame(frameText, bytes), sessions.metrics.frameOutOf(frameText));
      // A frame through ws between two shared ones, in the same turn.
      s.ctx.live.push(player.playerId, { type: 'world.ack', payload: { tick: n, seq: n } });
    }
    await until(() => binary.got.length === 2 * lengths.length && text.got.length === 2 * lengths.length);
    for (let i = 0; i < lengths.length; i++) {
      expect(Buffer.from(binary.got[2 * i] as Buffer).equals(Buffer.from(sent[i]!.bytes))).toBe(true);
      expect(binary.got[2 * i + 1]).toEqual({ type: 'world.ack', payload: { tick: lengths[i], seq: lengths[i] } });
      expect(text.got[2 * i]).toEqual(JSON.parse(sent[i]!.text));
      expect(text.got[2 * i + 1]).toEqual({ type: 'world.ack', payload: { tick: lengths[i], seq: lengths[i] } });
    }
    binary.ws.close();
    text.ws.close();
  });

  it('holds back the bytes too when response checks find their text twin off its schema', async () => {
    const own = await startTestServer();
    const player = await registerPlayer(own);
    const binary = await rawSocket(player.token, 'binary', own);
    const sessions = (own.ctx.live as LiveHost).gateway.sessions;
    const bytes = encodeWorldTick({ kind: 'sequenced', zone: [0, 0], frame_seq: 1, kf: false, tick: 1, records: [] })!;
    const bad = JSON.stringify({ type: 'world.tick', payload: { zone: [0, 0], updates: 'none' } });
    sessions.pushShared(player.playerId, new SharedFrame(bad, bytes), sessions.metrics.frameOutOf(bad));
    // A sound frame after it still goes out, so the one before was held back, not late.
    const good = JSON.stringify({ type: 'world.tick', payload: { zone: [0, 0], frame_seq: 1, kf: false, tick: 1, updates: [] } });
    sessions.pushShared(player.playerId, new SharedFrame(good, bytes), sessions.metrics.frameOutOf(good));
    await until(() => binary.got.length === 1);
    const failed = own.logs.filter((l) => l.event === 'frame_check_failed');
    expect(failed.map((l) => l.frame_type)).toEqual(['world.tick']);
    binary.ws.close();
    own.logs.length = 0;
    await own.close();
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
