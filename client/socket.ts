import type { ClientFrames, OpenPushType, PushFrames, ReplyFrames } from './generated/frames';
import { ConnectionError, ServiceError } from './service-error';
import { BinaryWorldTicks } from './world-ticks';

/** Client frames answered by a reply on success. */
export type RequestType = { [T in keyof ClientFrames]: ClientFrames[T]['reply'] extends null ? never : T }[keyof ClientFrames];
/** Client frames that are silent on success (`match.input`, `chat.send`, …); only failures answer. */
export type SilentType = { [T in keyof ClientFrames]: ClientFrames[T]['reply'] extends null ? T : never }[keyof ClientFrames];

export type PayloadOf<T extends keyof ClientFrames> = ClientFrames[T]['payload'];
export type ReplyOf<T extends RequestType> = ReplyFrames[ClientFrames[T]['reply'] & keyof ReplyFrames];

/** A frame as it arrives: `cid` only on direct replies. */
export interface Frame<P = unknown> {
  type: string;
  cid?: unknown;
  payload: P;
}

/** Payloads of every frame that reaches listeners, declared pushes by type and the open script namespaces. */
export type ListenerPayload<T extends string> = T extends keyof PushFrames
  ? PushFrames[T]
  : T extends 'error'
    ? ReplyFrames['error']
    : T extends 'session.heartbeat'
      ? ReplyFrames['session.heartbeat']
      : Record<string, unknown>;

export type ListenerType = keyof PushFrames | 'error' | 'session.heartbeat' | OpenPushType | '*';

/**
 * `connecting` the first time, `connected` once `session.connect` succeeded,
 * `reconnecting` after a drop while backing off and retrying, `closed` for
 * good (closed by the client, out of attempts, or the token was refused).
 */
export type SocketStatus = 'connecting' | 'connected' | 'reconnecting' | 'closed';

export interface StatusChange {
  status: SocketStatus;
  /** Which retry this is (`reconnecting`), counting from 1. */
  attempt?: number;
  /** The wait before that retry, ms. */
  delayMs?: number;
  /** `connected` after a drop: the server sees a new connection (chat channels and matches must be joined again). */
  reconnected?: boolean;
  /** Why the socket is `closed` or was dropped. */
  reason?: string;
}

/** The subset of the WebSocket interface the session uses: the browser's, or `ws` in Node. */
export interface WebSocketLike {
  readonly readyState: number;
  /** Set to `arraybuffer` on the binary wire, so that binary frames arrive whole rather than as a browser Blob. */
  binaryType?: string;
  onopen: ((event: any) => void) | null;
  onmessage: ((event: { data: any }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: any) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

export type WebSocketFactory = new (url: string) => WebSocketLike;

export interface SocketOptions {
  /** The service's origin (`http(s)://…`); the socket is `ws(s)://…/ws`. */
  baseUrl: string;
  /** The current access token (asked again on every connect). */
  token: () => string | null;
  /** Gets a fresh access token after the service refused one; false when the session is over. */
  refresh?: () => Promise<boolean>;
  /** Defaults to the global WebSocket (browsers, Node 22+); pass `ws`'s in older Node. */
  WebSocket?: WebSocketFactory;
  /** How often to heartbeat; the service closes a socket silent for 60 s. Default 30 000. */
  heartbeatMs?: number;
  /** How long a request waits for its reply (and a connect for its socket). Default 10 000. */
  requestTimeoutMs?: number;
  /** Reconnect backoff: the first wait, the cap, and how many tries before giving up. */
  reconnect?: { initialMs?: number; maxMs?: number; attempts?: number };
  /**
   * `binary` asks for `world.tick` as binary frames, a quarter of the bytes and cheaper to read;
   * listeners get the same payloads either way. The service may answer `json` (see `wire`). Default `json`.
   */
  wire?: 'json' | 'binary';
}

interface Pending {
  resolve: (payload: any) => void;
  reject: (err: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

const OPEN = 1;

/**
 * A WebSocket session: connects with the access token, heartbeats, pairs
 * each request with its reply by `cid` (with a timeout), hands pushes to
 * listeners by type, and after a drop reconnects with exponential backoff
 * and full jitter, so a restarted node is not hit by every client at once.
 */
export class GameSocket {
  readonly #options: SocketOptions;
  readonly #url: string;
  readonly #listeners = new Map<string, Set<(payload: any, frame: Frame) => void>>();
  readonly #statusListeners = new Set<(change: StatusChange) => void>();
  readonly #pending = new Map<string, Pending>();
  #ws: WebSocketLike | null = null;
  #status: SocketStatus = 'closed';
  #playerId: string | null = null;
  #wire: 'json' | 'binary' = 'json';
  readonly #ticks = new BinaryWorldTicks();
  #cid = 0;
  #heartbeat: ReturnType<typeof setInterval> | null = null;
  #retry: ReturnType<typeof setTimeout> | null = null;
  #attempt = 0;
  #wanted = false;
  #everConnected = false;

  constructor(options: SocketOptions) {
    this.#options = options;
    this.#url = `${options.baseUrl.replace(/\/+$/, '').replace(/^http/, 'ws')}/ws`;
  }

  get status(): SocketStatus {
    return this.#status;
  }

  /** The player the session is bound to (null before the first `session.connected`). */
  get playerId(): string | null {
    return this.#playerId;
  }

  /** The wire the service granted at the last `session.connected`: `binary` only when asked for and the service offers it. */
  get wire(): 'json' | 'binary' {
    return this.#wire;
  }

  /**
   * Opens the socket and binds it to the token's player. Resolves once
   * connected; rejects when the first attempt fails (later drops reconnect
   * on their own).
   */
  connect(): Promise<ReplyFrames['session.connected']> {
    if (this.#wanted && this.#status === 'connected') return Promise.resolve({ player_id: this.#playerId!, wire: this.#wire });
    // Already on its way: one socket at a time, so wait for the attempt under way.
    if (this.#wanted) {
      return new Promise((resolve, reject) => {
        const off = this.onStatus((change) => {
          if (change.status === 'connected') resolve({ player_id: this.#playerId!, wire: this.#wire });
          else if (change.status === 'closed') reject(new ConnectionError('closed', change.reason ?? 'closed'));
          else return;
          off();
        });
      });
    }
    this.#wanted = true;
    this.#everConnected = false;
    this.#setStatus({ status: 'connecting' });
    return this.#open().catch((err: Error) => {
      this.#shutdown(err.message);
      throw err;
    });
  }

  /** Sends a frame and resolves with its reply's payload; a failure rejects with a ServiceError. */
  request<T extends RequestType>(type: T, payload: PayloadOf<T>, options: { timeoutMs?: number } = {}): Promise<ReplyOf<T>> {
    if (this.#status !== 'connected' && type !== 'session.connect' && type !== 'session.heartbeat') {
      return Promise.reject(new ConnectionError('closed', `${type}: the socket is ${this.#status}`));
    }
    return this.#request(type, payload, options.timeoutMs);
  }

  /** Sends a frame that is silent on success; a failure reaches the `error` listeners. */
  send<T extends SilentType>(type: T, payload: PayloadOf<T>): boolean {
    const ws = this.#ws;
    if (this.#status !== 'connected' || !ws || ws.readyState !== OPEN) return false;
    ws.send(JSON.stringify({ type, payload }));
    return true;
  }

  /** Listens to uncorrelated frames of one type (`*`: every one); returns the unsubscribe. */
  on<T extends ListenerType>(type: T, listener: (payload: ListenerPayload<T>, frame: Frame<ListenerPayload<T>>) => void): () => void {
    let set = this.#listeners.get(type);
    if (!set) this.#listeners.set(type, (set = new Set()));
    set.add(listener as (payload: any, frame: Frame) => void);
    return () => set.delete(listener as (payload: any, frame: Frame) => void);
  }

  /** Resolves with the payload of the next frame of `type` (rejects after `timeoutMs`). */
  once<T extends Exclude<ListenerType, '*'>>(type: T, timeoutMs = this.#options.requestTimeoutMs ?? 10_000): Promise<ListenerPayload<T>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        off();
        reject(new ConnectionError('timeout', `no ${type} within ${timeoutMs} ms`));
      }, timeoutMs);
      const off = this.on(type, (payload) => {
        clearTimeout(timer);
        off();
        resolve(payload);
      });
    });
  }

  onStatus(listener: (change: StatusChange) => void): () => void {
    this.#statusListeners.add(listener);
    return () => this.#statusListeners.delete(listener);
  }

  /** Closes for good: no reconnect; pending requests reject with `closed`. */
  close(): void {
    this.#shutdown('closed by the client');
  }

  #request(type: string, payload: unknown, timeoutMs = this.#options.requestTimeoutMs ?? 10_000): Promise<any> {
    const ws = this.#ws;
    if (!ws || ws.readyState !== OPEN) return Promise.reject(new ConnectionError('closed', `${type}: the socket is not open`));
    const cid = String(++this.#cid);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(cid);
        reject(new ConnectionError('timeout', `${type}: no reply within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(cid, { resolve, reject, timer });
      ws.send(JSON.stringify({ type, cid, payload }));
    });
  }

  /** One attempt: open the socket, then `session.connect` (refreshing the token once if it is refused). */
  async #open(): Promise<ReplyFrames['session.connected']> {
    const ws = await this.#dial();
    this.#ticks.reset();
    const wire = this.#options.wire === 'binary' ? { wire: 'binary' } : {};
    let token = this.#options.token();
    try {
      if (token === null) throw new ServiceError('unauthenticated', 'No access token: sign in first.', {});
      let connected: ReplyFrames['session.connected'];
      try {
        connected = await this.#request('session.connect', { token, ...wire });
      } catch (err) {
        if (!(err instanceof ServiceError) || err.code !== 'unauthenticated' || !this.#options.refresh) throw err;
        if (!(await this.#options.refresh())) throw err;
        token = this.#options.token();
        connected = await this.#request('session.connect', { token, ...wire });
      }
      this.#playerId = connected.player_id;
      this.#wire = connected.wire;
      const reconnected = this.#everConnected;
      this.#everConnected = true;
      this.#attempt = 0;
      this.#startHeartbeat();
      this.#setStatus({ status: 'connected', ...(reconnected ? { reconnected } : {}) });
      return connected;
    } catch (err) {
      this.#detach(ws);
      throw err;
    }
  }

  /** Opens a socket and wires it up; rejects when it does not open in time. */
  #dial(): Promise<WebSocketLike> {
    const Ctor = this.#options.WebSocket ?? (globalThis as { WebSocket?: WebSocketFactory }).WebSocket;
    if (!Ctor) return Promise.reject(new ConnectionError('network', 'No WebSocket implementation: pass one in the options.'));
    const timeoutMs = this.#options.requestTimeoutMs ?? 10_000;
    return new Promise((resolve, reject) => {
      const ws = new Ctor(this.#url);
      if (this.#options.wire === 'binary') ws.binaryType = 'arraybuffer';
      this.#ws = ws;
      const timer = setTimeout(() => {
        this.#detach(ws);
        reject(new ConnectionError('timeout', `the socket did not open within ${timeoutMs} ms`));
      }, timeoutMs);
      ws.onopen = () => {
        clearTimeout(timer);
        resolve(ws);
      };
      ws.onmessage = (event) => this.#receive(event.data);
      ws.onerror = () => {};
      ws.onclose = (event) => {
        clearTimeout(timer);
        if (this.#ws !== ws) return;
        reject(new ConnectionError('closed', `the socket closed (${event.code}${event.reason ? ` ${event.reason}` : ''})`));
        this.#dropped(event.code, event.reason);
      };
    });
  }

  #receive(data: unknown): void {
    if (typeof data !== 'string') return this.#receiveBinary(data);
    let frame: Frame<any>;
    try {
      frame = JSON.parse(data) as Frame<any>;
    } catch {
      return;
    }
    if (typeof frame?.type !== 'string') return;
    if (typeof frame.cid === 'string') {
      const pending = this.#pending.get(frame.cid);
      if (pending) {
        this.#pending.delete(frame.cid);
        clearTimeout(pending.timer);
        if (frame.type === 'error' || frame.type === 'rpc.error') pending.reject(ServiceError.fromFrame(frame.payload));
        else pending.resolve(frame.payload);
        return;
      }
    }
    this.#emit(frame.type, frame);
    this.#emit('*', frame);
  }

  /** Only `world.tick` travels binary; a frame that does not read as one is dropped, as unreadable text is. */
  #receiveBinary(data: unknown): void {
    const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : null;
    const payload = bytes && this.#ticks.read(bytes);
    if (!payload) return;
    const frame: Frame = { type: 'world.tick', payload };
    this.#emit(frame.type, frame);
    this.#emit('*', frame);
  }

  #emit(type: string, frame: Frame): void {
    const set = this.#listeners.get(type);
    if (!set) return;
    for (const listener of [...set]) {
      try {
        listener(frame.payload, frame);
      } catch (err) {
        // One listener's bug must not starve the others or the socket; it is reported as uncaught, as a DOM listener's would be.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }

  /** A heartbeat that gets no reply means the connection is dead even if TCP has not noticed. */
  #startHeartbeat(): void {
    this.#stopHeartbeat();
    const every = this.#options.heartbeatMs ?? 30_000;
    this.#heartbeat = setInterval(() => {
      const ws = this.#ws;
      this.#request('session.heartbeat', {}).catch((err: Error) => {
        if (err instanceof ConnectionError && err.kind === 'timeout' && this.#ws === ws && ws) {
          this.#detach(ws);
          this.#dropped(0, 'heartbeat_timeout');
        }
      });
    }, every);
  }

  #stopHeartbeat(): void {
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    this.#heartbeat = null;
  }

  /** Forgets a socket: its events no longer count, and it is closed if still open. */
  #detach(ws: WebSocketLike): void {
    ws.onopen = ws.onmessage = ws.onclose = null;
    ws.onerror = () => {};
    if (ws.readyState <= OPEN) ws.close(1000);
    if (this.#ws === ws) this.#ws = null;
  }

  #rejectPending(err: Error): void {
    for (const [cid, pending] of this.#pending) {
      clearTimeout(pending.timer);
      this.#pending.delete(cid);
      pending.reject(err);
    }
  }

  /** The connection went away without the client asking. */
  #dropped(code: number, reason: string): void {
    this.#ws = null;
    this.#stopHeartbeat();
    this.#rejectPending(new ConnectionError('closed', `the socket closed (${code}${reason ? ` ${reason}` : ''})`));
    // Only a session that was up reconnects; a failing first connect is the caller's to see.
    if (!this.#wanted || !this.#everConnected || this.#status === 'connecting') return;
    // 1008 is the service refusing this client (origin, idle auth); retrying cannot help, except a connect flood.
    if (code === 1008 && reason !== 'rate_limited') {
      this.#shutdown(reason || 'policy_violation');
      return;
    }
    this.#scheduleRetry(reason || `close ${code}`);
  }

  #scheduleRetry(reason: string): void {
    const { initialMs = 500, maxMs = 15_000, attempts = Infinity } = this.#options.reconnect ?? {};
    this.#attempt += 1;
    if (this.#attempt > attempts) {
      this.#shutdown(`gave up after ${attempts} reconnect attempts (${reason})`);
      return;
    }
    const ceiling = Math.min(maxMs, initialMs * 2 ** (this.#attempt - 1));
    const delayMs = Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
    this.#setStatus({ status: 'reconnecting', attempt: this.#attempt, delayMs, reason });
    this.#retry = setTimeout(() => {
      this.#retry = null;
      if (!this.#wanted) return;
      this.#open().catch((err: Error) => {
        if (!this.#wanted) return;
        // A refused token ends the session; anything else is worth another try.
        if (err instanceof ServiceError && err.code === 'unauthenticated') this.#shutdown('unauthenticated');
        else if (this.#ws === null && this.#retry === null) this.#scheduleRetry(err.message);
      });
    }, delayMs);
  }

  #shutdown(reason: string): void {
    this.#wanted = false;
    if (this.#retry) clearTimeout(this.#retry);
    this.#retry = null;
    this.#stopHeartbeat();
    if (this.#ws) this.#detach(this.#ws);
    this.#rejectPending(new ConnectionError('closed', reason));
    if (this.#status !== 'closed') this.#setStatus({ status: 'closed', reason });
  }

  #setStatus(change: StatusChange): void {
    this.#status = change.status;
    for (const listener of [...this.#statusListeners]) listener(change);
  }
}
