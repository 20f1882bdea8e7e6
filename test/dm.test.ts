import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, TestSocket, type Frame } from './support/ws-client';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ rate_limits: { ws_connect: { limit: 1000, window: 1000 } }, chat_send_rate: { limit: 1000, window: 1000 } });
});
afterAll(async () => {
  await s.close();
});

type Player = Awaited<ReturnType<typeof connectPlayer>>;
const dmId = (a: string, b: string) => (a < b ? `dm:${a}:${b}` : `dm:${b}:${a}`);
const post = (from: Player, body: unknown) => s.call('POST', '/api/v1/dm', { token: from.token, body });
const historyWith = (p: Player, other: string, q = '') => s.call('GET', `/api/v1/dm/${other}/history${q}`, { token: p.token });

function expectFrameError(f: Frame, reason: string, code: string) {
  expect(f.type, JSON.stringify(f)).toBe('error');
  expect(f.payload.reason).toBe(reason);
  expect(f.payload.error.code).toBe(code);
}

describe('sending', () => {
  it('POST /dm stores the message and pushes dm.message to every socket of the recipient, not the sender', async () => {
    const [a, b] = [await connectPlayer(s), await connectPlayer(s)];
    const b2 = await TestSocket.open(s);
    await b2.request('session.connect', { token: b.token });
    const res = await post(a, { recipient_id: b.playerId, content: 'gg' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ success: true, channel_id: dmId(a.playerId, b.playerId) });
    for (const sock of [b.socket, b2]) {
      const m = await sock.next('dm.message');
      expect(m.payload).toEqual({ channel_id: res.body.channel_id, sender_id: a.playerId, content: 'gg', sent_at: expect.any(Number) });
    }
    expect(await a.socket.quiet('dm.message', 200)).toBe(true);
    for (const sock of [a.socket, b.socket, b2]) sock.close();
  });

  it('dm.send answers dm.sent with the cid; a connection joined to the DM channel also gets chat.message', async () => {
    const [a, b] = [await connectPlayer(s), await connectPlayer(s)];
    const channel = dmId(a.playerId, b.playerId);
    await a.socket.request('chat.join', { channel_id: channel });
    const sent = await a.socket.request('dm.send', { recipient_id: b.playerId, content: 'hello' });
    expect(sent).toEqual({ type: 'dm.sent', cid: expect.any(String), payload: { channel_id: channel } });
    expect((await b.socket.next('dm.message')).payload.content).toBe('hello');
    expect((await a.socket.next('chat.message')).payload).toMatchObject({ channel_id: channel, sender_id: a.playerId, content: 'hello' });
    a.socket.close();
    b.socket.close();
  });

  it('stores a message to an offline recipient for later', async () => {
    const [a, b] = [await connectPlayer(s), await connectPlayer(s)];
    b.socket.close();
    await b.socket.closed;
    expect((await post(a, { recipient_id: b.playerId, content: 'later' })).status).toBe(200);
    expect((await historyWith(b as Player, a.playerId)).body.messages.map((m: any) => m.content)).toEqual(['later']);
    a.socket.close();
  });
});

describe('bounds', () => {
  it('REST: empty 400, over 2000 bytes 413, exactly 2000 bytes ok, non-string or missing 400 missing_field', async () => {
    const [a, b] = [await connectPlayer(s), await connectPlayer(s)];
    const err = async (body: unknown, status: number, code: string) => {
      const res = await post(a, body);
      expect([res.status, res.body.error?.code], JSON.stringify(res.body)).toEqual([status, code]);
    };
    await err({ recipient_id: b.playerId, content: '' }, 400, 'dm.content_empty');
    await err({ recipient_id: b.playerId, content: '€'.repeat(667) }, 413, 'dm.content_too_large');
    for (const [body, field] of [
      [{ recipient_id: b.playerId, content: 5 }, 'content'],
      [{ recipient_id: b.playerId }, 'content'],
      [{ content: 'x' }, 'recipient_id'],
      [{ recipient_id: 42, content: 'x' }, 'recipient_id'],
    ] as const) {
      const res = await post(a, body);
      expect([res.status, res.body.error.code, res.body.error.details], JSON.stringify(res.body)).toEqual([400, 'missing_field', { field }]);
    }
    await err({ recipient_id: a.playerId, content: 'me' }, 400, 'invalid_payload');
    await err({ recipient_id: '0190c1f2-aaaa-7000-8000-000000000001', content: 'x' }, 404, 'player.not_found');
    expect((await post(a, { recipient_id: b.playerId, content: 'é'.repeat(1000) })).status).toBe(200);
    expect((await b.socket.next('dm.message')).payload.content).toHaveLength(1000);
    a.socket.close();
    b.socket.close();
  });

  it('WS: content_empty, content_too_large, invalid_input for non-strings, invalid_payload for missing keys', async () => {
    const [a, b] = [await connectPlayer(s), await connectPlayer(s)];
    expectFrameError(await a.socket.request('dm.send', { recipient_id: b.playerId, content: '' }), 'content_empty', 'dm.content_empty');
    expectFrameError(await a.socket.request('dm.send', { recipient_id: b.playerId, content: 'x'.repeat(2001) }), 'content_too_large', 'dm.content_too_large');
    const invalid = await a.socket.request('dm.send', { recipient_id: b.playerId, content: ['x'] });
    expectFrameError(invalid, 'invalid_input', 'ws.request_failed');
    expect(invalid.payload.error.details).toEqual({ reason: 'invalid_input' });
    expectFrameError(await a.socket.request('dm.send', { recipient_id: b.playerId }), 'invalid_payload', 'invalid_payload');
    expectFrameError(await a.socket.request('dm.send', 'x'), 'invalid_payload', 'invalid_payload');
    expectFrameError(await a.socket.request('dm.send'), 'unknown_type', 'unknown_type');
    const nonString = await a.socket.request('dm.send', { recipient_id: 7, content: 'x' });
    expectFrameError(nonString, 'invalid_input', 'ws.request_failed');
    // An unknown recipient: REST's 404 player.not_found is reason not_found on the socket.
    const ghost = await a.socket.request('dm.send', { recipient_id: '0190c1f2-aaaa-7000-8000-000000000001', content: 'x' });
    expectFrameError(ghost, 'not_found', 'ws.request_failed');
    expect(ghost.payload.error.details).toEqual({ reason: 'not_found' });
    expect(await b.socket.quiet('dm.message', 200)).toBe(true);
    a.socket.close();
    b.socket.close();
  });
});

describe('one content rule on every path', () => {
  it("chat.send on the pair's dm: channel is a direct message and meets the DM rule: empty refused, over 2000 bytes refused, nothing stored or pushed", async () => {
    const [a, b] = [await connectPlayer(s), await connectPlayer(s)];
    const channel_id = a.playerId < b.playerId ? `dm:${a.playerId}:${b.playerId}` : `dm:${b.playerId}:${a.playerId}`;
    expectFrameError(await a.socket.request('chat.send', { channel_id, content: '' }), 'content_empty', 'dm.content_empty');
    expectFrameError(await a.socket.request('chat.send', { channel_id, content: 'x'.repeat(2001) }), 'invalid_payload', 'invalid_payload');
    expect(await b.socket.quiet('dm.message', 200)).toBe(true);
    const history = await s.call('GET', `/api/v1/dm/${b.playerId}/history`, { token: a.token });
    expect(history.body.messages).toEqual([]);
    a.socket.close();
    b.socket.close();
  });
});

describe('blocks', () => {
  it('refuses messages both ways once either player blocks the other, and again after unblock they flow', async () => {
    const [a, b] = [await connectPlayer(s), await connectPlayer(s)];
    await s.call('PUT', `/api/v1/friends/${a.playerId}`, { token: b.token, body: { status: 'blocked' } });
    for (const [from, to] of [[a, b], [b, a]] as const) {
      const res = await post(from, { recipient_id: to.playerId, content: 'hi' });
      expect([res.status, res.body.error.code]).toEqual([403, 'dm.blocked']);
      expectFrameError(await from.socket.request('dm.send', { recipient_id: to.playerId, content: 'hi' }), 'blocked', 'dm.blocked');
    }
    // Content checks come before the block check.
    expectFrameError(await a.socket.request('dm.send', { recipient_id: b.playerId, content: '' }), 'content_empty', 'dm.content_empty');
    expect(await a.socket.quiet('dm.message', 100)).toBe(true);
    await s.call('DELETE', `/api/v1/friends/${a.playerId}`, { token: b.token });
    expect((await post(a, { recipient_id: b.playerId, content: 'friends again?' })).status).toBe(200);
    a.socket.close();
    b.socket.close();
  });
});

describe('history', () => {
  it('is the same conversation from both sides, oldest first, with ids, epoch-ms sent_at and a before cursor', async () => {
    const [a, b, c] = [await connectPlayer(s), await connectPlayer(s), await connectPlayer(s)];
    for (let i = 0; i < 8; i++) await post(i % 2 ? b : a, { recipient_id: i % 2 ? a.playerId : b.playerId, content: `m${i}` });
    await post(a, { recipient_id: c.playerId, content: 'other conversation' });
    const fromA = await historyWith(a, b.playerId);
    const fromB = await historyWith(b, a.playerId);
    expect(fromA.body).toEqual(fromB.body);
    expect(fromA.body.channel_id).toBe(dmId(a.playerId, b.playerId));
    expect(fromA.body.messages.map((m: any) => m.content)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7']);
    const first = fromA.body.messages[0];
    expect(first).toEqual({ id: expect.any(String), sender_id: a.playerId, content: 'm0', sent_at: expect.any(Number) });
    expect(Math.abs(first.sent_at - Date.now())).toBeLessThan(60_000);
    const page = (await historyWith(a, b.playerId, '?limit=3')).body.messages;
    expect(page.map((m: any) => m.content)).toEqual(['m5', 'm6', 'm7']);
    const older = (await historyWith(a, b.playerId, `?limit=3&before=${page[0].id}`)).body.messages;
    expect(older.map((m: any) => m.content)).toEqual(['m2', 'm3', 'm4']);
    // A third player sees none of it, and may not read the channel through chat history.
    expect((await historyWith(c, b.playerId)).body.messages).toEqual([]);
    const chat = await s.call('GET', `/api/v1/chat/${encodeURIComponent(fromA.body.channel_id)}/history`, { token: c.token });
    expect([chat.status, chat.body.error.code]).toEqual([403, 'forbidden']);
    const own = await s.call('GET', `/api/v1/chat/${encodeURIComponent(fromA.body.channel_id)}/history?limit=2`, { token: a.token });
    expect(own.body.messages.map((m: any) => [m.content, m.channel_type])).toEqual([['m6', 'dm'], ['m7', 'dm']]);
    expect((await historyWith(a, 'not-a-player')).status).toBe(404);
    for (const p of [a, b, c]) p.socket.close();
  });
});
