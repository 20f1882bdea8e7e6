import { isUtf8 } from 'node:buffer';
import type { Duplex } from 'node:stream';

/**
 * What `ws` is handed in place of a message too big to read, and what the
 * gateway answers `payload_too_large`. It travels as a binary message because the
 * gateway refuses binary uplink anyway, so a client that sends these bytes
 * itself only trades `binary_uplink_unsupported` for `payload_too_large`.
 */
export const OVERSIZED_MARKER = Buffer.from('\0svc:oversized-message\0');

/** Whether a message `ws` delivered is the guard's stand-in for an oversized one. */
export function isOversizedMarker(data: Buffer): boolean {
  return data.length === OVERSIZED_MARKER.length && data.equals(OVERSIZED_MARKER);
}

// FIN | binary, then MASK | length and an all-zero key: a client frame must be
// masked, and with a zero key the payload reads as sent.
const MARKER_FRAME = Buffer.concat([Buffer.from([0x82, 0x80 | OVERSIZED_MARKER.length, 0, 0, 0, 0]), OVERSIZED_MARKER]);

// A lone final continuation frame: `ws` rejects it as a protocol error, which
// is what it would have done with the frame the guard is about to hand on.
const ORPHAN_CONTINUATION = Buffer.from([0x80, 0x80, 0, 0, 0, 0]);

/**
 * As many fragments as `ws` admits in one message by default; past it `ws`
 * closes the connection 1008. The guard holds a message's fragments until
 * the message is known to fit, so it stops holding at the same count and lets
 * `ws` refuse the message as it always has.
 */
export const MAX_FRAGMENTS = 16 * 1024;

const CONTINUATION = 0x0;
/** FIN with a text opcode and no reserved bits: a message in one frame. */
const FIN_TEXT = 0x81;
const TEXT = 0x1;
const BINARY = 0x2;
const FIRST_CONTROL = 0x8;
const LAST_CONTROL = 0xa;
const MAX_CONTROL_PAYLOAD = 125;
const MAX_HEADER = 14;
// 2^53 - 1 split into the 64-bit length's high word: `ws` refuses anything longer.
const MAX_LENGTH_HIGH = 0x1f_ffff;

// What becomes of a frame: handed to `ws` now, held back until its message is known to fit, or dropped.
const PASS = 0;
const HOLD = 1;
const DROP = 2;
type Fate = typeof PASS | typeof HOLD | typeof DROP;

// What must reach `ws` before the frame just read: nothing, the held fragments, a marker, an orphan.
const NONE = 0;
const HELD = 1;
const MARKER = 2;
const ORPHAN = 3;
type Prelude = typeof NONE | typeof HELD | typeof MARKER | typeof ORPHAN;

function headerSize(second: number): number {
  const len7 = second & 0x7f;
  return 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + (second & 0x80 ? 4 : 0);
}

/**
 * Reads the client-to-server byte stream of one WebSocket connection frame by
 * frame and hands `out` what `ws` should see: the same bytes, except that a
 * data message whose payload outgrows `cap` is replaced by one marker frame
 * and the rest of it is skipped without ever being buffered.
 *
 * A message's size is only known at its last fragment, and `ws` cannot be told
 * to forget a message it has started, so the fragments of a fragmented message
 * are held back (at most `cap` payload bytes) until the message either ends
 * within the cap or outgrows it. Control frames are never held: they may come
 * between fragments and are answered on their own.
 *
 * Anything `ws` would refuse as a protocol error is handed on unchanged, and
 * from then on the filter stops reading frames: `ws` is about to close.
 * No extension is assumed (the gateway turns compression off), so reserved
 * bits are an error and a payload length is the message's size.
 */
export class FrameFilter {
  readonly #cap: number;
  readonly #out: ((piece: Buffer) => void) | null;
  /** A header cut by a chunk boundary, gathered until it is whole. */
  #head: Buffer | null = null;
  #headLen = 0;
  /** Payload bytes of the current frame still to come, and what becomes of them. */
  #left = 0;
  #fate: Fate = PASS;
  /** The data message under way, if any: the payload so far, and its fragments. */
  #inMessage = false;
  #total = 0;
  #fragments = 0;
  /** Its held bytes, or null once it outgrew the cap and is being dropped. */
  #held: Buffer[] | null = null;
  #prelude: Prelude = NONE;
  #transparent = false;

  /** `out` takes what passes, unless a subclass takes it by overriding `pass`. */
  constructor(cap: number, out: ((piece: Buffer) => void) | null = null) {
    this.#cap = cap;
    this.#out = out;
  }

  protected pass(piece: Buffer): void {
    this.#out!(piece);
  }

  /** Whether `take` may be offered the next whole text frame; everything passes when it may not. */
  protected takes(): boolean {
    return false;
  }

  /**
   * Offered a whole unfragmented text frame that lies in one chunk (its
   * payload of `length` bytes at `at`, masked with the four bytes before it),
   * once everything before it has passed: true when taken here, false to let
   * it pass as it came.
   */
  protected take(_chunk: Buffer, _at: number, _length: number): boolean {
    return false;
  }

  write(chunk: Buffer): void {
    if (this.#transparent) return this.pass(chunk);
    const end = chunk.length;
    let at = 0;
    // Start of the run of bytes that pass unchanged and are not yet handed on:
    // consecutive frames that pass leave as one piece (usually the chunk itself).
    let from = 0;
    while (at < end) {
      if (this.#left > 0) {
        const n = Math.min(this.#left, end - at);
        if (this.#fate !== PASS) {
          this.#run(chunk, from, at);
          if (this.#fate === HOLD) this.#hold(chunk.subarray(at, at + n));
          from = at + n;
        }
        at += n;
        this.#left -= n;
        continue;
      }

      const start = at;
      let header: Buffer;
      let h: number;
      if (this.#headLen === 0 && end - at >= 2 && end - at >= headerSize(chunk[at + 1]!)) {
        header = chunk;
        h = at;
        at += headerSize(chunk[at + 1]!);
      } else {
        this.#run(chunk, from, at);
        const head = (this.#head ??= Buffer.allocUnsafe(MAX_HEADER));
        while (at < end && (this.#headLen < 2 || this.#headLen < headerSize(head[1]!))) head[this.#headLen++] = chunk[at++]!;
        from = at;
        if (this.#headLen < 2 || this.#headLen < headerSize(head[1]!)) break;
        header = head;
        h = 0;
      }

      const b0 = header[h]!;
      const b1 = header[h + 1]!;
      const len7 = b1 & 0x7f;
      let length = len7;
      let lengthOk = true;
      if (len7 === 126) length = header.readUInt16BE(h + 2);
      else if (len7 === 127) {
        const high = header.readUInt32BE(h + 2);
        lengthOk = high <= MAX_LENGTH_HIGH;
        length = high * 2 ** 32 + header.readUInt32BE(h + 6);
      }
      const fate = this.#decide(b0, b1, length, lengthOk);

      const gathered = header !== chunk;
      if (!gathered && (this.#prelude !== NONE || fate !== PASS)) {
        this.#run(chunk, from, start);
        from = fate === PASS ? start : at;
      }
      this.#emitPrelude();
      const headerBytes = gathered ? Buffer.from(header.subarray(0, this.#headLen)) : null;
      this.#headLen = 0;
      if (fate === HOLD) this.#hold(headerBytes ?? chunk.subarray(start, at));
      else if (fate === PASS && headerBytes) this.pass(headerBytes);

      if (this.#transparent) {
        this.#left = 0;
        break;
      }
      // A whole text message in one frame, all in this chunk, as nearly every client frame is.
      if (b0 === FIN_TEXT && fate === PASS && !gathered && length <= end - at && this.takes()) {
        // What passed before it may have ended the reading (a close frame, a refused message): asked again.
        this.#run(chunk, from, start);
        from = start;
        if (this.takes() && this.take(chunk, at, length)) {
          at += length;
          from = at;
          continue;
        }
      }
      this.#left = length;
      this.#fate = fate;
    }
    this.#run(chunk, from, end);
  }

  /** Settles a frame's fate from its header, and what must reach `ws` before it. */
  #decide(b0: number, b1: number, length: number, lengthOk: boolean): Fate {
    const fin = (b0 & 0x80) !== 0;
    const opcode = b0 & 0x0f;
    const masked = (b1 & 0x80) !== 0;
    if ((b0 & 0x70) !== 0 || !masked || !lengthOk) return this.#refused(false);
    if (opcode >= FIRST_CONTROL) {
      if (opcode > LAST_CONTROL || !fin || length > MAX_CONTROL_PAYLOAD) return this.#refused(false);
      return PASS;
    }
    if (opcode === TEXT || opcode === BINARY) {
      if (this.#inMessage) return this.#refused(true);
      if (length > this.#cap) {
        this.#prelude = MARKER;
        this.#inMessage = !fin;
        this.#held = null;
        return DROP;
      }
      if (fin) return PASS;
      this.#inMessage = true;
      this.#total = length;
      this.#fragments = 1;
      this.#held = [];
      return HOLD;
    }
    if (opcode !== CONTINUATION || !this.#inMessage) return this.#refused(false);
    if (this.#held === null) {
      if (fin) this.#inMessage = false;
      return DROP;
    }
    this.#total += length;
    if (this.#total > this.#cap) {
      this.#prelude = MARKER;
      this.#held = null;
      if (fin) this.#inMessage = false;
      return DROP;
    }
    if (++this.#fragments > MAX_FRAGMENTS) return this.#refused(false);
    if (fin) {
      this.#inMessage = false;
      this.#prelude = HELD;
      return PASS;
    }
    return HOLD;
  }

  /**
   * A frame `ws` will refuse: make sure it sees the stream as the client sent
   * it, so it refuses for the same reason, then stop reading frames. A new
   * data frame inside a message is only wrong while `ws` knows of the
   * message, and it does not know of one being dropped.
   */
  #refused(startsMessage: boolean): Fate {
    if (this.#inMessage) this.#prelude = this.#held === null ? (startsMessage ? ORPHAN : NONE) : HELD;
    this.#transparent = true;
    return PASS;
  }

  #emitPrelude(): void {
    const prelude = this.#prelude;
    if (prelude === NONE) return;
    this.#prelude = NONE;
    if (prelude === HELD) {
      for (const piece of this.#held!) this.pass(piece);
      this.#held = null;
    } else if (prelude === MARKER) {
      // A copy each time: `ws` hands the payload to the application as a view of these bytes.
      this.pass(Buffer.from(MARKER_FRAME));
    } else {
      this.pass(Buffer.from(ORPHAN_CONTINUATION));
    }
  }

  /** Holds a piece back, joined to the previous one when the two are adjacent in memory. */
  #hold(piece: Buffer): void {
    const held = this.#held!;
    const last = held[held.length - 1];
    if (last && last.buffer === piece.buffer && last.byteOffset + last.length === piece.byteOffset) {
      held[held.length - 1] = Buffer.from(last.buffer, last.byteOffset, last.length + piece.length);
    } else {
      held.push(piece);
    }
  }

  #run(chunk: Buffer, from: number, to: number): void {
    if (to > from) this.pass(to - from === chunk.length ? chunk : chunk.subarray(from, to));
  }
}

/** XORs a client frame's payload at `from`..`to` with its masking key (the four bytes before it), in place. */
function unmask(chunk: Buffer, from: number, to: number): void {
  const k0 = chunk[from - 4]!;
  const k1 = chunk[from - 3]!;
  const k2 = chunk[from - 2]!;
  const k3 = chunk[from - 1]!;
  let i = from;
  for (; i + 3 < to; i += 4) {
    chunk[i] = chunk[i]! ^ k0;
    chunk[i + 1] = chunk[i + 1]! ^ k1;
    chunk[i + 2] = chunk[i + 2]! ^ k2;
    chunk[i + 3] = chunk[i + 3]! ^ k3;
  }
  const rest = to - i;
  if (rest > 0) chunk[i] = chunk[i]! ^ k0;
  if (rest > 1) chunk[i + 1] = chunk[i + 1]! ^ k1;
  if (rest > 2) chunk[i + 2] = chunk[i + 2]! ^ k2;
}

type Reader = (this: Duplex, chunk: Buffer) => void;
const READER = Symbol('frame reader');
type GuardedSocket = Duplex & { [READER]: SocketReader };

/** `ws`'s 'data' listener: one function for every socket, met at the first guard. */
let wsReader: Reader | null = null;

/** The part of `ws`'s receiver the guard touches: the list a message's fragments are gathered in, and whether it refused the stream. */
interface FragmentList {
  _fragments: Buffer[];
  readonly _errored: boolean;
}

/** The key `ws` keeps a socket's WebSocket under (a symbol described `websocket`), met at the first guard. */
let wsKey: symbol | null = null;

/** The part of `ws`'s WebSocket the guard touches: its state, and the event its receiver emits for each message. */
interface MessageTarget {
  readonly readyState: number;
  emit(event: 'message', data: Buffer, isBinary: boolean): boolean;
}

/** The WebSocket `ws` keeps on the socket, if it has the shape the guard knows; null otherwise. */
function websocketOf(socket: Duplex): (MessageTarget & { _receiver?: unknown }) | null {
  wsKey ??= Object.getOwnPropertySymbols(socket).find((s) => s.description === 'websocket') ?? null;
  const websocket = wsKey === null ? undefined : (socket as unknown as Record<symbol, (MessageTarget & { _receiver?: unknown }) | undefined>)[wsKey];
  return websocket !== null && typeof websocket === 'object' && typeof websocket.readyState === 'number' && typeof websocket.emit === 'function' ? websocket : null;
}

/** The receiver `ws` reads the socket of `websocket` with, if it has the shape the guard knows; null otherwise. */
function receiverOf(websocket: { _receiver?: unknown } | null): FragmentList | null {
  const receiver = websocket?._receiver;
  return receiver !== null && typeof receiver === 'object' && Array.isArray((receiver as FragmentList)._fragments) && typeof (receiver as FragmentList)._errored === 'boolean'
    ? (receiver as FragmentList)
    : null;
}

const OPEN = 1;

// Copied (`slice`) into a new empty list that carries no allocation site (see SocketReader.pass). It
// held a Buffer once, so its copies hold objects from the start, as ws's lists do after their first
// message: a push into one never changes its elements' kind.
const NO_FRAGMENTS: Buffer[] = [Buffer.alloc(0)];
NO_FRAGMENTS.length = 0;

/** A socket's filter, handing what passes to `ws`'s reader of that socket. */
class SocketReader extends FrameFilter {
  /** The list last handed to the receiver, until `ws` replaces it at the end of a message. */
  #fragments: Buffer[] | null = null;

  constructor(
    cap: number,
    readonly socket: Duplex,
    readonly receiver: FragmentList | null,
    readonly websocket: MessageTarget | null,
  ) {
    super(cap);
  }

  // A message in one frame is read here and handed to the WebSocket's listeners as `ws`'s receiver would
  // hand it (the payload unmasked in place, a view of the chunk, checked to be UTF-8), without crossing the
  // receiver: a Writable stream with a deferred callback per chunk, a parser and a fragment list per
  // message, which cost more than the rest of the frame's reading (docs/decisions/0073). Only while the
  // socket is open and `ws` has refused nothing: a closing one's frames go to `ws`, which knows whether it
  // still reads them (it reads them after a close it began, not after one the client sent or a refusal,
  // whose error it reports a tick later).
  protected override takes(): boolean {
    return this.websocket !== null && this.receiver !== null && this.websocket.readyState === OPEN && !this.receiver._errored;
  }

  protected override take(chunk: Buffer, at: number, length: number): boolean {
    const end = at + length;
    unmask(chunk, at, end);
    const data = chunk.subarray(at, end);
    if (!isUtf8(data)) {
      // Put back as it came: `ws` refuses it and closes the connection 1007, as it always has.
      unmask(chunk, at, end);
      return false;
    }
    this.websocket!.emit('message', data, false);
    return true;
  }

  protected override pass(piece: Buffer): void {
    wsReader!.call(this.socket, piece);
    // Each message `ws` reads ends by replacing the receiver's fragment list with a new `[]`, which
    // then waits for the socket's next message. Sockets that pause after a message (every one after
    // `session.connect`) keep those lists alive for long, so V8 learns to allocate every list of that
    // one `[]` in the old generation; each message's list then dies there, keeping its young payload
    // buffers alive through every scavenge until the next full collection (docs/decisions/0068).
    // Handing the receiver a list of our own in its place (`slice` carries no allocation site) leaves
    // ws's `[]` short-lived, so it is never moved out of the young generation.
    const receiver = this.receiver;
    if (receiver === null) return;
    const list = receiver._fragments;
    if (list !== this.#fragments && list.length === 0) receiver._fragments = this.#fragments = NO_FRAGMENTS.slice();
  }
}

// Listeners shared by every guarded socket, finding its filter on it: closures
// per socket were a tenth of an idle socket's heap.
function guardedRead(this: GuardedSocket, chunk: Buffer): void {
  this[READER].write(chunk);
}

// On close, `ws` reads what a paused socket still holds straight into its
// receiver. Read it through the filter first (while `ws` still reads at all).
function readTail(this: GuardedSocket): void {
  if (this.readableLength === 0 || !this.listeners('data').includes(wsReader!)) return;
  this.removeListener('data', guardedRead);
  const tail = this.read(this.readableLength) as Buffer | null;
  if (tail) this[READER].write(tail);
}

/**
 * Puts a `FrameFilter` in front of `ws`'s reader on a socket `ws` has just
 * taken over (call it inside `handleUpgrade`'s callback, once the
 * application's listeners are on). `ws` keeps the socket itself, so writes
 * and flow control are its own; only its 'data' listener is replaced by one
 * that filters each chunk and hands `ws`'s reader what passes.
 *
 * `head` (bytes the client sent right behind the upgrade request) is read
 * through the filter here, so `ws` must be handed an empty head.
 *
 * An earlier guard was a Duplex stream between the socket and `ws`: every
 * chunk and every write crossed a second stream, which cost more per frame
 * than the rest of the gateway (docs/decisions/0057).
 */
export function guardSocket(socket: Duplex, head: Buffer, cap: number): void {
  const listeners = socket.listeners('data');
  const reader = listeners[listeners.length - 1] as Reader | undefined;
  // A `ws` release that reads its socket another way would leave frames unguarded: fail loudly instead.
  if (reader?.name !== 'socketOnData' || (wsReader !== null && reader !== wsReader)) throw new Error('frame guard: the socket has no ws reader to guard');
  if (wsReader === null) {
    wsReader = reader;
    // `ws` stops reading by removing its reader by identity; tagged so, the
    // guarded reader goes with it (the same tag `once` wrappers carry).
    (guardedRead as { listener?: unknown }).listener = reader;
  }
  socket.removeListener('data', reader);
  const guarded = socket as GuardedSocket;
  const websocket = websocketOf(socket);
  guarded[READER] = new SocketReader(cap, socket, receiverOf(websocket), websocket);
  socket.on('data', guardedRead);
  socket.prependListener('close', readTail);
  if (head.length > 0) guarded[READER].write(head);
}
