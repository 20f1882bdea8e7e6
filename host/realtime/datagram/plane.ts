import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Ctx } from '../../../runtime/contracts/context';
import { ApiError } from '../../../runtime/contracts/errors';
import { isPlainObject } from '../../../runtime/contracts/frame-envelope';
import type { Settings } from '../../../runtime/contracts/settings';
import type { JsonObject } from '../../../runtime/contracts/json';
import { inputSeq, WorldInput } from '../../../runtime/schemas/worlds';
import { Opcode, datagramPrefix, type PoseManifest } from '../../../runtime/worlds/pose-datagram';
import { NO_METRICS, type DatagramDrop, type MetricHooks } from '../../metrics/registry';
import type { RpcHandler } from '../rpc';
import type { Session } from '../sessions';
import { CHALLENGE_BYTES, bodyOf, connIdOf, cseqOf, helloOk, macValid, pong, uplinkOpcode } from './wire';

type PlaneSettings = NonNullable<Settings['datagrams']>;

/** How long a mint stays usable without completing a challenge (the answer's `expires_in`). */
const MINT_TTL_MS = 60_000;
const SWEEP_MS = 30_000;
/** Rebinds (a `hello` from an address other than the bound one) one connection may ask for per window, then it is torn down. */
const REBIND_LIMIT = 3;
const REBIND_WINDOW_MS = 60_000;

/** Handed the input of an authenticated `world.input` datagram, as the socket's `world.input` hands its payload and `seq`. */
export type DatagramInput = (playerId: string, input: JsonObject, seq: number | null) => void;

/**
 * One minted connection. It belongs to the socket that minted it and dies with it; the address
 * is where its downlink goes, set only by a completed challenge.
 */
interface Binding {
  readonly connId: number;
  readonly key: Buffer;
  readonly playerId: string;
  readonly session: Session;
  /** The limiter's key for this connection: its conn_id, never anything observed. */
  readonly limitKey: string;
  /** The 16 bytes before every pose body to this connection, made once. */
  readonly posePrefix: Uint8Array;
  readonly mintedAt: number;
  /** The highest counter accepted; every uplink must carry a higher one. */
  cseq: number;
  address: string | null;
  port: number;
  /** The address the outstanding challenge went to, and the challenge. */
  pendingAddress: string | null;
  pendingPort: number;
  challenge: Buffer | null;
  /** When each rebind of the current window was asked for. */
  rebinds: number[];
}

/**
 * The datagram plane (docs/datagrams.md, decision 0065): one UDP socket in this process, the
 * table of minted connections, the uplink pipeline and the pose fan-out.
 *
 * Every datagram goes through the same steps in the same order, and only the last ones cost
 * anything: the parse guard (arithmetic on the bytes), the node's budget (a constant key), the
 * conn_id lookup, that connection's budget (its conn_id), and only then the mac and the counter.
 * Nothing that fails a step is answered, so a forged or malformed datagram costs an attacker
 * a packet and teaches nothing; each drop is counted by reason. The two replies there are
 * (`hello_ok`, `pong`) are smaller than the smallest request that earns them.
 */
export class DatagramPlane {
  /** What poses are encoded with, or null when poses are off (no fields declared, or the binary wire off): the plane then carries input alone. */
  readonly manifest: PoseManifest | null;
  /** Where clients send: the setting's host and port (the bound port when it names none). */
  readonly endpoint: string;
  /** The node's epoch: poses carry it, and a client drops one from another start of the node. */
  readonly epoch: number;
  /** Where an authenticated input goes; until it is set, inputs are dropped and counted `input_unrouted`. */
  onInput: DatagramInput | null = null;

  readonly #socket: Socket;
  readonly #byConn = new Map<number, Binding>();
  readonly #bySession = new Map<Session, Binding>();
  readonly #byPlayer = new Map<string, Binding[]>();
  readonly #sweep: ReturnType<typeof setInterval>;
  readonly #sent: (err: Error | null) => void;

  private constructor(
    private readonly ctx: Ctx,
    private readonly metrics: MetricHooks,
    socket: Socket,
    settings: PlaneSettings,
  ) {
    this.#socket = socket;
    const port = (socket.address() as AddressInfo).port;
    this.endpoint = /(?:^[^:]*|\])$/.test(settings.endpoint) ? `${settings.endpoint}:${port}` : settings.endpoint;
    this.epoch = randomInt(0, 0x10000);
    // A pose names a slot only the binary world.tick binds: with that wire off no client could read one.
    this.manifest =
      settings.pose_fields.length > 0 && ctx.settings.binary_wire
        ? { fields: settings.pose_fields.map((f) => ({ name: f.name, scale: f.scale })), periodTicks: settings.period_ticks, epoch: this.epoch }
        : null;
    this.#sent = (err) => {
      if (err) this.metrics.datagramDropped('send_failed');
    };
    socket.on('message', (msg, rinfo) => this.#receive(msg, rinfo));
    // A send's failure reaches its callback; anything else is the socket's, and one bad packet must not end the process.
    socket.on('error', (err) => this.ctx.log.warn('datagram_socket_error', { error: err.message }));
    this.#sweep = setInterval(() => this.#expire(), SWEEP_MS);
    this.#sweep.unref();
  }

  /** Binds the socket of `settings.datagrams`; rejects with the reason when the address cannot be bound. */
  static async open(ctx: Ctx, metrics: MetricHooks = NO_METRICS): Promise<DatagramPlane> {
    const settings = ctx.settings.datagrams;
    if (!settings) throw new Error('the datagram plane is off');
    const socket = createSocket({ type: settings.host.includes(':') ? 'udp6' : 'udp4' });
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind({ port: settings.port, address: settings.host, exclusive: true }, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    return new DatagramPlane(ctx, metrics, socket, settings);
  }

  /** The bound UDP port. */
  get port(): number {
    return (this.#socket.address() as AddressInfo).port;
  }

  /** Live bindings, minted or bound. */
  get size(): number {
    return this.#byConn.size;
  }

  // ---- for the world engine ----------------------------------------------------

  /**
   * Whether the player has a bound connection that can read poses (its socket is on the binary
   * wire, which binds the slots poses name): a zone none of whose watchers wants poses need not
   * encode any.
   */
  wantsPoses(playerId: string): boolean {
    if (this.manifest === null) return false;
    const held = this.#byPlayer.get(playerId);
    if (held === undefined) return false;
    for (const b of held) if (b.address !== null && b.session.binaryWire) return true;
    return false;
  }

  /**
   * Sends a zone's pose bodies of one tick (`encodePoseDatagrams`) to each of these players'
   * bound connections that can read them, each body behind that connection's prefix: the body
   * is shared, never copied or encoded again per player. Returns the datagrams written.
   */
  sendPoses(playerIds: Iterable<string>, bodies: readonly Uint8Array[]): number {
    if (this.manifest === null || bodies.length === 0) return 0;
    let written = 0;
    for (const playerId of playerIds) {
      const held = this.#byPlayer.get(playerId);
      if (held === undefined) continue;
      for (const b of held) {
        if (b.address === null || !b.session.binaryWire) continue;
        for (const body of bodies) this.#socket.send([b.posePrefix, body], b.port, b.address, this.#sent);
        written += bodies.length;
      }
    }
    this.metrics.datagramsOut.n += written;
    return written;
  }

  /** Counts pose values the encoder saturated (`PoseBatch.saturated`), for the operator's metrics. */
  noteSaturated(count: number): void {
    this.metrics.poseSaturated.n += count;
  }

  // ---- minting and revocation --------------------------------------------------

  /** `asobi.datagram.open` and `asobi.datagram.close`, for the RPC registry. */
  methods(): { open: RpcHandler; close: RpcHandler } {
    return {
      open: (_params, call) => {
        if (call.session === null || call.session.playerId !== call.playerId) {
          throw new ApiError('datagram_unavailable', 'The datagram plane is opened from an authenticated socket.');
        }
        return this.mint(call.session);
      },
      close: (params, call) => {
        const connId = params.conn_id;
        if (typeof connId !== 'number' || !Number.isInteger(connId) || connId < 0 || connId > 0xffffffff) {
          throw new ApiError('rpc.invalid_params', 'conn_id must be the integer the open answered.');
        }
        // The same answer whoever holds it, so the call cannot be used to ask whether a conn_id exists.
        const b = this.#byConn.get(connId);
        if (b && b.playerId === call.playerId) this.#revoke(b);
        return { closed: true };
      },
    };
  }

  /**
   * A fresh connection for the socket, replacing any it held: its conn_id, its 32-byte key (this
   * answer, inside the socket's TLS, is the only place the key ever travels), the endpoint and
   * what poses are read with.
   */
  mint(session: Session): Record<string, unknown> {
    const old = this.#bySession.get(session);
    if (old) this.#revoke(old);
    let connId: number;
    do connId = randomInt(1, 0x1_0000_0000);
    while (this.#byConn.has(connId));
    const b: Binding = {
      connId,
      key: randomBytes(32),
      playerId: session.playerId!,
      session,
      limitKey: String(connId),
      posePrefix: datagramPrefix(Opcode.pose, connId),
      mintedAt: this.ctx.clock.now(),
      cseq: 0,
      address: null,
      port: 0,
      pendingAddress: null,
      pendingPort: 0,
      challenge: null,
      rebinds: [],
    };
    this.#byConn.set(connId, b);
    this.#bySession.set(session, b);
    const held = this.#byPlayer.get(b.playerId);
    if (held) held.push(b);
    else this.#byPlayer.set(b.playerId, [b]);
    const m = this.manifest;
    return {
      conn_id: connId,
      kup: b.key.toString('base64'),
      epoch: this.epoch,
      endpoint: this.endpoint,
      expires_in: MINT_TTL_MS / 1000,
      fields: m ? m.fields.map((f) => ({ name: f.name, scale: f.scale })) : [],
      period_ticks: m ? m.periodTicks : 0,
    };
  }

  /** The socket no longer speaks for its player (SessionRegistry.onSessionEnded): its connection goes at once. */
  revokeSession(session: Session): void {
    const b = this.#bySession.get(session);
    if (b) this.#revoke(b);
  }

  #revoke(b: Binding): void {
    this.#byConn.delete(b.connId);
    this.#bySession.delete(b.session);
    const held = this.#byPlayer.get(b.playerId);
    if (!held) return;
    const rest = held.filter((x) => x !== b);
    if (rest.length === 0) this.#byPlayer.delete(b.playerId);
    else this.#byPlayer.set(b.playerId, rest);
  }

  /** Mints that never completed a challenge lapse; a bound connection lives as long as its socket. */
  #expire(): void {
    const cutoff = this.ctx.clock.now() - MINT_TTL_MS;
    for (const b of [...this.#byConn.values()]) if (b.address === null && b.mintedAt <= cutoff) this.#revoke(b);
  }

  // ---- the uplink ---------------------------------------------------------------

  #receive(msg: Buffer, from: RemoteInfo): void {
    this.metrics.datagramsIn.n++;
    const op = uplinkOpcode(msg);
    if (op === 0) return this.#drop('malformed');
    const limits = this.ctx.limits;
    if (!limits.take('datagram_global', 'node').ok) return this.#drop('budget');
    const b = this.#byConn.get(connIdOf(msg));
    if (b === undefined) return this.#drop('unknown_conn');
    if (!limits.take('datagram_conn', b.limitKey).ok) return this.#drop('conn_budget');
    if (!macValid(msg, b.key)) return this.#drop('mac');
    // Before anything the datagram asks for: a replayed hello_confirm must not reach the binding.
    const cseq = cseqOf(msg);
    if (cseq <= b.cseq) return this.#drop('replay');
    b.cseq = cseq;
    switch (op) {
      case Opcode.hello:
        return this.#hello(b, from);
      case Opcode.helloConfirm:
        return this.#confirm(b, msg, from);
      case Opcode.ping:
        return this.#reply(pong(b.connId, msg, Date.now()), from);
      case Opcode.bye:
        return this.#revoke(b);
      case Opcode.input:
        return this.#input(b, msg);
    }
  }

  /**
   * A challenge to the address the hello came from, and nothing else to it until the echo
   * comes back from there. From an address other than the bound one it is a rebind the
   * client asks for: the downlink stays where it was meanwhile, and past the limit the
   * connection is torn down (the socket carries everything as before).
   */
  #hello(b: Binding, from: RemoteInfo): void {
    if (b.address !== null && (b.address !== from.address || b.port !== from.port)) {
      const now = this.ctx.clock.now();
      b.rebinds = b.rebinds.filter((at) => now - at < REBIND_WINDOW_MS);
      if (b.rebinds.length >= REBIND_LIMIT) {
        this.#revoke(b);
        return this.#drop('rebind_limit');
      }
      b.rebinds.push(now);
    }
    b.challenge = randomBytes(CHALLENGE_BYTES);
    b.pendingAddress = from.address;
    b.pendingPort = from.port;
    this.#reply(helloOk(b.connId, b.challenge), from);
  }

  #confirm(b: Binding, msg: Buffer, from: RemoteInfo): void {
    const echo = bodyOf(msg).subarray(0, CHALLENGE_BYTES);
    const ok = b.challenge !== null && b.pendingAddress === from.address && b.pendingPort === from.port && timingSafeEqual(echo, b.challenge);
    if (!ok) return this.#drop('challenge');
    b.address = from.address;
    b.port = from.port;
    // Used once: a captured echo proves nothing against a later challenge.
    b.challenge = null;
    b.pendingAddress = null;
  }

  /** The body is the `world.input` payload as the socket frame carries it, or `{input, seq}` as the reference's clients may send it. */
  #input(b: Binding, msg: Buffer): void {
    if (!this.ctx.limits.take('datagram_input', b.limitKey).ok) return this.#drop('input_budget');
    let body: unknown;
    try {
      body = JSON.parse(bodyOf(msg).toString('utf8'));
    } catch {
      return this.#drop('input_malformed');
    }
    if (!isPlainObject(body)) return this.#drop('input_malformed');
    const wrapped = isPlainObject(body.input);
    const parsed = WorldInput.safeParse(wrapped ? body.input : body);
    if (!parsed.success) return this.#drop('input_malformed');
    const onInput = this.onInput;
    if (onInput === null) return this.#drop('input_unrouted');
    const seq = body.seq;
    onInput(b.playerId, parsed.data, inputSeq(seq));
  }

  #reply(datagram: Buffer, to: RemoteInfo): void {
    this.#socket.send(datagram, to.port, to.address, this.#sent);
    this.metrics.datagramsOut.n++;
  }

  #drop(reason: DatagramDrop): void {
    this.metrics.datagramDropped(reason);
  }

  async close(): Promise<void> {
    clearInterval(this.#sweep);
    this.#byConn.clear();
    this.#bySession.clear();
    this.#byPlayer.clear();
    await new Promise<void>((resolve) => this.#socket.close(() => resolve()));
  }
}
