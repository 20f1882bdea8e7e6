import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';
import type { ServerFrame } from '../../runtime/contracts/frame-envelope';
import { NO_METRICS, type MetricHooks, type Tally } from '../metrics/registry';

/**
 * Holds the frames written to a socket in one turn of the event loop and lets
 * them all go at the turn's end (decision 0062): a socket is corked at its
 * first frame of the turn and uncorked after the turn's I/O. Written one by
 * one, replies trickled out while the client slept between them, and each
 * wake-up was billed to the writing call.
 */
class TurnWrites {
  readonly #held: Session[] = [];

  hold(session: Session): void {
    if (session.held) return;
    session.held = true;
    session.raw.cork();
    if (this.#held.push(session) === 1) setImmediate(this.#release);
  }

  readonly #release = (): void => {
    const held = this.#held;
    for (let i = 0; i < held.length; i++) {
      held[i]!.held = false;
      held[i]!.raw.uncork();
    }
    held.length = 0;
  };
}

const turnWrites = new TurnWrites();

/**
 * A frame many sockets receive (a zone's `world.tick`, text and, for the
 * binary wire, bytes), framed for the WebSocket wire once, on first use of
 * each form, and written to each socket as those very bytes. Through `ws`
 * every socket paid the framing (an options object, a header, a list, two
 * writes) and the UTF-8 encoding of the same text again.
 *
 * Every data frame a session sends is framed here (Session.#write) and
 * written to the TCP socket beside `ws`, which still writes its close and
 * pong frames. The order holds because `ws` never holds a frame back here:
 * the gateway turns permessage-deflate off, the only reason its sender
 * queues, and nothing sends it a Blob.
 */
export class SharedFrame {
  #textFrame: Buffer | null = null;
  #bytesFrame: Buffer | null = null;

  constructor(
    readonly text: string,
    /** Its binary form (runtime/worlds/binary-wire.ts), null when it has none. */
    readonly bytes: Uint8Array | null = null,
  ) {}

  /** The whole frame as it goes on the wire, in the form the socket takes. */
  wire(binary: boolean): Buffer {
    if (binary && this.bytes !== null) return (this.#bytesFrame ??= framed(OPCODE_BINARY, this.bytes, null));
    return (this.#textFrame ??= framed(OPCODE_TEXT, null, this.text));
  }
}

const OPCODE_TEXT = 1;
const OPCODE_BINARY = 2;

/** A final, unmasked server frame (RFC 6455 §5.2) of `bytes`, or of `text` in UTF-8. */
function framed(opcode: number, bytes: Uint8Array | null, text: string | null): Buffer {
  const n = bytes !== null ? bytes.length : Buffer.byteLength(text!);
  const head = n < 126 ? 2 : n < 65536 ? 4 : 10;
  const out = Buffer.allocUnsafe(head + n);
  out[0] = 0x80 | opcode;
  if (head === 2) out[1] = n;
  else if (head === 4) {
    out[1] = 126;
    out.writeUInt16BE(n, 2);
  } else {
    out[1] = 127;
    out.writeUInt32BE(Math.floor(n / 2 ** 32), 2);
    out.writeUInt32BE(n >>> 0, 6);
  }
  if (bytes !== null) out.set(bytes, head);
  else out.write(text!, head);
  return out;
}

/**
 * Live sockets and who they belong to. A player may hold several sockets at
 * once (docs/decisions/0004): player-addressed pushes go to all of them, and
 * the player counts as gone only when the last one closes.
 */
export class Session {
  /** The authenticated player, or null before a successful `session.connect`. */
  playerId: string | null = null;
  tokenId: string | null = null;
  /** When that token expires, if the resolver said: past it, the socket lives on, and a swept token row is no revocation. */
  tokenExpiresAt: number | null = null;
  /** Message-rate window: fixed 1000 ms, opened by the socket. */
  windowStart: number;
  windowCount = 0;
  lastInbound: number;
  /** Frames waiting while an earlier frame of this socket is still being handled. */
  backlog: string[] | null = null;
  busy = false;
  idleAuthTimer: ReturnType<typeof setTimeout> | null = null;
  /** Corked until the end of this turn of the event loop (TurnWrites). */
  held = false;
  /** With `response_checks` on, sees every frame before it goes out and may hold it back (frame-checks.ts); null otherwise. */
  checkOut: ((text: string) => boolean) | null = null;
  /** `session.connect` asked for the binary `world.tick` wire and was granted it. */
  binaryWire = false;

  constructor(
    readonly id: number,
    readonly socket: WebSocket,
    /** The TCP socket under `socket`, which `ws` writes to. */
    readonly raw: Duplex,
    readonly ip: string,
    now: number,
    private readonly metrics: MetricHooks = NO_METRICS,
  ) {
    this.windowStart = now;
    this.lastInbound = now;
  }

  send(frame: ServerFrame): void {
    this.sendText(JSON.stringify(frame), this.metrics.frameOut(frame.type));
  }

  /** `sent` counts the frame's type (MetricHooks.frameOut, resolved once per encoded frame). */
  sendText(text: string, sent: Tally): void {
    this.#write(text, null, sent);
  }

  /** A frame shared with other sockets: its bytes on the binary wire (`world.tick`), its text otherwise and whenever it has no binary form. */
  sendShared(frame: SharedFrame, sent: Tally): void {
    this.#write(frame.text, frame, sent);
  }

  /**
   * Writes the frame framed by us beside `ws` (see SharedFrame for why the
   * order holds): its shared bytes, or `text` framed for this socket alone,
   * once `text` passes the response checks.
   */
  #write(text: string, shared: SharedFrame | null, sent: Tally): void {
    if (this.socket.readyState !== 1) return;
    // The published schemas describe frames as text, and a binary form is the same frame in the codec's layout
    // (which its own tests hold to the reference byte for byte): the text twin stands for it in the checks.
    if (this.checkOut !== null && !this.checkOut(text)) return;
    turnWrites.hold(this);
    this.raw.write(shared === null ? framed(OPCODE_TEXT, null, text) : shared.wire(this.binaryWire));
    sent.n++;
  }

  close(code: number, reason: string): void {
    if (this.socket.readyState <= 1) this.socket.close(code, reason);
  }
}

export class SessionRegistry {
  /** player → their socket (nearly always one, held as it is: a set per player was a thirtieth of an idle socket's heap), or a set of them. */
  readonly #byPlayer = new Map<string, Session | Set<Session>>();
  readonly #all = new Set<Session>();
  readonly #goneListeners: ((playerId: string) => void)[] = [];
  readonly #boundListeners: ((playerId: string) => void)[] = [];
  readonly #endedListeners: ((session: Session) => void)[] = [];

  /**
   * Pushes to the player's sockets on whichever node holds them: here, this
   * node's; on a fleet (host/fleet/fleet.ts) every node's. Returns the
   * sockets reached at once.
   */
  reach: (playerId: string, frame: ServerFrame) => number = (playerId, frame) => this.push(playerId, frame);

  /** Handed to every socket added (Session.checkOut): set once at start, when `response_checks` is on. */
  checkOut: ((text: string) => boolean) | null = null;

  /** The node's metric hooks, for everything that writes to these sockets. */
  constructor(readonly metrics: MetricHooks = NO_METRICS) {}

  get size(): number {
    return this.#all.size;
  }

  add(session: Session): void {
    session.checkOut = this.checkOut;
    this.#all.add(session);
  }

  /** Binds an authenticated socket to its player (re-auth moves it). */
  bind(session: Session, playerId: string, tokenId: string, expiresAt: number | null = null): void {
    session.tokenExpiresAt = expiresAt;
    if (session.playerId === playerId) {
      session.tokenId = tokenId;
      return;
    }
    if (session.playerId !== null) this.#ended(session);
    this.#unbind(session);
    session.playerId = playerId;
    session.tokenId = tokenId;
    const held = this.#byPlayer.get(playerId);
    if (held instanceof Set) held.add(session);
    else this.#byPlayer.set(playerId, held === undefined ? session : new Set([held, session]));
    if (held === undefined) for (const listener of this.#boundListeners) listener(playerId);
  }

  remove(session: Session): void {
    this.#all.delete(session);
    this.#ended(session);
    this.#unbind(session);
  }

  /**
   * Called when a socket stops speaking for its player: it closed, it is being closed for a
   * logout, a revocation or an erasure (before the close handshake ends), or it re-authenticated
   * as someone else. May be called more than once for one socket.
   */
  onSessionEnded(listener: (session: Session) => void): void {
    this.#endedListeners.push(listener);
  }

  #ended(session: Session): void {
    for (const listener of this.#endedListeners) listener(session);
  }

  #unbind(session: Session): void {
    const playerId = session.playerId;
    if (playerId === null) return;
    session.playerId = null;
    const held = this.#byPlayer.get(playerId);
    if (held instanceof Set) {
      held.delete(session);
      if (held.size === 1) this.#byPlayer.set(playerId, held.values().next().value!);
      return;
    }
    if (held !== session) return;
    this.#byPlayer.delete(playerId);
    for (const listener of this.#goneListeners) listener(playerId);
  }

  /** Whether the player has a bound socket on this node. */
  has(playerId: string): boolean {
    return this.#byPlayer.has(playerId);
  }

  /** Called when a player's last socket closes or re-authenticates as someone else. */
  onPlayerGone(listener: (playerId: string) => void): void {
    this.#goneListeners.push(listener);
  }

  /** Called when a player's first socket on this node authenticates. */
  onPlayerBound(listener: (playerId: string) => void): void {
    this.#boundListeners.push(listener);
  }

  /** Encodes once, sends to every socket of the player; returns how many got it. */
  push(playerId: string, frame: ServerFrame): number {
    const held = this.#byPlayer.get(playerId);
    if (held === undefined) return 0;
    const text = JSON.stringify(frame);
    const sent = this.metrics.frameOut(frame.type);
    if (!(held instanceof Set)) {
      held.sendText(text, sent);
      return 1;
    }
    for (const s of held) s.sendText(text, sent);
    return held.size;
  }

  /** Like `push`, with the frame already encoded (one encoding for many players); `sent` as in `Session.sendText`. */
  pushText(playerId: string, text: string, sent: Tally): void {
    const held = this.#byPlayer.get(playerId);
    if (held instanceof Set) for (const s of held) s.sendText(text, sent);
    else held?.sendText(text, sent);
  }

  /** A frame shared by many players (a zone's `world.tick`) to the player's sockets, each in its wire's form; `sent` as in `Session.sendText`. */
  pushShared(playerId: string, frame: SharedFrame, sent: Tally): void {
    const held = this.#byPlayer.get(playerId);
    if (held instanceof Set) for (const s of held) s.sendShared(frame, sent);
    else held?.sendShared(frame, sent);
  }

  /** Whether any of the player's sockets here is on the binary wire. */
  onBinaryWire(playerId: string): boolean {
    const held = this.#byPlayer.get(playerId);
    if (held instanceof Set) {
      for (const s of held) if (s.binaryWire) return true;
      return false;
    }
    return held?.binaryWire ?? false;
  }

  /** Closes every socket of the player with a normal close and no frame. */
  disconnect(playerId: string): void {
    const held = this.#byPlayer.get(playerId);
    for (const s of held instanceof Set ? [...held] : held ? [held] : []) {
      this.#ended(s);
      s.close(1000, 'session_closed');
    }
  }

  /** Closes, normally and without a frame, every socket bound with one of these access tokens. */
  disconnectTokens(tokenIds: readonly string[]): void {
    if (tokenIds.length === 0) return;
    const ids = new Set(tokenIds);
    // Revocations are rare next to frames, so a scan beats keeping a second index.
    for (const s of [...this.#all.values()]) {
      if (s.tokenId === null || !ids.has(s.tokenId)) continue;
      this.#ended(s);
      s.close(1000, 'session_closed');
    }
  }

  sessions(): IterableIterator<Session> {
    return this.#all.values();
  }
}
