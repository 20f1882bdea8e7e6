import { createHmac, timingSafeEqual } from 'node:crypto';
import { DATAGRAM_MAGIC, DATAGRAM_VERSION, MAX_DATAGRAM, Opcode, PREFIX_BYTES, datagramPrefix } from '../../../runtime/worlds/pose-datagram';

/**
 * The plane's uplink and control frames, the reference's layout (docs/datagrams.md):
 *
 *     uplink  prefix (path_tag 0), cseq u64, body, mac (16 bytes)
 *     reply   prefix (path_tag 0), body: hello_ok the 8-byte challenge; pong the ping's first
 *             8 body bytes and the server's clock in ms, u64
 *
 * The mac is HMAC-SHA256 over every byte before it under the connection's 32-byte key,
 * truncated to 16 bytes. Only this file and the tests' client know these offsets.
 */

export const MAC_BYTES = 16;
const CSEQ_AT = PREFIX_BYTES;
const BODY_AT = PREFIX_BYTES + 8;
/** The smallest uplink: prefix, cseq and mac around an empty body. */
const UPLINK_FLOOR = BODY_AT + MAC_BYTES;
export const CHALLENGE_BYTES = 8;
/**
 * A `hello` must be at least this long (the client pads it, inside the mac), so that the
 * `hello_ok` it earns is smaller than it; a shorter one is dropped before any key is looked up.
 */
export const MIN_HELLO = 64;

/** Every opcode a client may send, with the least it may be: the parse guard's whole table. */
const UPLINK_MIN: ReadonlyMap<number, number> = new Map([
  [Opcode.hello, MIN_HELLO],
  [Opcode.helloConfirm, UPLINK_FLOOR + CHALLENGE_BYTES],
  [Opcode.ping, UPLINK_FLOOR + 8],
  [Opcode.bye, UPLINK_FLOOR],
  [Opcode.input, UPLINK_FLOOR],
]);

const HELLO_OK_BYTES = PREFIX_BYTES + CHALLENGE_BYTES;
const PONG_BYTES = PREFIX_BYTES + 16;

/**
 * The amplification invariant as data: what each uplink opcode answers and how large the
 * answer is, against the smallest request the guard lets through. Every reply the plane sends
 * is built by one of the two functions below, to the address the request came from; the test
 * suite checks each row and that every uplink opcode has one.
 */
export const REPLY_TABLE: ReadonlyMap<number, { reply: 'hello_ok' | 'pong' | null; minRequest: number; replyBytes: number }> = new Map([
  [Opcode.hello, { reply: 'hello_ok', minRequest: MIN_HELLO, replyBytes: HELLO_OK_BYTES }],
  [Opcode.helloConfirm, { reply: null, minRequest: UPLINK_MIN.get(Opcode.helloConfirm)!, replyBytes: 0 }],
  [Opcode.ping, { reply: 'pong', minRequest: UPLINK_MIN.get(Opcode.ping)!, replyBytes: PONG_BYTES }],
  [Opcode.bye, { reply: null, minRequest: UPLINK_MIN.get(Opcode.bye)!, replyBytes: 0 }],
  [Opcode.input, { reply: null, minRequest: UPLINK_MIN.get(Opcode.input)!, replyBytes: 0 }],
] as const);

/**
 * The parse guard: the uplink's opcode, or 0 for anything that is not a well-formed uplink
 * (wrong magic or version, a reserved flag bit, a server opcode, too short for its opcode,
 * over the datagram budget, a path tag). Arithmetic on the bytes and nothing else, so it runs
 * on every datagram that reaches the port before any budget or table is touched.
 */
export function uplinkOpcode(b: Uint8Array): number {
  if (b.length < UPLINK_FLOOR || b.length > MAX_DATAGRAM) return 0;
  if (b[0] !== DATAGRAM_MAGIC || b[1] !== DATAGRAM_VERSION || b[3] !== 0) return 0;
  const min = UPLINK_MIN.get(b[2]!);
  if (min === undefined || b.length < min) return 0;
  // A client has no return path to name; the reference refuses a tag rather than carry it.
  for (let i = 8; i < PREFIX_BYTES; i++) if (b[i] !== 0) return 0;
  return b[2]!;
}

/** Bytes 4-7, the connection the datagram names: cleartext, and no secret. */
export function connIdOf(b: Buffer): number {
  return b.readUInt32LE(4);
}

/** Whether the last 16 bytes are the mac of the rest under `key`; compared in constant time. */
export function macValid(b: Buffer, key: Buffer): boolean {
  const end = b.length - MAC_BYTES;
  const tag = createHmac('sha256', key).update(b.subarray(0, end)).digest();
  return timingSafeEqual(tag.subarray(0, MAC_BYTES), b.subarray(end));
}

/** The uplink's counter, or -1 past 2^53 (no honest client gets there; the SDKs count in doubles). */
export function cseqOf(b: Buffer): number {
  const high = b.readUInt32LE(CSEQ_AT + 4);
  return high >= 0x200000 ? -1 : high * 0x1_0000_0000 + b.readUInt32LE(CSEQ_AT);
}

/** What the uplink carries between its counter and its mac. */
export function bodyOf(b: Buffer): Buffer {
  return b.subarray(BODY_AT, b.length - MAC_BYTES);
}

/** `hello_ok`: the challenge, to the address the `hello` came from and nowhere else. */
export function helloOk(connId: number, challenge: Uint8Array): Buffer {
  const out = Buffer.alloc(HELLO_OK_BYTES);
  out.set(datagramPrefix(Opcode.helloOk, connId));
  out.set(challenge.subarray(0, CHALLENGE_BYTES), PREFIX_BYTES);
  return out;
}

/** `pong`: the ping's own stamp back and the server's clock, so a client times the round trip keeping nothing per ping. */
export function pong(connId: number, ping: Buffer, nowMs: number): Buffer {
  const out = Buffer.alloc(PONG_BYTES);
  out.set(datagramPrefix(Opcode.pong, connId));
  out.set(bodyOf(ping).subarray(0, 8), PREFIX_BYTES);
  out.writeBigUInt64LE(BigInt(Math.max(0, Math.floor(nowMs))), PREFIX_BYTES + 8);
  return out;
}
