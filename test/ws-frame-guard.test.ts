import fc from 'fast-check';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { connect, type Socket } from 'node:net';
import { PassThrough, type Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as wsModule from 'ws';
import WebSocket from 'ws';
import { FrameFilter, guardSocket, MAX_FRAGMENTS, OVERSIZED_MARKER } from '../host/realtime/frame-guard';
import { startTestServer, type TestServer } from './support/server';
import { expectErrorFrame, TestSocket, type Frame } from './support/ws-client';

const CAP = 65_536;
const MiB = 1024 * 1024;
const TEXT = 0x1;
const BINARY = 0x2;
const CONTINUATION = 0x0;
const PING = 0x9;

/** A client-to-server frame as a browser would send it: masked with a non-zero key. */
function clientFrame(opcode: number, payload: Buffer | string, options: { fin?: boolean; key?: number[] } = {}): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const key = options.key ?? [0x5a, 0xc3, 0x17, 0x8e];
  const len = body.length;
  const ext = len < 126 ? 0 : len < 65_536 ? 2 : 8;
  const head = Buffer.alloc(2 + ext + 4);
  head[0] = (options.fin === false ? 0 : 0x80) | opcode;
  head[1] = 0x80 | (ext === 0 ? len : ext === 2 ? 126 : 127);
  if (ext === 2) head.writeUInt16BE(len, 2);
  if (ext === 8) head.writeBigUInt64BE(BigInt(len), 2);
  Buffer.from(key).copy(head, 2 + ext);
  const masked = Buffer.allocUnsafe(len);
  for (let i = 0; i < len; i++) masked[i] = body[i]! ^ key[i & 3]!;
  return Buffer.concat([head, masked]);
}

const markerFrame = () => clientFrame(BINARY, OVERSIZED_MARKER, { key: [0, 0, 0, 0] });

/** Feeds `input` to a fresh filter cut at the given offsets; returns what it handed on. */
function filtered(input: Buffer, cuts: number[] | 'bytes' = [], cap = CAP): Buffer {
  const out: Buffer[] = [];
  const filter = new FrameFilter(cap, (piece) => out.push(Buffer.from(piece)));
  const at = cuts === 'bytes' ? Array.from({ length: input.length - 1 }, (_, i) => i + 1) : [...cuts].sort((a, b) => a - b);
  let from = 0;
  for (const cut of [...at, input.length]) {
    if (cut > from) filter.write(input.subarray(from, cut));
    from = Math.max(from, cut);
  }
  return Buffer.concat(out);
}

interface Decoded {
  messages: { data: string; binary: boolean }[];
  pings: string[];
  error: string | null;
}

/** What `ws` itself makes of a client byte stream. */
async function decode(stream: Buffer): Promise<Decoded> {
  const { Receiver } = wsModule as unknown as { Receiver: new (o: object) => import('node:stream').Writable };
  const receiver = new Receiver({ isServer: true, maxFragments: MAX_FRAGMENTS });
  const decoded: Decoded = { messages: [], pings: [], error: null };
  receiver.on('message', (data: Buffer, binary: boolean) => decoded.messages.push({ data: data.toString('latin1'), binary }));
  receiver.on('ping', (data: Buffer) => decoded.pings.push(data.toString()));
  await new Promise<void>((resolve) => {
    receiver.on('error', (err: Error & { code?: string }) => {
      decoded.error = err.code ?? err.message;
      resolve();
    });
    receiver.end(stream, () => resolve());
  });
  return decoded;
}

describe('FrameFilter', () => {
  it('hands on frames within the cap unchanged, whatever the cut, 7-, 16- and 64-bit lengths alike', () => {
    // 65,536 bytes is the first length written in 64 bits, and exactly the cap.
    const stream = Buffer.concat([
      clientFrame(TEXT, 'hi'),
      clientFrame(TEXT, 'x'.repeat(125)),
      clientFrame(TEXT, 'y'.repeat(126)),
      clientFrame(BINARY, Buffer.alloc(65_535, 7)),
      clientFrame(TEXT, 'z'.repeat(CAP)),
      clientFrame(PING, 'p'),
      clientFrame(TEXT, ''),
    ]);
    expect(filtered(stream).equals(stream)).toBe(true);
    expect(filtered(stream, 'bytes').equals(stream)).toBe(true);
  });

  it('hands on a whole chunk as the same buffer, without copying', () => {
    const chunk = Buffer.concat([clientFrame(TEXT, 'a'), clientFrame(TEXT, 'b'.repeat(300))]);
    const out: Buffer[] = [];
    new FrameFilter(CAP, (piece) => out.push(piece)).write(chunk);
    expect(out).toHaveLength(1);
    expect(out[0]).toBe(chunk);
  });

  it('replaces a frame over the cap by the marker frame, read byte by byte across each length width', () => {
    for (const size of [CAP + 1, 2 * MiB]) {
      const stream = Buffer.concat([clientFrame(TEXT, 'before'), clientFrame(TEXT, 'q'.repeat(size)), clientFrame(TEXT, 'after')]);
      const expected = Buffer.concat([clientFrame(TEXT, 'before'), markerFrame(), clientFrame(TEXT, 'after')]);
      expect(filtered(stream, 'bytes').equals(expected)).toBe(true);
    }
    // A cap below 126 puts a 16-bit length over it too.
    const small = Buffer.concat([clientFrame(TEXT, 'w'.repeat(300)), clientFrame(TEXT, 'ok')]);
    expect(filtered(small, 'bytes', 100).equals(Buffer.concat([markerFrame(), clientFrame(TEXT, 'ok')]))).toBe(true);
  });

  it('reads a header cut at every point of it', () => {
    for (const payload of ['s', 'm'.repeat(200), 'l'.repeat(70_000)]) {
      const frame = clientFrame(TEXT, payload);
      const headerLength = frame.length - payload.length;
      const expected = payload.length > CAP ? markerFrame() : frame;
      for (let cut = 1; cut < headerLength; cut++) {
        for (const second of [cut + 1, headerLength, headerLength + 1]) {
          expect(filtered(frame, [cut, second]).equals(expected)).toBe(true);
        }
      }
    }
  });

  it('answers as soon as the header is read: a 1 GiB frame needs none of its payload', () => {
    const head = Buffer.alloc(14);
    head[0] = 0x81;
    head[1] = 0x80 | 127;
    head.writeBigUInt64BE(BigInt(1024 * MiB), 2);
    expect(filtered(head).equals(markerFrame())).toBe(true);
  });

  it('holds a fragmented message until it ends within the cap, letting a ping between its fragments go first', async () => {
    const stream = Buffer.concat([
      clientFrame(TEXT, 'a'.repeat(30_000), { fin: false }),
      clientFrame(PING, 'mid'),
      clientFrame(CONTINUATION, 'b'.repeat(CAP - 30_000), { fin: true }),
    ]);
    const out = filtered(stream, 'bytes');
    const ping = clientFrame(PING, 'mid');
    expect(out.subarray(0, ping.length).equals(ping)).toBe(true);
    const decoded = await decode(out);
    expect(decoded.error).toBeNull();
    expect(decoded.pings).toEqual(['mid']);
    expect(decoded.messages).toEqual([{ data: 'a'.repeat(30_000) + 'b'.repeat(CAP - 30_000), binary: false }]);
  });

  it('drops a fragmented message that outgrows the cap, fragments held and to come, but not the pings among them', async () => {
    const fragment = 'f'.repeat(40_000);
    const stream = Buffer.concat([
      clientFrame(TEXT, fragment, { fin: false }),
      clientFrame(PING, 'one'),
      clientFrame(CONTINUATION, fragment, { fin: false }),
      clientFrame(PING, 'two'),
      clientFrame(CONTINUATION, fragment, { fin: false }),
      clientFrame(CONTINUATION, fragment, { fin: true }),
      clientFrame(TEXT, 'next'),
    ]);
    const expected = Buffer.concat([clientFrame(PING, 'one'), markerFrame(), clientFrame(PING, 'two'), clientFrame(TEXT, 'next')]);
    expect(filtered(stream).equals(expected)).toBe(true);
    expect(filtered(stream, 'bytes').equals(expected)).toBe(true);
    const decoded = await decode(expected);
    expect(decoded).toEqual({ messages: [{ data: OVERSIZED_MARKER.toString('latin1'), binary: true }, { data: 'next', binary: false }], pings: ['one', 'two'], error: null });
  });

  it('drops the rest of a message whose first fragment is already over the cap', () => {
    const stream = Buffer.concat([
      clientFrame(BINARY, Buffer.alloc(CAP + 10), { fin: false }),
      clientFrame(PING, ''),
      clientFrame(CONTINUATION, Buffer.alloc(5), { fin: true }),
      clientFrame(TEXT, 'next'),
    ]);
    expect(filtered(stream, 'bytes').equals(Buffer.concat([markerFrame(), clientFrame(PING, ''), clientFrame(TEXT, 'next')]))).toBe(true);
  });

  it('hands on what ws refuses as it came, so ws refuses it for the same reason', async () => {
    const unmasked = Buffer.from([0x81, 0x02, 0x68, 0x69]);
    const cases: [Buffer, string][] = [
      [Buffer.concat([clientFrame(TEXT, 'ok'), unmasked, clientFrame(TEXT, 'x'.repeat(CAP + 1))]), 'WS_ERR_EXPECTED_MASK'],
      [Buffer.concat([clientFrame(TEXT, 'a', { fin: false }), clientFrame(TEXT, 'b')]), 'WS_ERR_INVALID_OPCODE'],
      [clientFrame(CONTINUATION, 'lost'), 'WS_ERR_INVALID_OPCODE'],
      [Buffer.concat([clientFrame(TEXT, 'a', { fin: false }), clientFrame(PING, 'p', { fin: false })]), 'WS_ERR_EXPECTED_FIN'],
      [Buffer.concat([clientFrame(0x3, 'reserved')]), 'WS_ERR_INVALID_OPCODE'],
    ];
    for (const [stream, code] of cases) {
      const out = filtered(stream, 'bytes');
      expect(out.equals(stream)).toBe(true);
      expect((await decode(out)).error).toBe(code);
    }
    // A new message inside one being dropped: ws does not know of the dropped one, so it is told.
    const inDropped = Buffer.concat([clientFrame(TEXT, 'x'.repeat(CAP + 1), { fin: false }), clientFrame(TEXT, 'b')]);
    expect((await decode(filtered(inDropped, 'bytes'))).error).toBe('WS_ERR_INVALID_OPCODE');
    // A length beyond 2^53 - 1 is ws's to refuse.
    const huge = Buffer.from([0x81, 0xff, 0x00, 0x20, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]);
    expect(filtered(huge, 'bytes').equals(huge)).toBe(true);
    expect((await decode(huge)).error).toBe('WS_ERR_UNSUPPORTED_DATA_PAYLOAD_LENGTH');
  });

  it('hands on a message of more fragments than ws admits, for ws to refuse', async () => {
    const stream = Buffer.concat([
      clientFrame(TEXT, '', { fin: false }),
      ...Array.from({ length: MAX_FRAGMENTS }, () => clientFrame(CONTINUATION, '', { fin: false })),
      clientFrame(CONTINUATION, ''),
    ]);
    expect(filtered(stream).equals(stream)).toBe(true);
    expect((await decode(stream)).error).toBe('WS_ERR_TOO_MANY_BUFFERED_PARTS');
  });

  it('gives the same stream however the bytes are cut, and ws reads from it every message within the cap', async () => {
    const message = fc.record({
      binary: fc.boolean(),
      fragments: fc.array(fc.oneof(fc.integer({ min: 0, max: 130 }), fc.integer({ min: 20_000, max: 70_000 })), { minLength: 1, maxLength: 4 }),
      pingAfter: fc.integer({ min: -1, max: 3 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(message, { minLength: 1, maxLength: 5 }), fc.array(fc.nat(), { maxLength: 12 }), async (messages, rawCuts) => {
        const frames: Buffer[] = [];
        const expected: Decoded['messages'] = [];
        let fill = 0;
        for (const m of messages) {
          const total = m.fragments.reduce((a, b) => a + b, 0);
          const body = m.fragments.map((n) => Buffer.alloc(n, 97 + (fill++ % 26)));
          m.fragments.forEach((_, i) => {
            const last = i === m.fragments.length - 1;
            frames.push(clientFrame(i === 0 ? (m.binary ? BINARY : TEXT) : CONTINUATION, body[i]!, { fin: last }));
            if (i === m.pingAfter) frames.push(clientFrame(PING, `p${i}`));
          });
          expected.push(total > CAP ? { data: OVERSIZED_MARKER.toString('latin1'), binary: true } : { data: Buffer.concat(body).toString('latin1'), binary: m.binary });
        }
        const stream = Buffer.concat(frames);
        const whole = filtered(stream);
        expect(filtered(stream, rawCuts.map((c) => c % (stream.length + 1))).equals(whole)).toBe(true);
        const decoded = await decode(whole);
        expect(decoded.error).toBeNull();
        expect(decoded.messages).toEqual(expected);
      }),
      { numRuns: 60 },
    );
  });
});

/** A `ws` server socket guarded as the gateway guards it, and the raw client end that speaks to it. */
async function guardedPair(cap = CAP): Promise<{ client: Socket; raw: Duplex; ws: WebSocket; messages: { data: string; binary: boolean }[]; done(): void }> {
  const wss = new wsModule.WebSocketServer({ noServer: true, maxFragments: MAX_FRAGMENTS, perMessageDeflate: false });
  const server = createServer();
  const upgraded = new Promise<{ raw: Duplex; ws: WebSocket }>((resolve) => {
    server.on('upgrade', (req, raw: Duplex, head: Buffer) => {
      wss.handleUpgrade(req, raw, Buffer.alloc(0), (ws) => {
        guardSocket(raw, head, cap);
        resolve({ raw, ws });
      });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const client = connect((server.address() as { port: number }).port, '127.0.0.1');
  await once(client, 'connect');
  client.write('GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
  const { raw, ws } = await upgraded;
  const messages: { data: string; binary: boolean }[] = [];
  ws.on('message', (data: Buffer, binary: boolean) => messages.push({ data: data.toString('latin1'), binary }));
  ws.on('error', () => {});
  client.on('error', () => {});
  return { client, raw, ws, messages, done: () => (client.destroy(), raw.destroy(), server.close()) };
}

async function eventually(check: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`never ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('guardSocket', () => {
  it("reads every chunk through the filter in ws's place", async () => {
    const { client, messages, done } = await guardedPair();
    try {
      client.write(Buffer.concat([clientFrame(TEXT, 'a'), clientFrame(TEXT, 'q'.repeat(CAP + 1)), clientFrame(TEXT, 'b')]));
      await eventually(() => messages.length === 3, 'read three messages');
      expect(messages).toEqual([{ data: 'a', binary: false }, { data: OVERSIZED_MARKER.toString('latin1'), binary: true }, { data: 'b', binary: false }]);
    } finally {
      done();
    }
  });

  it('reads what a paused socket still holds when it closes through the filter too', async () => {
    // A small cap, so that the whole stream fits what a paused socket buffers.
    const { client, raw, ws, messages, done } = await guardedPair(100);
    try {
      ws.pause();
      const stream = Buffer.concat([clientFrame(TEXT, 'a'), clientFrame(TEXT, 'q'.repeat(300)), clientFrame(TEXT, 'b')]);
      client.write(stream);
      await eventually(() => raw.readableLength === stream.length, 'held the bytes');
      ws.terminate();
      await once(ws, 'close');
      expect(messages).toEqual([{ data: 'a', binary: false }, { data: OVERSIZED_MARKER.toString('latin1'), binary: true }, { data: 'b', binary: false }]);
    } finally {
      done();
    }
  });

  it('stops reading when ws does: after a close frame nothing more reaches ws', async () => {
    const { client, raw, ws, messages, done } = await guardedPair();
    try {
      client.write(clientFrame(0x8, Buffer.from([0x03, 0xe8])));
      await eventually(() => raw.listenerCount('data') === 0, "dropped the guarded reader with ws's");
      client.end(clientFrame(TEXT, 'late'));
      await once(ws, 'close');
      expect(messages).toEqual([]);
    } finally {
      done();
    }
  });

  // Decision 0068: were a `ws` release's receiver to lose the list the guard replaces, the guard
  // would quietly stop replacing it, and only the garbage collector's figures would say so.
  it("hands ws's receiver a fragment list of its own at the end of each fragmented message, and only then; a message in one frame leaves it alone", async () => {
    const { client, ws, messages, done } = await guardedPair();
    try {
      const receiver = (ws as unknown as { _receiver: { _fragments: Buffer[] } })._receiver;
      // Every list the receiver is given, in order, and whether ws's own code gave it.
      const given: { list: Buffer[]; byWs: boolean }[] = [];
      let current = receiver._fragments;
      Object.defineProperty(receiver, '_fragments', {
        get: () => current,
        set: (list: Buffer[]) => {
          given.push({ list, byWs: new Error().stack!.includes('dataMessage') });
          current = list;
        },
      });
      const byWs = () => given.map((g) => g.byWs);
      // A message in one frame is read by the guard (decision 0073): the receiver never sees it.
      client.write(clientFrame(TEXT, 'one'));
      await eventually(() => messages.length === 1, 'read a message');
      expect(given).toEqual([]);

      // Three fragments with a ping among them, a chunk each: the first thing ws reads (the ping) finds
      // the list ws made at the start replaced by the guard's, which gathers the fragments; ws replaces
      // nothing before the message ends, then makes a new list, and the guard's takes its place.
      for (const piece of [clientFrame(TEXT, 'tw', { fin: false }), clientFrame(PING, 'p'), clientFrame(CONTINUATION, 'o-', { fin: false }), clientFrame(CONTINUATION, 'parts')]) {
        expect(byWs()).not.toContain(true);
        client.write(piece);
        await new Promise((r) => setTimeout(r, 20));
      }
      await eventually(() => messages.length === 2, 'read the fragmented message');
      expect(messages.map((m) => m.data)).toEqual(['one', 'two-parts']);
      expect(byWs()).toEqual([false, true, false]);
      expect(receiver._fragments).toBe(given[2]!.list);
      expect(receiver._fragments).toEqual([]);

      // A fragmented message and a message in one frame in one chunk: one replacement, after the first.
      client.write(Buffer.concat([clientFrame(TEXT, 'thr', { fin: false }), clientFrame(CONTINUATION, 'ee'), clientFrame(TEXT, 'four')]));
      await eventually(() => messages.length === 4, 'read two more messages');
      expect(messages.slice(2).map((m) => m.data)).toEqual(['three', 'four']);
      expect(byWs()).toEqual([false, true, false, true, false]);
      expect(receiver._fragments).toEqual([]);
    } finally {
      done();
    }
  });

  // Decision 0073: the guard reads a message in one frame itself, and must hand the application
  // exactly what ws would have: the text unmasked, in order with what ws reads around it.
  it('reads messages in one frame itself, unmasked, in order with the frames ws reads between them', async () => {
    const { client, ws, messages, done } = await guardedPair();
    try {
      const receiver = (ws as unknown as { _receiver: { write(chunk: Buffer): boolean } })._receiver;
      const reachedWs: number[] = [];
      const write = receiver.write.bind(receiver);
      receiver.write = (chunk: Buffer) => (reachedWs.push(chunk.length), write(chunk));
      // Every length modulo the key's four bytes, multi-byte text, the 16-bit length form, and a
      // ping and a fragmented message among them, all in one chunk and then a byte at a time.
      const texts = ['', 'a', 'ab', 'abc', 'abcd', 'abcde', 'é', '日本語の', '🎮 x', 'z'.repeat(125), 'y'.repeat(126), 'w'.repeat(1000)];
      const frames = texts.map((t) => clientFrame(TEXT, t, { key: [0x01, 0x80, 0xff, 0x37] }));
      const between = [clientFrame(PING, 'p'), clientFrame(TEXT, 'frag', { fin: false }), clientFrame(CONTINUATION, 'mented')];
      const all = Buffer.concat([...frames.slice(0, 6), ...between, ...frames.slice(6)]);
      const expected = [...texts.slice(0, 6), 'fragmented', ...texts.slice(6)];
      client.write(all);
      await eventually(() => messages.length === expected.length, 'read every message of the chunk');
      expect(messages.map((m) => Buffer.from(m.data, 'latin1').toString('utf8'))).toEqual(expected);
      expect(messages.every((m) => !m.binary)).toBe(true);
      // Only the ping and the fragments went through ws's receiver.
      expect(reachedWs.reduce((a, b) => a + b, 0)).toBe(between.reduce((a, f) => a + f.length, 0));

      messages.length = 0;
      for (let i = 0; i < all.length; i++) client.write(all.subarray(i, i + 1));
      await eventually(() => messages.length === expected.length, 'read every message a byte at a time');
      expect(messages.map((m) => Buffer.from(m.data, 'latin1').toString('utf8'))).toEqual(expected);
    } finally {
      done();
    }
  });

  // Decision 0073 again, as a property: whatever the mix of messages and however TCP cuts the stream,
  // the application sees the messages ws alone would give it, in order.
  it('hands the application every message as ws would, whatever the mix of frames and however the stream is cut', async () => {
    const message = fc.record({
      binary: fc.boolean(),
      wide: fc.boolean(),
      fragments: fc.array(fc.oneof(fc.integer({ min: 0, max: 130 }), fc.integer({ min: 1000, max: 1500 }), fc.integer({ min: 60_000, max: 70_000 })), { minLength: 1, maxLength: 3 }),
      pingAfter: fc.integer({ min: -1, max: 2 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(message, { minLength: 1, maxLength: 6 }), fc.array(fc.nat(), { maxLength: 6 }), async (messages, rawCuts) => {
        const frames: Buffer[] = [];
        const expected: { data: string; binary: boolean }[] = [];
        for (const [n, m] of messages.entries()) {
          // Text is UTF-8 cut only between characters' fragments: 'é' is two bytes, so a wide body's fragments are even.
          const body = m.fragments.map((size) => (m.wide && !m.binary ? Buffer.from('é'.repeat(Math.ceil(size / 2))) : Buffer.alloc(size, 97 + (n % 26))));
          const total = body.reduce((a, b) => a + b.length, 0);
          body.forEach((piece, i) => {
            frames.push(clientFrame(i === 0 ? (m.binary ? BINARY : TEXT) : CONTINUATION, piece, { fin: i === body.length - 1, key: [n, 0x9c, 0x31 ^ n, 0xff] }));
            if (i === m.pingAfter) frames.push(clientFrame(PING, `p${i}`));
          });
          expected.push(total > CAP ? { data: OVERSIZED_MARKER.toString('latin1'), binary: true } : { data: Buffer.concat(body).toString('latin1'), binary: m.binary });
        }
        const stream = Buffer.concat(frames);
        const cuts = [...new Set(rawCuts.map((c) => c % (stream.length + 1)))].sort((a, b) => a - b);
        const { client, messages: got, done } = await guardedPair();
        try {
          let from = 0;
          for (const cut of [...cuts, stream.length]) {
            if (cut > from) client.write(stream.subarray(from, cut));
            from = cut;
            await new Promise((r) => setImmediate(r));
          }
          await eventually(() => got.length >= expected.length, `read ${expected.length} messages`);
          expect(got).toEqual(expected);
        } finally {
          done();
        }
      }),
      { numRuns: 40 },
    );
  });

  it('leaves a text frame that is not UTF-8 to ws, which closes the connection 1007 as it always has', async () => {
    const { client, ws, messages, done } = await guardedPair();
    try {
      const refused = new Promise<{ code?: string }>((resolve) => ws.once('error', resolve));
      client.write(Buffer.concat([clientFrame(TEXT, 'ok'), clientFrame(TEXT, Buffer.from([0x61, 0xc3, 0x28])), clientFrame(TEXT, 'never')]));
      expect((await refused).code).toBe('WS_ERR_INVALID_UTF8');
      expect(ws.readyState).toBe(WebSocket.CLOSING);
      client.end(clientFrame(TEXT, 'nor this'));
      await once(ws, 'close');
      expect(messages.map((m) => m.data)).toEqual(['ok']);
    } finally {
      done();
    }
  });

  it('reads nothing after a close frame in the same chunk, and leaves a closing socket\'s frames to ws, which still reads them', async () => {
    const first = await guardedPair();
    try {
      first.client.write(Buffer.concat([clientFrame(TEXT, 'before'), clientFrame(0x8, Buffer.from([0x03, 0xe8])), clientFrame(TEXT, 'after')]));
      await eventually(() => first.raw.listenerCount('data') === 0, "dropped the guarded reader with ws's");
      first.client.end(clientFrame(TEXT, 'later'));
      await once(first.ws, 'close');
      expect(first.messages.map((m) => m.data)).toEqual(['before']);
    } finally {
      first.done();
    }
    // The server began the closing handshake; what the client sent before answering it is still read.
    const second = await guardedPair();
    try {
      second.ws.close(1000);
      second.client.write(clientFrame(TEXT, 'in flight'));
      await eventually(() => second.messages.length === 1, 'read the frame sent while closing');
      expect(second.messages[0]!.data).toBe('in flight');
    } finally {
      second.done();
    }
  });

  it('refuses a socket ws does not read', () => {
    expect(() => guardSocket(new PassThrough(), Buffer.alloc(0), CAP)).toThrow(/no ws reader/);
  });
});

// Black-box: the gateway behind the guard, over real sockets.
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ rate_limits: { ws_connect: { limit: 1000, window: 1000 } } });
});
afterAll(async () => {
  await s.close();
});

function expectTooLarge(f: Frame): void {
  expectErrorFrame(f, 'payload_too_large', 'payload_too_large');
  expect('cid' in f).toBe(false);
}

async function expectStillServing(sock: TestSocket): Promise<void> {
  expect((await sock.request('session.heartbeat')).type).toBe('session.heartbeat');
  expect(sock.ws.readyState).toBe(WebSocket.OPEN);
}

/** Sends `total` bytes of text as one message cut into `fragment`-byte frames. */
function sendFragmented(ws: WebSocket, total: number, fragment: number, between?: (index: number) => void): void {
  let index = 0;
  for (let sent = 0; sent < total; sent += fragment, index++) {
    const n = Math.min(fragment, total - sent);
    ws.send('k'.repeat(n), { fin: sent + n >= total });
    between?.(index);
  }
}

describe('gateway behind the frame guard', () => {
  it('answers a 2 MiB frame payload_too_large without cid and keeps serving the socket', async () => {
    const sock = await TestSocket.open(s);
    sock.sendRaw('x'.repeat(2 * MiB));
    expectTooLarge(await sock.next());
    await expectStillServing(sock);
    sock.close();
  });

  it('answers a 5 MiB fragmented message payload_too_large once and keeps serving the socket', async () => {
    const sock = await TestSocket.open(s);
    // Fragments under the cap: the message outgrows it at its second fragment.
    sendFragmented(sock.ws, 5 * MiB, 60 * 1024);
    expectTooLarge(await sock.next());
    await expectStillServing(sock);
    expect(sock.frames).toEqual([]);
    sock.close();
  });

  it('answers a ping sent between the fragments of an oversized message', async () => {
    const sock = await TestSocket.open(s);
    const pongs: string[] = [];
    sock.ws.on('pong', (data) => pongs.push(data.toString()));
    sendFragmented(sock.ws, 3 * MiB, MiB, (i) => i < 2 && sock.ws.ping(`between-${i}`));
    expectTooLarge(await sock.next());
    await expectStillServing(sock);
    expect(pongs).toEqual(['between-0', 'between-1']);
    sock.close();
  });

  it('still accepts a message of exactly 65,536 bytes, whole or in fragments, after an oversized one', async () => {
    const sock = await TestSocket.open(s);
    sock.sendRaw('x'.repeat(2 * MiB));
    expectTooLarge(await sock.next());
    const base = '{"type":"session.heartbeat","cid":"exact","payload":{"pad":""}}';
    const exact = base.replace('"pad":""', `"pad":"${'a'.repeat(CAP - base.length)}"`);
    expect(Buffer.byteLength(exact)).toBe(CAP);
    // Cut in three: held by the guard until the last fragment shows the message fits.
    for (const text of [exact, exact.replace('"pad":"', '"pad":"b')]) {
      sock.ws.send(text.slice(0, 20_000), { fin: false });
      sock.ws.send(text.slice(20_000, 50_000), { fin: false });
      sock.ws.send(text.slice(50_000), { fin: true });
    }
    expect(await sock.next()).toMatchObject({ type: 'session.heartbeat', cid: 'exact' });
    expectTooLarge(await sock.next());
    sock.sendRaw(exact);
    expect(await sock.next()).toMatchObject({ type: 'session.heartbeat', cid: 'exact' });
    sock.close();
  });

  it('takes a client sending the marker itself for an oversized message, not for binary uplink', async () => {
    const sock = await TestSocket.open(s);
    sock.sendRaw(Buffer.from(OVERSIZED_MARKER), true);
    expectTooLarge(await sock.next());
    sock.close();
  });

  it('reads the bytes that came with the upgrade request through the guard', async () => {
    const raw = await RawClient.open(s.port, Buffer.concat([clientFrame(TEXT, '{"type":"session.heartbeat","cid":"in-head"}'), clientFrame(TEXT, 'h'.repeat(2 * MiB)).subarray(0, 1000)]));
    try {
      expect(await raw.next()).toMatchObject({ type: 'session.heartbeat', cid: 'in-head' });
      expectTooLarge(await raw.next());
      raw.socket.write(clientFrame(TEXT, 'h'.repeat(2 * MiB)).subarray(1000));
      raw.socket.write(clientFrame(TEXT, '{"type":"session.heartbeat","cid":"after"}'));
      expect(await raw.next()).toMatchObject({ type: 'session.heartbeat', cid: 'after' });
    } finally {
      raw.socket.destroy();
    }
  });
});

describe('rate budget', () => {
  it('spends none of the 60 frames per window on oversized messages', async () => {
    // A clock that does not move keeps every frame in one rate window.
    const frozen = Date.now();
    const still = await startTestServer({ rate_limits: { ws_connect: { limit: 1000, window: 1000 } } }, { clock: { now: () => frozen } });
    try {
      const sock = await TestSocket.open(still);
      const heartbeats = (from: number) => {
        for (let i = from; i < from + 30; i++) sock.send({ type: 'session.heartbeat', cid: `h${i}` });
      };
      sock.sendRaw('x'.repeat(2 * MiB));
      heartbeats(0);
      sendFragmented(sock.ws, 2 * MiB, 512 * 1024);
      heartbeats(30);
      // The budget is spent now; an oversized message is still told so, not rate_limited.
      sock.sendRaw('x'.repeat(2 * MiB));
      sock.send({ type: 'session.heartbeat', cid: 'over' });
      const got: Frame[] = [];
      for (let i = 0; i < 64; i++) got.push(await sock.next());
      expectTooLarge(got[0]!);
      expect(got.slice(1, 31).map((f) => f.cid)).toEqual(Array.from({ length: 30 }, (_, i) => `h${i}`));
      expectTooLarge(got[31]!);
      expect(got.slice(32, 62).map((f) => f.cid)).toEqual(Array.from({ length: 30 }, (_, i) => `h${i + 30}`));
      expect(got.slice(1, 62).filter((f) => f.type === 'session.heartbeat')).toHaveLength(60);
      expectTooLarge(got[62]!);
      expectErrorFrame(got[63]!, 'rate_limited', 'rate_limited');
      sock.close();
    } finally {
      await still.close();
    }
  });
});

/**
 * A client that upgrades by hand, so bytes can travel in the same packet as
 * the upgrade request (the `head` the server's upgrade event carries).
 */
class RawClient {
  #buffer = Buffer.alloc(0);
  #wake: (() => void) | null = null;

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.#buffer = Buffer.concat([this.#buffer, chunk]);
      this.#wake?.();
    });
  }

  static async open(port: number, withRequest: Buffer): Promise<RawClient> {
    const socket = connect(port, '127.0.0.1');
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const client = new RawClient(socket);
    const request = [
      'GET /ws HTTP/1.1',
      `Host: 127.0.0.1:${port}`,
      'Upgrade: websocket',
      'Connection: Upgrade',
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
      'Sec-WebSocket-Version: 13',
      '',
      '',
    ].join('\r\n');
    socket.write(Buffer.concat([Buffer.from(request), withRequest]));
    const end = await client.#until(() => {
      const i = client.#buffer.indexOf('\r\n\r\n');
      return i < 0 ? null : i + 4;
    });
    expect(client.#buffer.subarray(0, end).toString()).toMatch(/^HTTP\/1\.1 101 /);
    client.#buffer = client.#buffer.subarray(end);
    return client;
  }

  /** The next server frame (unmasked text), parsed as JSON. */
  async next(): Promise<Frame> {
    const text = await this.#until(() => {
      const b = this.#buffer;
      if (b.length < 2) return null;
      const len7 = b[1]! & 0x7f;
      const offset = len7 === 126 ? 4 : 2;
      if (len7 === 127 || b.length < offset) throw new Error('unexpected server frame');
      const len = len7 === 126 ? b.readUInt16BE(2) : len7;
      if (b.length < offset + len) return null;
      this.#buffer = b.subarray(offset + len);
      return b.subarray(offset, offset + len).toString();
    });
    return JSON.parse(text) as Frame;
  }

  async #until<T>(take: () => T | null, timeoutMs = 5000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const got = take();
      if (got !== null) return got;
      if (Date.now() > deadline) throw new Error(`nothing within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        setTimeout(resolve, 50);
      });
    }
  }
}
