import { databaseFault, databaseFaultError } from '../../runtime/platform/database';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import type { Ctx } from '../../runtime/contracts/context';
import { ApiError } from '../../runtime/contracts/errors';
import type { z } from 'zod';
import { frameInput } from '../../runtime/schemas/input';
import type { ClientFrameContract } from '../../runtime/schemas/frame-contract';
import type { sessionConnect, sessionHeartbeat } from '../../runtime/schemas/session';
import {
  errorFrame,
  FrameError,
  parseClientFrame,
  reply,
  rpcErrorFrame,
  type ClientFrame,
} from '../../runtime/contracts/frame-envelope';
import { guardSocket, isOversizedMarker, MAX_FRAGMENTS } from './frame-guard';
import { forwardedFor, TrustedProxies } from '../infra/client-address';
import { Session, SessionRegistry } from './sessions';
import { NO_METRICS, type MetricHooks } from '../metrics/registry';

/** Socket limits: frame size, and frames per rate window. */
export const MAX_FRAME_BYTES = 65_536;
export const FRAMES_PER_WINDOW = 60;
export const RATE_WINDOW_MS = 1000;
/**
 * `ws`'s own limit, beyond which it closes the connection 1009. The frame
 * guard hands `ws` no data message over MAX_FRAME_BYTES (a bigger one becomes
 * a marker), so this is never reached; it stays as a bound on memory should a
 * socket ever reach `ws` unguarded.
 */
const HARD_FRAME_CAP = 1024 * 1024;

const NO_HEAD = Buffer.alloc(0);
const SESSION = Symbol('session');
/** A socket the gateway accepted: its session rides on it. */
type GatewaySocket = WebSocket & { [SESSION]: Session };

function destroyOnError(this: Duplex): void {
  this.destroy();
}

function ignoreError(): void {}

/** What a frame handler answers: a reply (the gateway adds the `cid`), or nothing for silent success. */
export interface Reply {
  type: string;
  payload: Record<string, unknown>;
  /** False for replies that must not echo the request's `cid`, e.g. when that `cid` is itself invalid. */
  echoCid?: boolean;
}

/** What a frame handler receives: the payload its contract parsed, and the frame itself. */
export type FrameHandler<C extends ClientFrameContract> = (
  session: Session,
  payload: z.output<C['payload']>,
  frame: ClientFrame,
) => Reply | null | void | Promise<Reply | null | void>;

/** One row of the frame table (frame-table.ts): a client frame contract and the handler that serves it. */
export interface FrameRoute {
  contract: ClientFrameContract;
  handle: FrameHandler<ClientFrameContract>;
}

/**
 * The WebSocket gateway on `/ws`: connect limits, the origin allowlist, the
 * idle-auth timer, per-connection frame size and rate limits, and dispatch by
 * `type` through the frame table it is handed (frame-table.ts). A socket's frames are handled
 * one at a time in arrival order, so a reply never overtakes an earlier one.
 */
export class Gateway {
  readonly sessions: SessionRegistry;
  readonly #routes = new Map<string, FrameRoute>();
  // The frame guard takes a payload length for a message size, true only uncompressed, and
  // stops holding a message's fragments at the count past which `ws` refuses them.
  readonly #wss = new WebSocketServer({ noServer: true, maxPayload: HARD_FRAME_CAP, maxFragments: MAX_FRAGMENTS, perMessageDeflate: false, clientTracking: false });
  readonly #origins: { all: true } | { all: false; allowed: Set<string> };
  readonly #proxies: TrustedProxies;
  #nextId = 1;
  #idleSweep: ReturnType<typeof setInterval> | null = null;
  #closing = false;

  constructor(
    private readonly ctx: Ctx,
    private readonly metrics: MetricHooks = NO_METRICS,
  ) {
    this.sessions = new SessionRegistry(metrics);
    this.#origins = parseOrigins(ctx);
    this.#proxies = new TrustedProxies(ctx.settings.trusted_proxies);
  }

  /** Serves the frame table: the handler of each client frame contract (one per type). */
  serve(table: readonly FrameRoute[]): void {
    for (const route of table) {
      if (this.#routes.has(route.contract.type)) throw new Error(`frame type ${route.contract.type} already routed`);
      this.#routes.set(route.contract.type, { ...route });
    }
  }

  /** `session.connect`: binds the socket to the token's player. */
  readonly connectFrame: FrameHandler<typeof sessionConnect> = (s, p) => this.#connect(s, p);

  readonly heartbeatFrame: FrameHandler<typeof sessionHeartbeat> = () => ({ type: 'session.heartbeat', payload: { ts: this.ctx.clock.now() } });

  /** Wraps the handler of a routed type: the fleet (host/fleet/directory.ts) answers a miss with where the match runs. */
  around(type: string, wrap: (inner: FrameHandler<ClientFrameContract>) => FrameHandler<ClientFrameContract>): void {
    const route = this.#routes.get(type);
    if (route) route.handle = wrap(route.handle);
  }

  /** Every routed client frame type (the fuzz test sends each one hostile payloads). */
  frameTypes(): string[] {
    return [...this.#routes.keys()];
  }

  /** Wires the upgrade on `/ws` into the HTTP server REST already listens on. */
  attach(server: Server): void {
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.#upgrade(req, socket, head));
    const sweepEvery = Math.min(1000, this.ctx.settings.ws_idle_timeout_ms);
    this.#idleSweep = setInterval(() => this.#sweepIdle(), sweepEvery);
    this.#idleSweep.unref();
  }

  // Nothing made here outlives the handshake: a closure kept for the socket's
  // life would keep `req` (and its headers) with it.
  #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/ws' || this.#closing) {
      socket.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
      return;
    }
    socket.on('error', destroyOnError);
    // `ws` reads through the guard so that no message is too big to answer;
    // the guard reads `head` itself, so `ws` gets none.
    this.#wss.handleUpgrade(req, socket, NO_HEAD, (ws) => {
      // From here `ws` answers the socket's errors.
      socket.removeListener('error', destroyOnError);
      this.#accept(ws as GatewaySocket, req);
      guardSocket(socket, head, MAX_FRAME_BYTES);
    });
  }

  /** Graceful shutdown: every socket closes with 1001; stragglers are cut after a short grace. */
  async close(): Promise<void> {
    this.#closing = true;
    if (this.#idleSweep) clearInterval(this.#idleSweep);
    const open = [...this.sessions.sessions()];
    const closed = open.map((s) => new Promise<void>((resolve) => {
      if (s.socket.readyState === 3) return resolve();
      s.socket.once('close', () => resolve());
    }));
    for (const s of open) s.close(1001, 'server_shutdown');
    await Promise.race([Promise.all(closed), new Promise((r) => setTimeout(r, 1000).unref())]);
    for (const s of open) if (s.socket.readyState !== 3) s.socket.terminate();
    this.#wss.close();
  }

  #accept(ws: GatewaySocket, req: IncomingMessage): void {
    // The same client address REST keys its buckets on: behind a trusted proxy, the forwarded one.
    const peer = req.socket.remoteAddress ?? '';
    const ip = normaliseIp(this.#proxies.trusts(peer) ? forwardedFor(req, this.#proxies) ?? peer : peer);
    // The connect budget is spent before the origin check, so floods from a
    // rejected origin still drain it.
    if (!this.ctx.limits.take('ws_connect', `ip:${ip}`).ok) return void ws.close(1008, 'rate_limited');
    if (!this.#originAllowed(req.headers.origin)) return void ws.close(1008, 'origin_rejected');

    const session = new Session(this.#nextId++, ws, req.socket, ip, this.ctx.clock.now(), this.metrics);
    this.sessions.add(session);
    session.idleAuthTimer = setTimeout(() => session.close(1008, 'idle_auth_timeout'), this.ctx.settings.ws_idle_auth_timeout_ms);
    session.idleAuthTimer.unref();
    // Listeners shared by every socket, finding the session on it: three closures per socket were a tenth of an idle socket's heap.
    ws[SESSION] = session;
    ws.on('message', this.#onMessage);
    ws.on('error', ignoreError);
    ws.on('close', this.#onClose);
  }

  readonly #onMessage = (() => {
    const gateway = this;
    return function (this: WebSocket, data: RawData, isBinary: boolean) {
      gateway.#inbound((this as GatewaySocket)[SESSION], data, isBinary);
    };
  })();

  readonly #onClose = (() => {
    const gateway = this;
    return function (this: WebSocket) {
      const session = (this as GatewaySocket)[SESSION];
      if (session.idleAuthTimer) clearTimeout(session.idleAuthTimer);
      gateway.sessions.remove(session);
    };
  })();

  #originAllowed(origin: string | undefined): boolean {
    if (origin === undefined) return true;
    const o = this.#origins;
    return o.all || o.allowed.has(origin);
  }

  #inbound(session: Session, data: RawData, isBinary: boolean): void {
    const now = this.ctx.clock.now();
    session.lastInbound = now;
    // binaryType is the default 'nodebuffer', so every message is one Buffer.
    const buf = data as Buffer;
    const size = buf.byteLength;
    // A message over the limit arrives as the guard's marker in its place; answered before the rate check, it spends no budget.
    if (size > MAX_FRAME_BYTES || (isBinary && isOversizedMarker(buf))) return this.#refuseUntyped(session, new FrameError('payload_too_large', { echoCid: false }));
    if (now - session.windowStart >= RATE_WINDOW_MS) {
      session.windowStart = now;
      session.windowCount = 0;
    }
    if (session.windowCount >= FRAMES_PER_WINDOW) return this.#refuseUntyped(session, new FrameError('rate_limited', { echoCid: false }));
    session.windowCount++;
    if (isBinary) return this.#refuseUntyped(session, new FrameError('binary_uplink_unsupported', { echoCid: false }));

    const text = buf.toString('utf8');
    if (session.busy) {
      (session.backlog ??= []).push(text);
      return;
    }
    this.#process(session, text);
  }

  /** Answers a message refused before its type was read; it counts with the undeclared types. */
  #refuseUntyped(session: Session, err: FrameError): void {
    this.metrics.frameIn('');
    session.send(errorFrame(null, err));
  }

  /** Handles one frame; an asynchronous handler holds the socket's later frames until it settles. */
  #process(session: Session, text: string): void {
    const frame = parseClientFrame(text);
    if (frame instanceof FrameError) return this.#refuseUntyped(session, frame);
    this.metrics.frameIn(frame.type);
    const route = this.#routes.get(frame.type);
    if (!route || (route.contract.auth && session.playerId === null)) {
      return session.send(errorFrame(frame, new FrameError('unknown_type')));
    }
    if (frame.refusal) {
      // rpc.call answers every failure as rpc.error.
      return session.send(frame.type === 'rpc.call' ? rpcErrorFrame(frame, frame.refusal) : errorFrame(frame, FrameError.from(frame.refusal)));
    }
    let out: ReturnType<FrameRoute['handle']>;
    try {
      out = route.handle(session, this.#payload(route.contract, frame), frame);
    } catch (err) {
      return this.#fail(session, frame, err);
    }
    if (out instanceof Promise) {
      session.busy = true;
      out.then(
        (r) => this.#answer(session, frame, r, route.contract),
        (err) => this.#fail(session, frame, err),
      ).finally(() => {
        session.busy = false;
        this.#drain(session);
      });
      return;
    }
    this.#answer(session, frame, out, route.contract);
  }

  /** The payload as the frame's contract parses it; a frame that needs one and came without is `unknown_type`. */
  #payload(contract: ClientFrameContract, frame: ClientFrame): unknown {
    if (!frame.hasPayload && contract.absent === 'unknown_type') throw new FrameError('unknown_type');
    return frameInput(contract.payload, contract.type, frame.hasPayload ? frame.payload : {}, contract);
  }

  #drain(session: Session): void {
    while (!session.busy && session.backlog && session.backlog.length > 0) {
      const next = session.backlog.shift()!;
      if (session.backlog.length === 0) session.backlog = null;
      this.#process(session, next);
    }
  }

  #answer(session: Session, frame: ClientFrame, out: Reply | null | void, contract: ClientFrameContract): void {
    if (!out) return;
    if (this.ctx.settings.response_checks) {
      try {
        checkReply(contract, out);
      } catch (err) {
        return this.#fail(session, frame, err);
      }
    }
    session.send(reply(out.echoCid === false ? null : frame, out.type, out.payload));
  }

  #fail(session: Session, frame: ClientFrame, err: unknown): void {
    if (err instanceof FrameError) return session.send(errorFrame(frame, err));
    if (err instanceof ApiError) return session.send(errorFrame(frame, FrameError.from(err)));
    const fault = databaseFault(err);
    if (fault) {
      this.ctx.log.warn('database_fault', { type: frame.type, player_id: session.playerId, reason: fault, error: (err as Error).message });
      return session.send(errorFrame(frame, FrameError.from(databaseFaultError(fault))));
    }
    this.ctx.log.error('ws_frame_failed', { type: frame.type, player_id: session.playerId, error: err });
    session.send(errorFrame(frame, new FrameError('internal_error')));
  }

  async #connect(session: Session, { token, wire }: z.output<typeof sessionConnect.payload>): Promise<Reply | null> {
    const principal = await this.ctx.auth.resolve(token);
    if (!principal) throw new FrameError('invalid_token');
    // Closed while the token resolved: binding now would outlive the socket.
    if (session.socket.readyState !== 1) return null;
    if (session.idleAuthTimer) {
      clearTimeout(session.idleAuthTimer);
      session.idleAuthTimer = null;
    }
    this.sessions.bind(session, principal.playerId, principal.tokenId, principal.expiresAt ?? null);
    // Every connect negotiates afresh, a re-auth included, as the reference does: the wire is what this connect asked for.
    session.binaryWire = wire === 'binary' && this.ctx.settings.binary_wire;
    this.ctx.log.debug('ws_session_connected', { player_id: principal.playerId, session: session.id });
    return { type: 'session.connected', payload: { player_id: principal.playerId, wire: session.binaryWire ? 'binary' : 'json' } };
  }

  #sweepIdle(): void {
    const now = this.ctx.clock.now();
    const limit = this.ctx.settings.ws_idle_timeout_ms;
    for (const s of this.sessions.sessions()) {
      if (s.playerId !== null && now - s.lastInbound >= limit) s.close(1000, 'idle_timeout');
    }
  }
}

/** The `ws_allowed_origins` setting (validated at boot): unset or empty admits every origin. */
function parseOrigins(ctx: Ctx): { all: true } | { all: false; allowed: Set<string> } {
  const raw = ctx.settings.ws_allowed_origins;
  if (raw === undefined || raw.length === 0) return { all: true };
  return { all: false, allowed: new Set(raw) };
}

/**
 * With `response_checks` on (the test suite runs so), a reply that does not
 * match its frame's declared reply is a defect: the frame answers `internal`.
 */
function checkReply(contract: ClientFrameContract, out: Reply): void {
  // An `rpc.error` reply is the frame's failure answer, not its success.
  if (out.type === 'rpc.error') return;
  const declared = contract.reply;
  const result = declared && declared.type === out.type ? declared.payload.safeParse(out.payload) : null;
  if (result?.success) return;
  const problems = result ? result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ') : `undeclared reply type ${out.type}`;
  throw new Error(`reply to ${contract.type} does not match its declared schema: ${problems}`);
}

function normaliseIp(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

