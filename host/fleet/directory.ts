import { FrameError } from '../../runtime/contracts/frame-envelope';
import type { Logger } from '../../runtime/platform/log';
import type { Gateway } from '../realtime/gateway';
import type { Bus } from './bus';
import type { FleetPresence } from './fleet-presence';

/** How often a node compares its live matches and worlds with what it published. */
const SYNC_MS = 250;
/** Every this many passes it writes all of them again: Redis keeps nothing on disk, and a restarted one comes back empty. */
const REWRITE_EVERY = 40;

/** The node of a directory entry when that node's heartbeat key lives; an entry of a dead node is dropped as it is read. */
const WHERE = `
local node = redis.call('HGET', KEYS[1], ARGV[1])
if not node then return false end
if redis.call('EXISTS', ARGV[2] .. node) == 1 then return node end
redis.call('HDEL', KEYS[1], ARGV[1])
return false
`;

/** The live matches and worlds of this node (host/realtime/match/match-host.ts, world/world-host.ts). */
export interface DirectorySources {
  matches(): Iterable<string>;
  worlds(): Iterable<string>;
}

/**
 * Which node runs which match and world: one Redis hash, `match:<id>` and
 * `world:<id>` → node. A match or world lives on one node; a player whose
 * socket is on another node and asks to join it is told which node to
 * reconnect to (decision 0041 says why that and not a relay): the join
 * answers `match_not_found` / `world_not_found` as before, with
 * `details.node` naming the node that runs it. Entries of a node that died
 * are ignored (its heartbeat is gone) and dropped when read.
 */
export class FleetDirectory {
  readonly #published = new Set<string>();
  #timer: ReturnType<typeof setInterval> | null = null;
  #syncing = false;
  #passes = 0;
  readonly #key: string;

  constructor(
    private readonly bus: Bus,
    private readonly presence: FleetPresence,
    private readonly sources: DirectorySources,
    private readonly log: Logger,
  ) {
    this.#key = `${bus.prefix}directory`;
  }

  start(): void {
    if (!this.bus.redis || this.#timer) return;
    this.#timer = setInterval(() => void this.sync(), SYNC_MS);
    this.#timer.unref();
  }

  /** Publishes what started and withdraws what ended since the last pass. */
  async sync(): Promise<void> {
    const redis = this.bus.redis;
    if (!redis || this.#syncing) return;
    this.#syncing = true;
    try {
      const now = new Set<string>();
      for (const id of this.sources.matches()) now.add(`match:${id}`);
      for (const id of this.sources.worlds()) now.add(`world:${id.toLowerCase()}`);
      const rewrite = ++this.#passes % REWRITE_EVERY === 0;
      const added = [...now].filter((f) => rewrite || !this.#published.has(f));
      const gone = [...this.#published].filter((f) => !now.has(f));
      if (added.length === 0 && gone.length === 0) return;
      const tx = redis.multi();
      if (added.length > 0) tx.hset(this.#key, Object.fromEntries(added.map((f) => [f, this.bus.nodeId])));
      if (gone.length > 0) tx.hdel(this.#key, ...gone);
      await tx.exec();
      for (const f of added) this.#published.add(f);
      for (const f of gone) this.#published.delete(f);
    } catch (err) {
      this.log.warn('fleet_directory_failed', { error: (err as Error).message });
    } finally {
      this.#syncing = false;
    }
  }

  /**
   * The live node (not this one) that runs the match or world, or null: one
   * script (the entry, and whether its node's heartbeat key is still there),
   * so one command within the bus's request deadline, `fleet_unavailable` past it.
   */
  async where(kind: 'match' | 'world', id: string): Promise<string | null> {
    if (!this.bus.redis) return null;
    const field = `${kind}:${kind === 'world' ? id.toLowerCase() : id}`;
    const node = await this.bus.ask((reads) => reads.eval(WHERE, 1, this.#key, field, this.presence.beatPrefix) as Promise<string | null>);
    return node === null || node === this.bus.nodeId ? null : node;
  }

  /** `match.join` and `world.join`: a miss here that another node serves names that node. */
  attach(gateway: Gateway): void {
    if (!this.bus.redis) return;
    const told = (kind: 'match' | 'world', reason: string, idOf: (payload: any) => unknown) =>
      gateway.around(`${kind}.join`, (inner) => async (session, payload, frame) => {
        try {
          return await inner(session, payload, frame);
        } catch (err) {
          const id = idOf(payload);
          if (!(err instanceof FrameError) || err.reason !== reason || typeof id !== 'string') throw err;
          const node = await this.where(kind, id);
          if (!node) throw err;
          throw new FrameError(reason, { message: `The ${kind} runs on another node; reconnect there (details.node).`, details: { node } });
        }
      });
    told('match', 'match_not_found', (p) => p?.match_id);
    told('world', 'world_not_found', (p) => p?.world_id);
  }

  /** Shutdown: this node's matches and worlds end with it. */
  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    const redis = this.bus.redis;
    if (!redis || this.#published.size === 0) return;
    await redis.hdel(this.#key, ...this.#published).catch(() => {});
    this.#published.clear();
  }
}
