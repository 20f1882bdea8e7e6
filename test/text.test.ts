import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, registerPlayer, type TestPlayer } from './support/accounts';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, expectErrorFrame } from './support/ws-client';

/**
 * Text PostgreSQL cannot store (U+0000, unpaired surrogates) is refused at the
 * boundary: 422 `validation_failed` naming the field on REST, `invalid_payload`
 * naming it on the socket. Before, each of these reached the database and
 * answered 500.
 */
let s: TestServer;
let me: TestPlayer;
beforeAll(async () => {
  s = await startTestServer({ rate_limits: { ws_connect: { limit: 1000, window: 1000 } }, chat_send_rate: { limit: 1000, window: 1000 }, game_modes: { arena: { chat_channels: ['lobby'] } } });
  me = await registerPlayer(s);
});
afterAll(async () => {
  await s.close();
});

const NUL = 'a\u0000b';
const LONE_HIGH = 'a\ud800b';
const LONE_LOW = '\udc00';
const HOSTILE = [NUL, LONE_HIGH, LONE_LOW];

/** A 422 naming `field` under the route family's legacy key (`fields` for accounts, `errors` elsewhere). */
function expectRefused(res: { status: number; body: any }, key: 'fields' | 'errors', field: string): void {
  expectError(res, 422, 'validation_failed');
  expect(Object.keys(res.body[key]), JSON.stringify(res.body)).toEqual([field]);
  expect(res.body.error.details[key]).toEqual(res.body[key]);
}

describe('REST bodies', () => {
  it('register refuses such text in display_name and username, login in username', async () => {
    for (const bad of HOSTILE) {
      expectRefused(await s.call('POST', '/api/v1/auth/register', { body: { username: 'fine_name_1', password: 'correct horse', display_name: bad } }), 'fields', 'display_name');
      expectRefused(await s.call('POST', '/api/v1/auth/register', { body: { username: `u${bad}`, password: 'correct horse' } }), 'fields', 'username');
      expectRefused(await s.call('POST', '/api/v1/auth/login', { body: { username: bad, password: 'correct horse' } }), 'fields', 'username');
    }
  });

  it('a player profile refuses it in display_name, avatar_url and anywhere in metadata, keys included', async () => {
    const put = (body: unknown) => s.call('PUT', `/api/v1/players/${me.player_id}`, { token: me.access_token, body });
    for (const bad of HOSTILE) {
      expectRefused(await put({ display_name: bad }), 'errors', 'display_name');
      expectRefused(await put({ avatar_url: bad }), 'errors', 'avatar_url');
      expectRefused(await put({ metadata: { title: bad } }), 'errors', 'metadata');
      expectRefused(await put({ metadata: { [`k${bad}`]: 1 } }), 'errors', 'metadata');
      expectRefused(await put({ metadata: { deep: [{ x: [bad] }] } }), 'errors', 'metadata');
    }
    // Nothing was written: the profile still reads back as it was.
    const back = await s.call('GET', `/api/v1/players/${me.player_id}`, { token: me.access_token });
    expect(back.status).toBe(200);
    expect(JSON.stringify(back.body)).not.toMatch(/\\u0000|\\ud[89a-f]/i);
  });

  it('groups refuse it in name and description; POST /dm in content', async () => {
    const other = await registerPlayer(s);
    const group = await s.call('POST', '/api/v1/groups', { token: me.access_token, body: { name: 'Fine group' } });
    expect(group.status).toBe(200);
    for (const bad of HOSTILE) {
      expectRefused(await s.call('POST', '/api/v1/groups', { token: me.access_token, body: { name: `ab${bad}` } }), 'errors', 'name');
      expectRefused(await s.call('POST', '/api/v1/groups', { token: me.access_token, body: { name: 'ok name', description: bad } }), 'errors', 'description');
      expectRefused(await s.call('PUT', `/api/v1/groups/${group.body.id}`, { token: me.access_token, body: { name: `ab${bad}` } }), 'errors', 'name');
      expectRefused(await s.call('POST', '/api/v1/dm', { token: me.access_token, body: { recipient_id: other.player_id, content: bad } }), 'errors', 'content');
    }
  });

  it('a key that is itself such text is named as sent', async () => {
    const res = await s.call('POST', '/api/v1/groups', { token: me.access_token, body: { name: 'ok name', [NUL]: true } });
    expectRefused(res, 'errors', NUL);
  });

  it('ordinary unicode, escapes included, still passes', async () => {
    const name = 'Ünïcødé 🎮 \\u0000 \u00e9';
    const res = await s.call('POST', '/api/v1/groups', { token: me.access_token, body: { name, description: 'tab\tnewline\n\u{1F600}' } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.name).toBe(name);
  });
});

describe('nesting', () => {
  const nest = (depth: number, leaf = '1') => `${'['.repeat(depth)}${leaf}${']'.repeat(depth)}`;

  it('a body nested deeper than 64 levels is 422 naming the field, not a stack overflow (500)', async () => {
    const put = (raw: string) => s.call('PUT', `/api/v1/players/${me.player_id}`, { token: me.access_token, body: raw });
    expectRefused(await put(`{"metadata":{"a":${nest(100_000)}}}`), 'errors', 'metadata');
    // Closing brackets inside a string do not hide the depth.
    expectRefused(await put(`{"metadata":{"s":"${']'.repeat(100)}\\\\","a":${nest(63)}}}`), 'errors', 'metadata');
    // Just inside the bound (the metadata object at level 1, its arrays below it) is fine.
    expect((await put(`{"metadata":{"a":${nest(62)}}}`)).status).toBe(200);
    // 800 KB of brackets parses without recursion; the root itself is the empty name.
    expectRefused(await s.call('POST', '/api/v1/groups', { token: me.access_token, body: nest(400_000) }), 'errors', '');
  });

  it('a frame nested too deep is invalid_payload', async () => {
    const a = await connectPlayer(s);
    a.socket.sendRaw(`{"type":"presence.update","cid":"deep","payload":{"status":${nest(5000, '"x"')}}}`);
    const f = await a.socket.next((x) => x.cid === 'deep');
    expectErrorFrame(f, 'invalid_payload', 'invalid_payload');
    expect(f.payload.error.details).toEqual({ field: 'status' });
    a.socket.close();
  });
});

describe('REST query values and path parameters', () => {
  it('the status and mode filters refuse such text, naming the parameter', async () => {
    for (const [path, key] of [
      ['/api/v1/matches?status=%00', 'status'],
      ['/api/v1/matches?mode=a%00', 'mode'],
      ['/api/v1/matches/live?mode=%00', 'mode'],
      ['/api/v1/friends?status=%00', 'status'],
      ['/api/v1/players?username=x%00', 'username'],
      ['/api/v1/notifications?before=%00', 'before'],
    ] as const) {
      expectRefused(await s.call('GET', path, { token: me.access_token }), 'errors', key);
    }
  });

  it('a malformed percent-encoded rpc method is refused, not a 500', async () => {
    for (const method of ['%E0%A4%A', '%', '%ZZ', 'a%00b', '%ED%A0%80']) {
      const res = await s.call('POST', `/api/v1/rpc/${method}`, { token: me.access_token, body: { params: {} } });
      expect(res.status, `${method}: ${JSON.stringify(res.body)}`).toBe(422);
      expect(res.body.error.code).toBe('validation_failed');
      expect(res.body.error.details.errors).toEqual({ method: [expect.any(String)] });
    }
  });

  it('chat history with a malformed channel id answers 422 naming the parameter, like every path parameter', async () => {
    for (const channel of ['%E0%A4%A', 'global%3Alobby%00']) {
      const res = await s.call('GET', `/api/v1/chat/${channel}/history`, { token: me.access_token });
      expectError(res, 422, 'validation_failed');
      expect(Object.keys(res.body.error.details.errors)).toEqual(['channel_id']);
    }
  });
});

describe('WebSocket frames', () => {
  it('dm.send and chat.send refuse such text with invalid_payload naming the field, cid echoed', async () => {
    const [a, b] = [await connectPlayer(s), await connectPlayer(s)];
    for (const bad of HOSTILE) {
      const dm = await a.socket.request('dm.send', { recipient_id: b.playerId, content: bad });
      expectErrorFrame(dm, 'invalid_payload', 'invalid_payload');
      expect(dm.payload.error.details).toEqual({ field: 'content' });
      const chat = await a.socket.request('chat.send', { channel_id: 'global:lobby', content: bad });
      expectErrorFrame(chat, 'invalid_payload', 'invalid_payload');
      expect(chat.payload.error.details).toEqual({ field: 'content' });
    }
    // The socket is still in service.
    expect((await a.socket.request('dm.send', { recipient_id: b.playerId, content: 'fine' })).type).toBe('dm.sent');
    a.socket.close();
    b.socket.close();
  });

  it('any frame type, nested keys included; an unknown type stays unknown_type', async () => {
    const a = await connectPlayer(s);
    expectErrorFrame(await a.socket.request('presence.update', { status: 'online', meta: { [NUL]: 1 } }), 'invalid_payload', 'invalid_payload');
    expectErrorFrame(await a.socket.request('chat.join', { channel_id: LONE_LOW }), 'invalid_payload', 'invalid_payload');
    expectErrorFrame(await a.socket.request('no.such.type', { x: NUL }), 'unknown_type', 'unknown_type');
    a.socket.close();
  });

  it('rpc.call answers rpc.error invalid_payload', async () => {
    const a = await connectPlayer(s);
    const f = await a.socket.request('rpc.call', { protocol: 1, method: 'x', params: { v: NUL } });
    expect(f.type).toBe('rpc.error');
    expect(f.payload.error.code).toBe('invalid_payload');
    a.socket.close();
  });
});
