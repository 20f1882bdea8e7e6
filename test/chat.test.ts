import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, TestSocket, type Frame } from './support/ws-client';

const CHANNELS = Array.from({ length: 40 }, (_, i) => `c${i}`);
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({
    rate_limits: { ws_connect: { limit: 1000, window: 1000 } },
    game_modes: { arena: { chat_channels: ['lobby', 'trade', ...CHANNELS] } },
    chat_idle_stop_ms: 300,
    chat_send_rate: { limit: 40, window: 1000 },
  });
});
afterAll(async () => {
  await s.close();
});

type Player = Awaited<ReturnType<typeof connectPlayer>>;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const history = (p: Player, channel: string, q = '') => s.call('GET', `/api/v1/chat/${encodeURIComponent(channel)}/history${q}`, { token: p.token });
const dmId = (a: string, b: string) => (a < b ? `dm:${a}:${b}` : `dm:${b}:${a}`);

function expectFrameError(f: Frame, reason: string, code: string) {
  expect(f.type, JSON.stringify(f)).toBe('error');
  expect(f.payload.reason).toBe(reason);
  expect(f.payload.error.code).toBe(code);
  expect(f.payload.error.details).toBeTypeOf('object');
}

async function groupWith(owner: Player, ...others: Player[]): Promise<string> {
  const g = await s.call('POST', '/api/v1/groups', { token: owner.token, body: { name: 'Chatters', open: true } });
  for (const p of others) await s.call('POST', `/api/v1/groups/${g.body.id}/join`, { token: p.token });
  return g.body.id;
}

describe('chat.join membership rules per prefix', () => {
  it('admits declared global channels, DM participants and group members; refuses everyone else', async () => {
    const [a, b, c] = [await connectPlayer(s), await connectPlayer(s), await connectPlayer(s)];
    const room = `room:${await groupWith(a, b)}`;
    const dm = dmId(a.playerId, b.playerId);
    for (const id of ['global:lobby', dm, room]) {
      expect(await a.socket.request('chat.join', { channel_id: id })).toMatchObject({ type: 'chat.joined', payload: { channel_id: id } });
    }
    expectFrameError(await c.socket.request('chat.join', { channel_id: 'global:undeclared' }), 'not_authorized', 'forbidden');
    expectFrameError(await c.socket.request('chat.join', { channel_id: dm }), 'not_authorized', 'forbidden');
    expectFrameError(await c.socket.request('chat.join', { channel_id: room }), 'not_authorized', 'forbidden');
    // A DM with a player that does not exist.
    const ghost = dmId(c.playerId, '0190c1f2-aaaa-7000-8000-000000000001');
    expectFrameError(await c.socket.request('chat.join', { channel_id: ghost }), 'not_authorized', 'forbidden');
    for (const p of [a, b, c]) p.socket.close();
  });

  it('refuses world, zone and proximity channels for everyone while no world host runs', async () => {
    const a = await connectPlayer(s);
    const w = '0190c1f5-2222-7000-8000-000000000007';
    for (const id of [`world:${w}`, `zone:${w}:1,2`, `prox:${w}:-3,4`]) {
      const f = await a.socket.request('chat.join', { channel_id: id });
      expectFrameError(f, 'not_authorized', 'forbidden');
      expect((await history(a, id)).status).toBe(403);
    }
    a.socket.close();
  });

  it('answers malformed ids invalid_channel_id', async () => {
    const a = await connectPlayer(s);
    const b = await connectPlayer(s);
    const [lo, hi] = [a.playerId, b.playerId].sort();
    const bad = [undefined, 42, '', 'lobby', 'chat:x', `global:${'x'.repeat(65)}`, `room:${'x'.repeat(260)}`, 'room:not-a-uuid', `dm:${hi}:${lo}`, `dm:${lo}:${lo}`, 'world:abc'];
    for (const channel_id of bad) {
      expectFrameError(await a.socket.request('chat.join', channel_id === undefined ? {} : { channel_id }), 'invalid_channel_id', 'chat.invalid_channel_id');
    }
    // Wire-protocol 2.4: no payload at all is unknown_type; a payload that is not an object, invalid_payload.
    expectFrameError(await a.socket.request('chat.join'), 'unknown_type', 'unknown_type');
    expectFrameError(await a.socket.request('chat.join', 'global:lobby'), 'invalid_payload', 'invalid_payload');
    a.socket.close();
    b.socket.close();
  });

  it('chat.leave answers chat.left whether or not joined; a missing or non-string channel_id is unknown_type', async () => {
    const a = await connectPlayer(s);
    expect(await a.socket.request('chat.leave', { channel_id: 'global:never-joined' })).toMatchObject({ type: 'chat.left', payload: { channel_id: 'global:never-joined' } });
    for (const payload of [undefined, {}, { channel_id: 5 }]) {
      expectFrameError(await a.socket.request('chat.leave', payload), 'unknown_type', 'unknown_type');
    }
    expectFrameError(await a.socket.request('chat.leave', ['global:lobby']), 'invalid_payload', 'invalid_payload');
    a.socket.close();
  });

  it('caps a connection at 32 joined channels, re-joins included', async () => {
    const a = await connectPlayer(s);
    for (const name of CHANNELS.slice(0, 32)) expect((await a.socket.request('chat.join', { channel_id: `global:${name}` })).type).toBe('chat.joined');
    expectFrameError(await a.socket.request('chat.join', { channel_id: 'global:c32' }), 'too_many_channels', 'chat.too_many_channels');
    expectFrameError(await a.socket.request('chat.join', { channel_id: 'global:c0' }), 'too_many_channels', 'chat.too_many_channels');
    expect((await a.socket.request('chat.leave', { channel_id: 'global:c0' })).type).toBe('chat.left');
    expect((await a.socket.request('chat.join', { channel_id: 'global:c32' })).type).toBe('chat.joined');
    // The cap is per connection: a second socket of the same player starts empty.
    const second = await TestSocket.open(s);
    await second.request('session.connect', { token: a.token });
    expect((await second.request('chat.join', { channel_id: 'global:c33' })).type).toBe('chat.joined');
    a.socket.close();
    second.close();
  });
});

describe('chat.send and chat.message', () => {
  it('fans a message out to every joined connection, the sender too, without a reply', async () => {
    const [a, b, c] = [await connectPlayer(s), await connectPlayer(s), await connectPlayer(s)];
    for (const p of [a, b]) await p.socket.request('chat.join', { channel_id: 'global:trade' });
    const before = Date.now();
    a.socket.send({ type: 'chat.send', cid: 'm1', payload: { channel_id: 'global:trade', content: 'selling swords' } });
    for (const p of [a, b]) {
      const m = await p.socket.next('chat.message');
      expect(m.payload).toEqual({ channel_id: 'global:trade', sender_id: a.playerId, content: 'selling swords', sent_at: expect.any(Number) });
      expect(m.payload.sent_at).toBeGreaterThanOrEqual(before - 5);
      expect('cid' in m).toBe(false);
    }
    // Not joined: c may still send (authorised), and receives nothing.
    c.socket.send({ type: 'chat.send', payload: { channel_id: 'global:trade', content: 'me too' } });
    expect((await b.socket.next('chat.message')).payload.sender_id).toBe(c.playerId);
    expect(await c.socket.quiet('chat.message', 200)).toBe(true);
    expect(await a.socket.quiet((f) => f.cid === 'm1', 100)).toBe(true);
    // After leaving, nothing more arrives.
    expect((await b.socket.request('chat.leave', { channel_id: 'global:trade' })).payload).toEqual({ channel_id: 'global:trade' });
    a.socket.send({ type: 'chat.send', payload: { channel_id: 'global:trade', content: 'anyone?' } });
    await a.socket.next('chat.message');
    expect(await b.socket.quiet('chat.message', 200)).toBe(true);
    for (const p of [a, b, c]) p.socket.close();
  });

  it('stores every message; the send settles (later frames of the socket wait) only once it is stored', async () => {
    const a = await connectPlayer(s);
    for (let i = 0; i < 20; i++) a.socket.send({ type: 'chat.send', payload: { channel_id: 'global:c37', content: `p${i}` } });
    await a.socket.request('session.heartbeat');
    const rows = await s.ctx.db.selectFrom('chat_messages').select('content').where('channel_id', '=', 'global:c37').orderBy('id').execute();
    expect(rows.map((r) => r.content)).toEqual(Array.from({ length: 20 }, (_, i) => `p${i}`));
    a.socket.close();
  });

  it('broadcasts empty content on a channel (as the reference server does) without a reply', async () => {
    const a = await connectPlayer(s);
    await a.socket.request('chat.join', { channel_id: 'global:lobby' });
    a.socket.send({ type: 'chat.send', cid: 'empty', payload: { channel_id: 'global:lobby', content: '' } });
    expect((await a.socket.next('chat.message')).payload).toMatchObject({ sender_id: a.playerId, content: '' });
    expect(await a.socket.quiet((f) => f.cid === 'empty', 100)).toBe(true);
    a.socket.close();
  });

  it('rejects non-string, oversized or missing content and unauthorised channels', async () => {
    const a = await connectPlayer(s);
    const send = (payload: unknown) => a.socket.request('chat.send', payload);
    expectFrameError(await send(undefined), 'unknown_type', 'unknown_type');
    expectFrameError(await send({ channel_id: 'global:lobby', content: 7 }), 'invalid_payload', 'invalid_payload');
    expectFrameError(await send({ channel_id: 'global:lobby', content: 'é'.repeat(1001) }), 'invalid_payload', 'invalid_payload');
    expectFrameError(await send({ channel_id: 'global:lobby' }), 'invalid_payload', 'invalid_payload');
    expectFrameError(await send({ content: 'hi' }), 'invalid_payload', 'invalid_payload');
    expectFrameError(await send({ channel_id: 5, content: 'hi' }), 'invalid_payload', 'invalid_payload');
    expectFrameError(await send('nope'), 'invalid_payload', 'invalid_payload');
    expectFrameError(await send({ channel_id: 'bogus', content: 'hi' }), 'not_authorized', 'forbidden');
    expectFrameError(await send({ channel_id: 'global:undeclared', content: 'hi' }), 'not_authorized', 'forbidden');
    // Exactly 2000 bytes is fine.
    await a.socket.request('chat.join', { channel_id: 'global:lobby' });
    a.socket.send({ type: 'chat.send', payload: { channel_id: 'global:lobby', content: 'é'.repeat(1000) } });
    expect((await a.socket.next('chat.message')).payload.content).toHaveLength(1000);
    a.socket.close();
  });

  it('limits chat sends per connection (setting chat_send_rate)', async () => {
    const a = await connectPlayer(s);
    for (let i = 0; i < 41; i++) a.socket.send({ type: 'chat.send', cid: `r${i}`, payload: { channel_id: 'global:c39', content: `n${i}` } });
    const limited = await a.socket.next((f) => f.type === 'error');
    expectFrameError(limited, 'rate_limited', 'rate_limited');
    expect(limited.cid).toBe('r40');
    expect(limited.payload.error.details.retry_after).toBeGreaterThanOrEqual(1);
    a.socket.close();
  });

  it('drops a kicked member from the group channel', async () => {
    const [owner, member] = [await connectPlayer(s), await connectPlayer(s)];
    const group = await groupWith(owner, member);
    const room = `room:${group}`;
    for (const p of [owner, member]) await p.socket.request('chat.join', { channel_id: room });
    await s.call('DELETE', `/api/v1/groups/${group}/members/${member.playerId}`, { token: owner.token });
    owner.socket.send({ type: 'chat.send', payload: { channel_id: room, content: 'bye' } });
    await owner.socket.next('chat.message');
    expect(await member.socket.quiet('chat.message', 200)).toBe(true);
    expectFrameError(await member.socket.request('chat.send', { channel_id: room, content: 'hey' }), 'not_authorized', 'forbidden');
    expect((await history(member, room)).status).toBe(403);
    owner.socket.close();
    member.socket.close();
  });
});

describe('channel buffer, idle stop and history', () => {
  it('keeps the last 100 messages of a running channel in memory', async () => {
    const listener = await connectPlayer(s);
    const senders = [await connectPlayer(s), await connectPlayer(s), await connectPlayer(s)];
    await listener.socket.request('chat.join', { channel_id: 'global:c38' });
    senders.forEach((p, k) => {
      for (let i = 0; i < 35; i++) p.socket.send({ type: 'chat.send', payload: { channel_id: 'global:c38', content: `s${k}-${i}` } });
    });
    const seen: string[] = [];
    for (let i = 0; i < 105; i++) seen.push((await listener.socket.next('chat.message')).payload.content);
    expect(new Set(seen).size).toBe(105);
    const buffered = s.ctx.live.chat.recent('global:c38')!;
    expect(buffered.map((m) => m.content)).toEqual(seen.slice(5));
    for (const p of [listener, ...senders]) p.socket.close();
  });

  it('stops a channel with no live members after chat_idle_stop_ms; its history stays readable', async () => {
    const [a, b] = [await connectPlayer(s), await connectPlayer(s)];
    const room = `room:${await groupWith(a, b)}`;
    await a.socket.request('chat.join', { channel_id: room });
    for (const text of ['one', 'two', 'three']) {
      a.socket.send({ type: 'chat.send', payload: { channel_id: room, content: text } });
      await a.socket.next('chat.message');
    }
    await a.socket.request('session.heartbeat');
    // A channel with a member keeps running past the idle time.
    await sleep(500);
    expect(s.ctx.live.chat.recent(room)).toHaveLength(3);
    await a.socket.request('chat.leave', { channel_id: room });
    expect(s.ctx.live.chat.recent(room)).toHaveLength(3);
    await sleep(600);
    expect(s.ctx.live.chat.recent(room)).toBeNull();

    const res = await history(b, room);
    expect(res.status).toBe(200);
    expect(res.body.messages.map((m: any) => m.content)).toEqual(['one', 'two', 'three']);
    expect(res.body.messages[0]).toEqual({
      id: expect.any(String),
      channel_type: 'room',
      channel_id: room,
      sender_id: a.playerId,
      content: 'one',
      metadata: {},
      sent_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
    });
    // A socket that closes counts as leaving.
    await b.socket.request('chat.join', { channel_id: room });
    b.socket.close();
    await b.socket.closed;
    await sleep(600);
    expect(s.ctx.live.chat.recent(room)).toBeNull();
    a.socket.close();
  });

  it('serves history oldest first within the newest `limit`, with a before cursor; refuses non-members and bad ids', async () => {
    const [a, b, outsider] = [await connectPlayer(s), await connectPlayer(s), await connectPlayer(s)];
    const room = `room:${await groupWith(a, b)}`;
    await a.socket.request('chat.join', { channel_id: room });
    for (let i = 0; i < 60; i++) {
      a.socket.send({ type: 'chat.send', payload: { channel_id: room, content: `m${i}` } });
      await a.socket.next('chat.message');
      if (i === 35) await sleep(1000); // stay inside chat_send_rate
    }
    // A later reply on the sender's socket means every earlier send is stored.
    await a.socket.request('session.heartbeat');
    const contents = (r: { body: any }) => r.body.messages.map((m: any) => m.content);
    const all = Array.from({ length: 60 }, (_, i) => `m${i}`);
    expect(contents(await history(b, room))).toEqual(all.slice(10));
    expect(contents(await history(b, room, '?limit=5'))).toEqual(all.slice(55));
    expect(contents(await history(b, room, '?limit=0'))).toEqual(all.slice(59));
    expect(contents(await history(b, room, '?limit=500'))).toEqual(all);
    expect(contents(await history(b, room, '?limit=x'))).toEqual(all.slice(10));
    const last5 = (await history(b, room, '?limit=5')).body.messages;
    expect(contents(await history(b, room, `?limit=5&before=${last5[0].id}`))).toEqual(all.slice(50, 55));

    expect((await history(outsider, room)).body.error.code).toBe('forbidden');
    for (const bad of ['nope', 'room:xyz', '', 'global:undeclared']) {
      const res = await s.call('GET', `/api/v1/chat/${encodeURIComponent(bad)}/history`, { token: outsider.token });
      if (bad === '') expect(res.status).toBe(404);
      else expect([res.status, res.body.error.code]).toEqual([403, 'forbidden']);
    }
    // Every path parameter is decoded before any route sees it: a malformed escape names the parameter.
    const undecodable = await s.call('GET', '/api/v1/chat/%E0%A4%A/history', { token: a.token });
    expect([undecodable.status, undecodable.body.error.code, Object.keys(undecodable.body.errors)]).toEqual([422, 'validation_failed', ['channel_id']]);
    expect((await s.call('GET', `/api/v1/chat/${encodeURIComponent(room)}/history`)).status).toBe(401);
    for (const p of [a, b, outsider]) p.socket.close();
  });
});

describe('one message never costs another its storage', () => {
  /** Ten honest members and one more in a fresh room, every one joined to its channel. */
  async function busyRoom(): Promise<{ honest: Player[]; other: Player; room: string }> {
    const honest: Player[] = [];
    for (let i = 0; i < 10; i++) honest.push(await connectPlayer(s));
    const other = await connectPlayer(s);
    const room = `room:${await groupWith(honest[0]!, ...honest.slice(1), other)}`;
    for (const p of [...honest, other]) expect((await p.socket.request('chat.join', { channel_id: room })).type).toBe('chat.joined');
    return { honest, other, room };
  }

  /** Each honest member sends `count` messages at once, interleaved with the other's sends. */
  function sendAll(honest: Player[], room: string, count: number, interleave: (i: number) => void): string[] {
    const sent: string[] = [];
    for (let i = 0; i < count; i++) {
      honest.forEach((p, n) => {
        const content = `h${n}-${i}`;
        sent.push(content);
        p.socket.send({ type: 'chat.send', cid: content, payload: { channel_id: room, content } });
      });
      interleave(i);
    }
    return sent;
  }

  /** Every honest message reached every member, none was refused, and history holds exactly them. */
  async function expectAllStored(honest: Player[], other: Player, room: string, sent: string[]): Promise<void> {
    // Frames of a socket settle in order, so a reply to a later one means every send before it is settled.
    for (const p of [...honest, other]) await p.socket.request('session.heartbeat');
    for (const p of honest) expect(p.socket.frames.filter((f) => f.type === 'error')).toEqual([]);
    for (const p of [...honest, other]) {
      const received: string[] = [];
      while (received.length < sent.length) received.push((await p.socket.next('chat.message')).payload.content);
      expect(received.sort()).toEqual([...sent].sort());
      expect(await p.socket.quiet('chat.message', 100)).toBe(true);
    }
    const stored = await s.call('GET', `/api/v1/chat/${encodeURIComponent(room)}/history?limit=200`, { token: honest[0]!.token });
    expect(stored.status).toBe(200);
    expect(stored.body.messages.map((m: { content: string }) => m.content).sort()).toEqual([...sent].sort());
  }

  it('a member sending text the database cannot store is refused alone; 90 honest messages are stored and delivered', async () => {
    const { honest, other, room } = await busyRoom();
    const sent = sendAll(honest, room, 9, (i) => other.socket.send({ type: 'chat.send', cid: `bad${i}`, payload: { channel_id: room, content: `x\u0000${i}` } }));
    await expectAllStored(honest, other, room, sent);
    const refusals = other.socket.frames.filter((f) => f.type === 'error');
    expect(refusals.map((f) => [f.cid, f.payload.reason, f.payload.error.details])).toEqual(Array.from({ length: 9 }, (_, i) => [`bad${i}`, 'invalid_payload', { field: 'content' }]));
    for (const p of [...honest, other]) p.socket.close();
  });

  it('a row the database refuses for its own reasons fails alone: its batch is retried row by row, and it reaches nobody', async () => {
    // The fault: a trigger that refuses one content, standing in for any per-row failure.
    await sql`create or replace function refuse_poison() returns trigger language plpgsql as $$
      begin if new.content = 'poison' then raise exception 'poisoned row'; end if; return new; end $$`.execute(s.ctx.db);
    await sql`create trigger refuse_poison before insert on chat_messages for each row execute function refuse_poison()`.execute(s.ctx.db);
    try {
      const { honest, other, room } = await busyRoom();
      const sent = sendAll(honest, room, 9, (i) => other.socket.send({ type: 'chat.send', cid: `p${i}`, payload: { channel_id: room, content: 'poison' } }));
      await expectAllStored(honest, other, room, sent);
      const refusals = other.socket.frames.filter((f) => f.type === 'error');
      expect(refusals.map((f) => [f.cid, f.payload.reason, f.payload.error.code])).toEqual(Array.from({ length: 9 }, (_, i) => [`p${i}`, 'internal_error', 'internal']));
      for (const p of [...honest, other]) p.socket.close();
    } finally {
      await sql`drop trigger refuse_poison on chat_messages`.execute(s.ctx.db);
    }
  });
});
