import { expect } from 'vitest';
import { WebSocket } from 'ws';
import type { TestServer } from './server';

export interface Frame {
  type: string;
  cid?: unknown;
  payload: any;
}

/**
 * A WebSocket client for black-box tests: every received frame is queued, and
 * `next` takes the first queued frame matching a predicate (waiting for it).
 */
export class TestSocket {
  readonly frames: Frame[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  #waiters: { match: (f: Frame) => boolean; resolve: (f: Frame) => void }[] = [];
  #cid = 0;

  private constructor(readonly ws: WebSocket) {
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    ws.on('message', (data) => {
      const frame = JSON.parse(data.toString()) as Frame;
      const i = this.#waiters.findIndex((w) => w.match(frame));
      if (i >= 0) {
        const [w] = this.#waiters.splice(i, 1);
        w!.resolve(frame);
      } else {
        this.frames.push(frame);
      }
    });
  }

  /**
   * `path` may carry a query (a fleet test routes `/ws?node=<id>` through its
   * balancer); `localAddress` picks the loopback address the client comes from.
   */
  static open(server: Pick<TestServer, 'port'>, headers: Record<string, string> = {}, path = '/ws', options: { localAddress?: string } = {}): Promise<TestSocket> {
    const ws = new WebSocket(`ws://127.0.0.1:${server.port}${path}`, { headers, ...options });
    const socket = new TestSocket(ws);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(socket));
      ws.once('error', reject);
    });
  }

  send(frame: Record<string, unknown>): void {
    this.ws.send(JSON.stringify(frame));
  }

  sendRaw(data: string | Buffer, binary = false): void {
    this.ws.send(data, { binary });
  }

  /** The first frame (queued or future) that matches; rejects after `timeoutMs`. */
  next(match: string | ((f: Frame) => boolean) = () => true, timeoutMs = 5000): Promise<Frame> {
    const test = typeof match === 'string' ? (f: Frame) => f.type === match : match;
    // A predicate that throws on an unexpected shape simply does not match.
    const pred = (f: Frame) => {
      try {
        return test(f);
      } catch {
        return false;
      }
    };
    const i = this.frames.findIndex(pred);
    if (i >= 0) return Promise.resolve(this.frames.splice(i, 1)[0]!);
    return new Promise((resolve, reject) => {
      const waiter = { match: pred, resolve: (f: Frame) => (clearTimeout(timer), resolve(f)) };
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        reject(new Error(`no frame matching ${typeof match === 'string' ? match : 'predicate'} within ${timeoutMs} ms; queued: ${JSON.stringify(this.frames.map((f) => f.type))}`));
      }, timeoutMs);
      this.#waiters.push(waiter);
    });
  }

  /** Sends a frame with a fresh string cid and waits for the reply carrying it. */
  async request(type: string, payload?: unknown, extra: Record<string, unknown> = {}): Promise<Frame> {
    const cid = `c${++this.#cid}`;
    this.send({ type, cid, ...(payload === undefined ? {} : { payload }), ...extra });
    return this.next((f) => f.cid === cid);
  }

  /** Resolves true if no frame matching arrives within `ms`. */
  async quiet(match: string | ((f: Frame) => boolean), ms: number): Promise<boolean> {
    try {
      await this.next(match, ms);
      return false;
    } catch {
      return true;
    }
  }

  close(): void {
    this.ws.close();
  }
}

let counter = 0;

/** Registers a fresh player over REST. */
export async function registerPlayer(server: TestServer, prefix = 'p'): Promise<{ playerId: string; token: string; username: string }> {
  const username = `${prefix}_${process.pid}_${++counter}_${Math.random().toString(36).slice(2, 6)}`;
  const res = await server.call('POST', '/api/v1/auth/register', { body: { username, password: 'correct-horse-battery' } });
  if (res.status !== 200) throw new Error(`register failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { playerId: res.body.player_id, token: res.body.access_token, username };
}

/** register → open `/ws` → `session.connect`, ready to play. */
export async function connectPlayer(server: TestServer, prefix = 'p'): Promise<{ socket: TestSocket; playerId: string; token: string }> {
  const player = await registerPlayer(server, prefix);
  const socket = await TestSocket.open(server);
  const reply = await socket.request('session.connect', { token: player.token });
  if (reply.type !== 'session.connected') throw new Error(`connect failed: ${JSON.stringify(reply)}`);
  return { socket, playerId: player.playerId, token: player.token };
}

/** An `error` frame: reason (always present), code, prose, details object, and `payload.type` only on the frames that carry it. */
export function expectErrorFrame(f: Frame, reason: string, code: string, type?: string): void {
  expect(f.type).toBe('error');
  expect(f.payload.reason).toBe(reason);
  expect(f.payload.error.code).toBe(code);
  expect(typeof f.payload.error.message).toBe('string');
  expect(f.payload.error.details).toBeTypeOf('object');
  expect(f.payload.error.details).not.toBeNull();
  if (type === undefined) expect('type' in f.payload).toBe(false);
  else expect(f.payload.type).toBe(type);
}

/** Every frame the socket receives from now on, in arrival order (beside `next`, which consumes). */
export function recordFrames(socket: TestSocket): Frame[] {
  const frames: Frame[] = [];
  socket.ws.on('message', (data) => frames.push(JSON.parse(String(data))));
  return frames;
}
