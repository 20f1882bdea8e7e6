import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Redis } from 'ioredis';
import { ApiError } from '../../runtime/contracts/errors';
import type { Logger } from '../../runtime/platform/log';
import { redactUrl } from '../banner';

/** What a bus message carries to its handlers: the body and the node that published it. */
export type BusHandler = (body: any, from: string) => void;

/**
 * How the nodes of one game tell each other what happened (docs/decisions/0041).
 * Every message reaches every node, the publishing node included, and all
 * nodes see all messages in one order: the order the bus (Redis, one
 * channel) took them in. That single order is what lets chat members on
 * different nodes see a channel's messages in the same sequence.
 */
export interface Bus {
  /** This process's name in the fleet (`SVC_NODE_ID`, or host, pid and a random suffix). */
  readonly nodeId: string;
  /** The command connection, for keys (presence, directory); null on a node that is a fleet of one. */
  readonly redis: Redis | null;
  /** Keys and the channel live under this prefix (`REDIS_PREFIX`), so fleets can share one Redis. */
  readonly prefix: string;
  publish(kind: string, body: unknown): void;
  on(kind: string, handler: BusHandler): void;
  /**
   * Reads on a request path, over a connection where each command answers
   * within ASK_DEADLINE_MS or fails (at once while the link is down): a
   * failure is `fleet_unavailable`. Nothing is queued behind an outage, so no
   * socket waits for Redis to come back. A request path makes one command.
   */
  ask<T>(read: (redis: Redis) => Promise<T>): Promise<T>;
  /** Whether both links are up and this node is subscribed: it hears every message published now. */
  connected(): boolean;
  /** Told when the listening link is back after a cut: what was published meanwhile never reached this node. */
  onRelink(handler: () => void): void;
  close(): Promise<void>;
}

/** The deadline of a Redis call on a request path (`Bus.ask`). */
export const ASK_DEADLINE_MS = 500;

export function defaultNodeId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

/** Registered handlers by kind; a throwing handler is logged and never stops the others. */
class Handlers {
  readonly #byKind = new Map<string, BusHandler[]>();

  constructor(private readonly log: Logger) {}

  add(kind: string, handler: BusHandler): void {
    const list = this.#byKind.get(kind);
    if (list) list.push(handler);
    else this.#byKind.set(kind, [handler]);
  }

  run(kind: string, body: unknown, from: string): void {
    for (const handler of this.#byKind.get(kind) ?? []) {
      try {
        handler(body, from);
      } catch (err) {
        this.log.error('fleet_handler_failed', { kind, error: err });
      }
    }
  }
}

/**
 * Without `REDIS_URL` the node is the whole fleet: a message is handled at
 * once, in the publishing call, so a single node behaves exactly as it did
 * before there was a bus.
 */
export class LocalBus implements Bus {
  readonly redis = null;
  readonly prefix = '';
  readonly #handlers: Handlers;

  constructor(
    readonly nodeId: string,
    log: Logger,
  ) {
    this.#handlers = new Handlers(log);
  }

  publish(kind: string, body: unknown): void {
    this.#handlers.run(kind, body, this.nodeId);
  }

  on(kind: string, handler: BusHandler): void {
    this.#handlers.add(kind, handler);
  }

  ask<T>(): Promise<T> {
    return Promise.reject(new ApiError('fleet_unavailable'));
  }

  connected(): boolean {
    return true;
  }

  onRelink(): void {}

  async close(): Promise<void> {}
}

/** How long boot waits for Redis (a node and its Redis often start together) before it refuses to start. */
export const BOOT_WAIT_MS = 10_000;

/**
 * Redis pub/sub on one channel: one connection publishes and runs commands
 * (in order, so a key written before a message is there when the message
 * lands), a second one only listens. ioredis reconnects on its own; commands
 * issued meanwhile wait in its queue. A third connection serves request
 * paths: it queues nothing and gives each command ASK_DEADLINE_MS.
 */
export class RedisBus implements Bus {
  readonly #handlers: Handlers;
  readonly #channel: string;
  #warned = 0;
  /** False from the moment the listening link drops until it has subscribed again. */
  #subscribed = true;
  readonly #relinked: (() => void)[] = [];

  private constructor(
    readonly nodeId: string,
    readonly redis: Redis,
    private readonly sub: Redis,
    private readonly reads: Redis,
    readonly prefix: string,
    private readonly log: Logger,
  ) {
    this.#handlers = new Handlers(log);
    this.#channel = `${prefix}bus`;
  }

  /**
   * Connects both links and subscribes, retrying (as ioredis does) for up to
   * `waitMs`; a Redis that has not answered by then refuses the boot.
   */
  static async open(url: string, options: { nodeId: string; prefix: string; log: Logger; waitMs?: number }): Promise<RedisBus> {
    const waitMs = options.waitMs ?? BOOT_WAIT_MS;
    const common = { lazyConnect: true, maxRetriesPerRequest: null, connectTimeout: waitMs, connectionName: options.nodeId };
    const redis = new Redis(url, common);
    const sub = new Redis(url, common);
    const reads = new Redis(url, { ...common, enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: ASK_DEADLINE_MS });
    const bus = new RedisBus(options.nodeId, redis, sub, reads, options.prefix, options.log);
    let last = `no answer within ${waitMs} ms`;
    let booting = true;
    for (const link of [redis, sub, reads]) {
      link.on('error', (err: Error) => {
        if (booting) last = err.message;
        else bus.#warn(err);
      });
    }
    sub.on('message', (channel: string, text: string) => {
      if (channel === bus.#channel) bus.#dispatch(text);
    });
    const ready = (link: Redis) =>
      new Promise<void>((resolve) => {
        link.once('ready', () => resolve());
        link.connect().catch(() => {});
      });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const gaveUp = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), waitMs)));
    const joined = await Promise.race([
      (async () => {
        await Promise.all([ready(redis), ready(sub), ready(reads)]);
        await sub.subscribe(bus.#channel);
        return true;
      })(),
      gaveUp,
    ]);
    clearTimeout(timer);
    booting = false;
    if (!joined) {
      redis.disconnect();
      sub.disconnect();
      reads.disconnect();
      throw new Error(`cannot reach Redis at ${redactUrl(url)} within ${waitMs} ms: ${last} (check REDIS_URL)`);
    }
    sub.on('close', () => (bus.#subscribed = false));
    sub.on('ready', () => void bus.#resubscribe());
    options.log.info('fleet_joined', { node: options.nodeId, redis: redactUrl(url), prefix: options.prefix });
    return bus;
  }

  async ask<T>(read: (redis: Redis) => Promise<T>): Promise<T> {
    if (this.reads.status !== 'ready') throw new ApiError('fleet_unavailable');
    try {
      return await read(this.reads);
    } catch (err) {
      this.#warn(err as Error);
      throw new ApiError('fleet_unavailable');
    }
  }

  connected(): boolean {
    return this.#subscribed && this.redis.status === 'ready';
  }

  onRelink(handler: () => void): void {
    this.#relinked.push(handler);
  }

  /** ioredis subscribes again on its own once the link is ready; a subscribe of ours queued behind it answers once that is done. */
  async #resubscribe(): Promise<void> {
    try {
      await this.sub.subscribe(this.#channel);
    } catch (err) {
      this.#warn(err as Error);
      return;
    }
    if (this.#subscribed) return;
    this.#subscribed = true;
    for (const handler of this.#relinked) {
      try {
        handler();
      } catch (err) {
        this.log.error('fleet_handler_failed', { kind: 'relink', error: err });
      }
    }
  }

  publish(kind: string, body: unknown): void {
    this.redis.publish(this.#channel, JSON.stringify({ f: this.nodeId, k: kind, b: body })).catch((err: Error) => this.#warn(err));
  }

  on(kind: string, handler: BusHandler): void {
    this.#handlers.add(kind, handler);
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.sub.quit(), this.redis.quit(), this.reads.quit()]);
  }

  #dispatch(text: string): void {
    let message: { f: string; k: string; b: unknown };
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    this.#handlers.run(message.k, message.b, message.f);
  }

  /** A lost link is weather: said once per ten seconds, not once per retry. */
  #warn(err: Error): void {
    const now = Date.now();
    if (now - this.#warned < 10_000) return;
    this.#warned = now;
    this.log.warn('fleet_redis_error', { error: err.message });
  }
}
