import { Duplex } from 'node:stream';

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
  readonly #out: (piece: Buffer) => void;
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

  constructor(cap: number, out: (piece: Buffer) => void) {
    this.#cap = cap;
    this.#out = out;
  }

  write(chunk: Buffer): void {
    if (this.#transparent) return this.#out(chunk);
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
      else if (fate === PASS && headerBytes) this.#out(headerBytes);

      if (this.#transparent) {
        this.#left = 0;
        break;
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
      for (const piece of this.#held!) this.#out(piece);
      this.#held = null;
    } else if (prelude === MARKER) {
      // A copy each time: `ws` hands the payload to the application as a view of these bytes.
      this.#out(Buffer.from(MARKER_FRAME));
    } else {
      this.#out(Buffer.from(ORPHAN_CONTINUATION));
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
    if (to > from) this.#out(to - from === chunk.length ? chunk : chunk.subarray(from, to));
  }
}

/** The socket methods `ws` uses when the stream it is given has them. */
interface SocketTuning {
  setTimeout?(ms: number): unknown;
  setNoDelay?(noDelay?: boolean): unknown;
}

/**
 * The upgraded socket as `ws` sees it: reads pass through a `FrameFilter`,
 * writes go straight to the socket. Flow control is carried both ways (a
 * full read buffer pauses the socket; a write completes when the socket took
 * it), and end, close and errors of either side reach the other.
 *
 * `head` (bytes the client sent right behind the upgrade request) is read
 * through the filter here, so `ws` must be handed an empty head.
 */
export class FrameGuard extends Duplex {
  readonly #socket: Duplex & SocketTuning;
  readonly #filter: FrameFilter;
  /** The socket is paused because `ws` is not reading. */
  #starved = false;

  constructor(socket: Duplex, head: Buffer, cap: number) {
    super({ decodeStrings: false });
    this.#socket = socket;
    this.#filter = new FrameFilter(cap, (piece) => {
      if (!this.push(piece) && !this.#starved) {
        this.#starved = true;
        this.#socket.pause();
      }
    });
    if (head.length > 0) this.#filter.write(head);
    socket.on('data', (chunk: Buffer) => {
      if (!this.destroyed) this.#filter.write(chunk);
    });
    socket.on('end', () => {
      if (!this.destroyed) this.push(null);
    });
    socket.on('error', (err) => this.destroy(err));
    socket.on('close', () => this.destroy());
    // `ws` refuses a stream that is already half gone; so must this one.
    if (socket.destroyed || !socket.readable || !socket.writable) this.destroy();
  }

  override _read(): void {
    if (this.#starved) {
      this.#starved = false;
      this.#socket.resume();
    }
  }

  override _write(chunk: Buffer | string, encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    this.#socket.write(chunk, encoding, done);
  }

  override _writev(chunks: { chunk: Buffer | string; encoding: BufferEncoding }[], done: (err?: Error | null) => void): void {
    // `ws` corks a frame's header and payload together; keep them in one write.
    const socket = this.#socket;
    socket.cork();
    const last = chunks.length - 1;
    for (let i = 0; i < last; i++) socket.write(chunks[i]!.chunk, chunks[i]!.encoding);
    socket.write(chunks[last]!.chunk, chunks[last]!.encoding, done);
    socket.uncork();
  }

  override _final(done: (err?: Error | null) => void): void {
    // Errors reach this stream through the socket's 'error' event, not twice.
    this.#socket.end(() => done());
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    this.#socket.destroy();
    done(err);
  }

  setTimeout(ms: number): this {
    this.#socket.setTimeout?.(ms);
    return this;
  }

  setNoDelay(noDelay = true): this {
    this.#socket.setNoDelay?.(noDelay);
    return this;
  }
}
