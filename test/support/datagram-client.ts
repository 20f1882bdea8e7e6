import { createHmac } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';

/**
 * A datagram-plane client for black-box tests, written from the asobi reference's published
 * layout (its decision records 0012/0013 and the LÖVE SDK's codec) and not from our encoder,
 * so that a test decoding our bytes with it checks them against the layout, not against
 * themselves. Every received datagram is queued; `next` takes the first matching one.
 *
 *     prefix   0xA5, 1, opcode, flags 0, conn_id u32 LE, path_tag u64 LE
 *     uplink   prefix (path_tag 0), cseq u64 LE, body, HMAC-SHA256(key, all before)[0..16]
 *     pose     tick u32, bseq u32, zx i16, zy i16, fieldmask u8, count u8, epoch u16,
 *              records of slot u16, gen u8, mask u8, i16 per set bit
 */

export const OP = { hello: 1, hello_ok: 2, hello_confirm: 3, bye: 4, ping: 5, pong: 6, pose: 7, input: 8 } as const;

export interface Downlink {
  opcode: number;
  connId: number;
  pathTag: bigint;
  body: Buffer;
  size: number;
}

export interface PoseFrame {
  tick: number;
  bseq: number;
  zone: [number, number];
  fieldmask: number;
  epoch: number;
  records: { slot: number; gen: number; values: (number | undefined)[] }[];
}

/** The mint answer of `asobi.datagram.open`, as an SDK reads it. */
export interface Mint {
  conn_id: number;
  kup: string;
  epoch: number;
  endpoint: string;
  fields: { name: string; scale: number }[];
  period_ticks: number;
}

export function uplink(opcode: number, connId: number, cseq: number, body: Buffer, key: Buffer, padTo = 0): Buffer {
  const pad = Math.max(0, padTo - 16 - 8 - 16 - body.length);
  const signed = Buffer.concat([Buffer.from([0xa5, 1, opcode, 0]), u32(connId), Buffer.alloc(8), u64(cseq), body, Buffer.alloc(pad)]);
  return Buffer.concat([signed, createHmac('sha256', key).update(signed).digest().subarray(0, 16)]);
}

export function decodeDownlink(raw: Buffer): Downlink | null {
  if (raw.length < 16 || raw[0] !== 0xa5 || raw[1] !== 1 || raw[3] !== 0) return null;
  return { opcode: raw[2]!, connId: raw.readUInt32LE(4), pathTag: raw.readBigUInt64LE(8), body: raw.subarray(16), size: raw.length };
}

/** A pose body read with `fieldCount` fields, or null if it does not parse to the byte. */
export function decodePose(body: Buffer, fieldCount: number): PoseFrame | null {
  if (body.length < 16) return null;
  const count = body[13]!;
  let pos = 16;
  const records: PoseFrame['records'] = [];
  for (let r = 0; r < count; r++) {
    if (pos + 4 > body.length) return null;
    const slot = body.readUInt16LE(pos);
    const gen = body[pos + 2]!;
    const mask = body[pos + 3]!;
    pos += 4;
    const values: (number | undefined)[] = [];
    for (let f = 0; f < fieldCount; f++) {
      if ((mask >> f) & 1) {
        if (pos + 2 > body.length) return null;
        values[f] = body.readInt16LE(pos);
        pos += 2;
      }
    }
    records.push({ slot, gen, values });
  }
  if (pos !== body.length) return null;
  return {
    tick: body.readUInt32LE(0),
    bseq: body.readUInt32LE(4),
    zone: [body.readInt16LE(8), body.readInt16LE(10)],
    fieldmask: body[12]!,
    epoch: body.readUInt16LE(14),
    records,
  };
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return b;
}

function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  return b;
}

/** One UDP socket on 127.0.0.1 speaking for one minted connection, as an SDK's does. */
export class DatagramClient {
  readonly received: Downlink[] = [];
  readonly key: Buffer;
  cseq = 0;
  #waiters: { match: (d: Downlink) => boolean; resolve: (d: Downlink) => void }[] = [];

  private constructor(
    readonly socket: Socket,
    readonly mint: Mint,
    readonly port: number,
  ) {
    this.key = Buffer.from(mint.kup, 'base64');
    socket.on('message', (raw) => {
      const d = decodeDownlink(raw);
      if (!d) return;
      const i = this.#waiters.findIndex((w) => w.match(d));
      if (i >= 0) this.#waiters.splice(i, 1)[0]!.resolve(d);
      else this.received.push(d);
    });
  }

  static async open(mint: Mint): Promise<DatagramClient> {
    const socket = createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
    return new DatagramClient(socket, mint, Number(mint.endpoint.slice(mint.endpoint.lastIndexOf(':') + 1)));
  }

  /** Sends raw bytes to the endpoint. */
  sendRaw(bytes: Buffer): Promise<void> {
    return new Promise((resolve, reject) => this.socket.send(bytes, this.port, '127.0.0.1', (err) => (err ? reject(err) : resolve())));
  }

  /** An authenticated uplink with the next cseq (or the one given, to replay). */
  build(opcode: number, body: Buffer = Buffer.alloc(0), padTo = 0, cseq = ++this.cseq): Buffer {
    return uplink(opcode, this.mint.conn_id, cseq, body, this.key, padTo);
  }

  send(opcode: number, body: Buffer = Buffer.alloc(0), padTo = 0): Promise<void> {
    return this.sendRaw(this.build(opcode, body, padTo));
  }

  hello(): Promise<void> {
    return this.send(OP.hello, Buffer.alloc(0), 64);
  }

  /** hello, hello_ok, hello_confirm: the connection is bound to this socket's address. */
  async bind(): Promise<void> {
    await this.hello();
    const ok = await this.next(OP.hello_ok);
    await this.send(OP.hello_confirm, ok.body);
  }

  next(opcode: number, timeoutMs = 2000): Promise<Downlink> {
    const match = (d: Downlink) => d.opcode === opcode;
    const i = this.received.findIndex(match);
    if (i >= 0) return Promise.resolve(this.received.splice(i, 1)[0]!);
    return new Promise((resolve, reject) => {
      const waiter = { match, resolve: (d: Downlink) => (clearTimeout(timer), resolve(d)) };
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        reject(new Error(`no datagram of opcode ${opcode} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#waiters.push(waiter);
    });
  }

  /** True if nothing at all arrives within `ms`. */
  async quiet(ms: number): Promise<boolean> {
    const before = this.received.length;
    await new Promise((r) => setTimeout(r, ms));
    return this.received.length === before;
  }

  close(): void {
    this.socket.close();
  }
}
