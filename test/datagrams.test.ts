import { createSocket } from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LiveHost } from '../host/realtime/live';
import type { DatagramPlane } from '../host/realtime/datagram/plane';
import { REPLY_TABLE } from '../host/realtime/datagram/wire';
import { parseSettings, SettingsError } from '../runtime/contracts/settings';
import { encodePoseDatagrams, Opcode } from '../runtime/worlds/pose-datagram';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, registerPlayer, TestSocket } from './support/ws-client';
import { DatagramClient, decodePose, OP, uplink, type Mint } from './support/datagram-client';

/**
 * The datagram plane, black-box over real UDP on 127.0.0.1: minted over the socket's
 * `rpc.call asobi.datagram.open`, driven by a client written from the reference's published
 * layout (test/support/datagram-client.ts), its drops read from the metrics listener.
 */

const FIELDS = [
  { name: 'x', scale: 100 },
  { name: 'y', scale: 100 },
];

let s: TestServer;
let plane: DatagramPlane;

beforeAll(async () => {
  s = await startTestServer({ metrics_port: 0, datagrams: { port: 0, host: '127.0.0.1', endpoint: '127.0.0.1', pose_fields: FIELDS } });
  plane = (s.ctx.live as LiveHost).datagrams!;
});
afterAll(async () => {
  await s.close();
});

/** A player on the binary wire, as the SDKs that open the plane connect. */
async function binaryPlayer(): Promise<{ socket: TestSocket; playerId: string; token: string }> {
  const player = await registerPlayer(s, 'dg');
  const socket = await TestSocket.open(s);
  const reply = await socket.request('session.connect', { token: player.token, wire: 'binary' });
  expect(reply.payload.wire).toBe('binary');
  return { socket, playerId: player.playerId, token: player.token };
}

async function mint(socket: TestSocket): Promise<Mint> {
  const f = await socket.request('rpc.call', { protocol: 1, method: 'asobi.datagram.open', params: {} });
  expect(f.type).toBe('rpc.ok');
  return f.payload.result as Mint;
}

/** A bound connection: mint, hello, challenge, confirm. */
async function bound(): Promise<{ socket: TestSocket; playerId: string; token: string; client: DatagramClient }> {
  const p = await binaryPlayer();
  const client = await DatagramClient.open(await mint(p.socket));
  await client.bind();
  await until(() => plane.wantsPoses(p.playerId));
  return { ...p, client };
}

async function until(check: () => boolean, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** One tick's poses of zone (3, -2) for these positions, sent to these players. */
function poses(players: string[], positions: { slot: number; x: number; y: number }[], tick = 42): number {
  const batch = encodePoseDatagrams([3, -2], tick, positions.map((p) => ({ slot: p.slot, gen: 1, fields: { x: p.x, y: p.y } })), plane.manifest!);
  return plane.sendPoses(players, batch.bodies);
}

async function dropped(): Promise<Record<string, number>> {
  const text = await (await fetch(s.metricsUrl!)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^svc_datagrams_dropped_total\{reason="([a-z_]+)"\} (\d+)$/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

async function droppedSince(before: Record<string, number>, reason: string): Promise<number> {
  return ((await dropped())[reason] ?? 0) - (before[reason] ?? 0);
}

describe('minting', () => {
  it('answers conn_id, a 32-byte key, the epoch, the endpoint and the pose manifest, as the reference does', async () => {
    const p = await binaryPlayer();
    const m = await mint(p.socket);
    expect(Number.isInteger(m.conn_id) && m.conn_id > 0 && m.conn_id < 2 ** 32).toBe(true);
    expect(Buffer.from(m.kup, 'base64')).toHaveLength(32);
    expect(m.epoch).toBe(plane.epoch);
    expect(m.endpoint).toBe(`127.0.0.1:${plane.port}`);
    expect(m.fields).toEqual(FIELDS);
    expect(m.period_ticks).toBe(20);
    expect((m as unknown as { expires_in: number }).expires_in).toBe(60);
    // Minting again on the same socket replaces the connection: the old conn_id is gone.
    const again = await mint(p.socket);
    expect(again.conn_id).not.toBe(m.conn_id);
    const old = await DatagramClient.open(m);
    await old.hello();
    expect(await old.quiet(150)).toBe(true);
    old.close();
    p.socket.close();
  });

  it('is refused over HTTP: a connection lives and dies with a socket', async () => {
    const player = await registerPlayer(s, 'dg');
    const res = await s.call('POST', '/api/v1/rpc/asobi.datagram.open', { token: player.token, body: { params: {} } });
    expect(res.body.payload.error.code).toBe('datagram_unavailable');
  });
});

describe('binding', () => {
  it('challenges the hello address, binds on its echo, and only then sends poses there', async () => {
    const p = await binaryPlayer();
    const client = await DatagramClient.open(await mint(p.socket));
    await client.hello();
    const ok = await client.next(OP.hello_ok);
    expect(ok.size).toBe(24);
    expect(ok.connId).toBe(client.mint.conn_id);
    expect(ok.pathTag).toBe(0n);
    expect(ok.body).toHaveLength(8);
    // Challenged, not bound: nothing but the challenge goes to the address yet.
    expect(plane.wantsPoses(p.playerId)).toBe(false);
    expect(poses([p.playerId], [{ slot: 5, x: 1, y: 2 }])).toBe(0);
    // A wrong echo binds nothing.
    await client.send(OP.hello_confirm, Buffer.alloc(8, 7));
    expect(await client.quiet(100)).toBe(true);
    expect(plane.wantsPoses(p.playerId)).toBe(false);
    await client.hello();
    const second = await client.next(OP.hello_ok);
    await client.send(OP.hello_confirm, second.body);
    await until(() => plane.wantsPoses(p.playerId));
    expect(poses([p.playerId], [{ slot: 5, x: 12.5, y: -3.25 }])).toBe(1);
    const pose = await client.next(OP.pose);
    expect(pose.connId).toBe(client.mint.conn_id);
    const frame = decodePose(pose.body, 2)!;
    expect(frame).toMatchObject({ tick: 42, bseq: 0, zone: [3, -2], fieldmask: 3, epoch: client.mint.epoch });
    expect(frame.records).toEqual([{ slot: 5, gen: 1, values: [1250, -325] }]);
    client.close();
    p.socket.close();
  });

  it('sends poses only to bound connections of sockets on the binary wire', async () => {
    const a = await bound();
    const text = await connectPlayer(s, 'dg');
    const tc = await DatagramClient.open(await mint(text.socket));
    await tc.bind();
    const unbound = await binaryPlayer();
    const uc = await DatagramClient.open(await mint(unbound.socket));
    // The text-wire socket binds and may send input, but has no slot table to read a pose against.
    expect(plane.wantsPoses(text.playerId)).toBe(false);
    expect(poses([a.playerId, text.playerId, unbound.playerId], [{ slot: 1, x: 0, y: 0 }])).toBe(1);
    await a.client.next(OP.pose);
    expect(await tc.quiet(100)).toBe(true);
    expect(await uc.quiet(0)).toBe(true);
    for (const c of [a.client, tc, uc]) c.close();
    for (const so of [a.socket, text.socket, unbound.socket]) so.close();
  });

  it('rebinds when the client asks from a new address, keeping the downlink where it was until the echo, at most 3 times a minute', async () => {
    const a = await bound();
    const other = await DatagramClient.open(a.client.mint);
    const move = async (from: DatagramClient, to: DatagramClient) => {
      to.cseq = from.cseq;
      await to.hello();
      const ok = await to.next(OP.hello_ok);
      // Until the echo the poses still go to the address that proved itself.
      poses([a.playerId], [{ slot: 2, x: 1, y: 1 }]);
      await from.next(OP.pose);
      await to.send(OP.hello_confirm, ok.body);
      await until(() => {
        poses([a.playerId], [{ slot: 2, x: 1, y: 1 }]);
        return to.received.some((d) => d.opcode === OP.pose);
      });
      from.received.length = 0;
      to.received.length = 0;
    };
    await move(a.client, other);
    await move(other, a.client);
    await move(a.client, other);
    const before = await dropped();
    // A fourth within the minute tears the connection down: no challenge, nothing more sent.
    a.client.cseq = other.cseq;
    await a.client.hello();
    expect(await a.client.quiet(150)).toBe(true);
    expect(plane.wantsPoses(a.playerId)).toBe(false);
    expect(await droppedSince(before, 'rebind_limit')).toBe(1);
    a.client.close();
    other.close();
    a.socket.close();
  });

  it('answers a ping with a pong carrying its stamp, smaller than the ping (the client keepalive)', async () => {
    const a = await bound();
    const stamp = Buffer.from('01234567');
    await a.client.send(OP.ping, stamp);
    const p = await a.client.next(OP.pong);
    expect(p.size).toBe(32);
    expect(p.body.subarray(0, 8).equals(stamp)).toBe(true);
    expect(Math.abs(Number(p.body.readBigUInt64LE(8)) - Date.now())).toBeLessThan(5000);
    a.client.close();
    a.socket.close();
  });
});

describe('revocation', () => {
  const answersPing = async (client: DatagramClient) => {
    await client.send(OP.ping, Buffer.alloc(8));
    return !(await client.quiet(150));
  };

  it('ends the connection when its socket closes', async () => {
    const a = await bound();
    expect(await answersPing(a.client)).toBe(true);
    a.socket.close();
    await a.socket.closed;
    await until(() => !plane.wantsPoses(a.playerId));
    expect(await answersPing(a.client)).toBe(false);
    a.client.close();
  });

  it('ends it at logout, before the socket has finished closing', async () => {
    const a = await bound();
    const size = plane.size;
    const res = await s.call('POST', '/api/v1/auth/logout', { token: a.token, body: {} });
    expect(res.status).toBe(200);
    // The answer has come back: the connection is already gone.
    expect(plane.size).toBe(size - 1);
    expect(plane.wantsPoses(a.playerId)).toBe(false);
    expect(await answersPing(a.client)).toBe(false);
    a.client.close();
  });

  it('ends it when the player is disconnected, as erasure does, before the socket has finished closing', async () => {
    const a = await bound();
    const size = plane.size;
    s.ctx.live.disconnect(a.playerId);
    expect(plane.size).toBe(size - 1);
    expect(await answersPing(a.client)).toBe(false);
    a.client.close();
  });

  it('ends it on asobi.datagram.close, and on a re-auth as another player', async () => {
    const a = await bound();
    const closed = await a.socket.request('rpc.call', { protocol: 1, method: 'asobi.datagram.close', params: { conn_id: a.client.mint.conn_id } });
    expect(closed.payload.result).toEqual({ closed: true });
    expect(await answersPing(a.client)).toBe(false);
    const bad = await a.socket.request('rpc.call', { protocol: 1, method: 'asobi.datagram.close', params: {} });
    expect(bad.payload.error.code).toBe('rpc.invalid_params');

    const client = await DatagramClient.open(await mint(a.socket));
    await client.bind();
    expect(await answersPing(client)).toBe(true);
    const other = await registerPlayer(s, 'dg');
    await a.socket.request('session.connect', { token: other.token, wire: 'binary' });
    expect(await answersPing(client)).toBe(false);
    client.close();
    a.client.close();
    a.socket.close();
  });

  it("leaves another player's connection alone on asobi.datagram.close", async () => {
    const a = await bound();
    const b = await binaryPlayer();
    const f = await b.socket.request('rpc.call', { protocol: 1, method: 'asobi.datagram.close', params: { conn_id: a.client.mint.conn_id } });
    expect(f.payload.result).toEqual({ closed: true });
    expect(await answersPing(a.client)).toBe(true);
    a.client.close();
    a.socket.close();
    b.socket.close();
  });
});

describe('forged and malformed datagrams', () => {
  it('are dropped without a word and counted by reason', async () => {
    const a = await bound();
    const c = a.client;
    const before = await dropped();
    const hello = c.build(OP.hello, Buffer.alloc(0), 64);
    const tampered = Buffer.from(hello);
    tampered[30] = tampered[30]! ^ 1;
    const stranger = uplink(OP.hello, (c.mint.conn_id + 1) >>> 0 || 1, 1, Buffer.alloc(0), c.key, 64);
    const flagged = Buffer.from(hello);
    flagged[3] = 1;
    const tagged = Buffer.from(hello);
    tagged[9] = 1;
    const serverOp = Buffer.from(hello);
    serverOp[2] = OP.pose;
    const cases: [Buffer, string][] = [
      [Buffer.from('hello?'), 'malformed'],
      [Buffer.alloc(64), 'malformed'],
      [flagged, 'malformed'],
      [tagged, 'malformed'],
      [serverOp, 'malformed'],
      [c.build(OP.hello), 'malformed'], // unpadded: a hello_ok would outweigh it
      [Buffer.concat([c.build(OP.input, Buffer.alloc(1100))]), 'malformed'],
      [stranger, 'unknown_conn'],
      [tampered, 'mac'],
      [uplink(OP.ping, c.mint.conn_id, c.cseq + 1, Buffer.alloc(8), Buffer.alloc(32, 1)), 'mac'],
    ];
    for (const [bytes] of cases) await c.sendRaw(bytes);
    // A replay: the same authenticated ping twice; the second is dropped.
    const ping = c.build(OP.ping, Buffer.alloc(8));
    await c.sendRaw(ping);
    await c.next(OP.pong);
    await c.sendRaw(ping);
    expect(await c.quiet(200)).toBe(true);
    const want: Record<string, number> = { replay: 1 };
    for (const [, reason] of cases) want[reason] = (want[reason] ?? 0) + 1;
    await until(() => true);
    for (const [reason, n] of Object.entries(want)) expect([reason, await droppedSince(before, reason)]).toEqual([reason, n]);
    // The connection itself is unharmed.
    await c.send(OP.ping, Buffer.alloc(8));
    await c.next(OP.pong);
    c.close();
    a.socket.close();
  });
});

describe('amplification', () => {
  it('no reply in the frame table is larger than the smallest request that earns it, and every uplink opcode has a row', () => {
    const uplinks = [Opcode.hello, Opcode.helloConfirm, Opcode.ping, Opcode.bye, Opcode.input];
    expect([...REPLY_TABLE.keys()].sort()).toEqual(uplinks.sort());
    for (const [op, row] of REPLY_TABLE) {
      expect([op, row.replyBytes <= row.minRequest]).toEqual([op, true]);
      if (row.reply === null) expect(row.replyBytes).toBe(0);
    }
  });

  it('holds on the wire: each kind at its smallest gets the reply the table says, at its size, and nothing else', async () => {
    const a = await bound();
    const c = a.client;
    const collect = async (bytes: Buffer) => {
      c.received.length = 0;
      await c.sendRaw(bytes);
      await new Promise((r) => setTimeout(r, 150));
      return c.received.map((d) => d.size);
    };
    const sizes = {
      [Opcode.hello]: await collect(c.build(OP.hello, Buffer.alloc(0), 64)),
      [Opcode.helloConfirm]: await collect(c.build(OP.hello_confirm, Buffer.alloc(8))),
      [Opcode.ping]: await collect(c.build(OP.ping, Buffer.alloc(8))),
      [Opcode.input]: await collect(c.build(OP.input, Buffer.alloc(0))),
      [Opcode.bye]: await collect(c.build(OP.bye)),
    };
    for (const [op, row] of REPLY_TABLE) {
      const got = sizes[op as keyof typeof sizes];
      expect([op, got]).toEqual([op, row.reply === null ? [] : [row.replyBytes]]);
    }
    c.close();
    a.socket.close();
  });
});

describe('input over the plane', () => {
  it('reaches the input callback with the player, the input and its seq, as the socket frame would', async () => {
    const a = await bound();
    const got: unknown[] = [];
    plane.onInput = (playerId, input, seq) => got.push({ playerId, input, seq });
    try {
      await a.client.send(OP.input, Buffer.from(JSON.stringify({ input: { move: 'left' }, seq: 7 })));
      await a.client.send(OP.input, Buffer.from(JSON.stringify({ data: { fire: true } })));
      await a.client.send(OP.input, Buffer.from(JSON.stringify({ dx: 1, seq: 'x' })));
      await until(() => got.length === 3);
      expect(got).toEqual([
        { playerId: a.playerId, input: { move: 'left' }, seq: 7 },
        { playerId: a.playerId, input: { fire: true }, seq: null },
        { playerId: a.playerId, input: { dx: 1, seq: 'x' }, seq: null },
      ]);
      const before = await dropped();
      await a.client.send(OP.input, Buffer.from('{not json'));
      await a.client.send(OP.input, Buffer.from('[1,2]'));
      plane.onInput = null;
      await a.client.send(OP.input, Buffer.from('{}'));
      await until(() => true);
      await new Promise((r) => setTimeout(r, 100));
      expect(await droppedSince(before, 'input_malformed')).toBe(2);
      expect(await droppedSince(before, 'input_unrouted')).toBe(1);
      expect(got).toHaveLength(3);
    } finally {
      plane.onInput = null;
      a.client.close();
      a.socket.close();
    }
  });

  it('is budgeted per connection, like the socket', async () => {
    const a = await bound();
    let n = 0;
    plane.onInput = () => n++;
    try {
      const before = await dropped();
      for (let i = 0; i < 70; i++) await a.client.send(OP.input, Buffer.from('{}'));
      await new Promise((r) => setTimeout(r, 150));
      expect(n).toBeLessThanOrEqual(60);
      expect(n + (await droppedSince(before, 'input_budget'))).toBe(70);
    } finally {
      plane.onInput = null;
      a.client.close();
      a.socket.close();
    }
  });
});

describe('settings and fallback', () => {
  it('is off by default: the SDK call answers datagram_unavailable and play goes on over the socket', async () => {
    const off = await startTestServer();
    try {
      expect((off.ctx.live as LiveHost).datagrams).toBeNull();
      const p = await connectPlayer(off, 'dg');
      const f = await p.socket.request('rpc.call', { protocol: 1, method: 'asobi.datagram.open', params: {} });
      expect(f.type).toBe('rpc.error');
      expect(f.payload.error.code).toBe('datagram_unavailable');
      const hb = await p.socket.request('session.heartbeat', {});
      expect(hb.type).toBe('session.heartbeat');
      p.socket.close();
    } finally {
      await off.close();
    }
  });

  it('refuses an invalid setting naming it, and a port it cannot bind', async () => {
    const problem = (raw: unknown) => {
      try {
        parseSettings(raw);
        return null;
      } catch (err) {
        return (err as SettingsError).key;
      }
    };
    expect(problem({ datagrams: { port: 7777 } })).toBe('datagrams.endpoint');
    expect(problem({ datagrams: { port: 7777, endpoint: 'udp://x' } })).toBe('datagrams.endpoint');
    expect(problem({ datagrams: { port: 70000, endpoint: 'a' } })).toBe('datagrams.port');
    expect(problem({ datagrams: { port: 1, endpoint: 'a', pose_fields: [{ name: 'x', scale: 1 }, { name: 'x', scale: 2 }] } })).toBe('datagrams.pose_fields');
    expect(problem({ datagrams: { port: 1, endpoint: 'a', pose_fields: Array.from({ length: 9 }, (_, i) => ({ name: `f${i}`, scale: 1 })) } })).toBe('datagrams.pose_fields');
    expect(problem({ datagrams: { port: 1, endpoint: 'game.example.com:7777' } })).toBeNull();

    const taken = createSocket('udp4');
    await new Promise<void>((r) => taken.bind(0, '127.0.0.1', () => r()));
    try {
      await expect(startTestServer({ datagrams: { port: taken.address().port, host: '127.0.0.1', endpoint: 'x' } })).rejects.toThrow(/datagrams\.port/);
    } finally {
      taken.close();
    }
  });

  it('mints input-only connections when the binary wire is off: no fields, no poses', async () => {
    const text = await startTestServer({ binary_wire: false, datagrams: { port: 0, host: '127.0.0.1', endpoint: '127.0.0.1', pose_fields: FIELDS } });
    try {
      const p = await connectPlayer(text, 'dg');
      const f = await p.socket.request('rpc.call', { protocol: 1, method: 'asobi.datagram.open', params: {} });
      expect(f.payload.result).toMatchObject({ fields: [], period_ticks: 0 });
      expect((text.ctx.live as LiveHost).datagrams!.manifest).toBeNull();
      p.socket.close();
    } finally {
      await text.close();
    }
  });
});
