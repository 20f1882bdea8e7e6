import type { Presence } from '../../runtime/schemas/presence';
import type { Logger } from '../../runtime/platform/log';
import type { Bus } from './bus';

/** How often a node says it is alive, and how long its word lasts. */
export const HEARTBEAT_MS = 1000;
/** A node that missed this long of heartbeats is dead: its players stop counting (decision 0041). */
export const NODE_TTL_MS = 3000;

interface Entry {
  presence: Presence;
  /** When the node that holds the socket set it (its clock); the newest entry across nodes wins. */
  at: number;
}

/** An entry and the node it came from. */
interface Held extends Entry {
  node: string;
}

interface PresenceMessage {
  p: string;
  v: Presence | null;
  a: number;
}

/**
 * Who is online across the fleet, and with what status. Each node owns the
 * entries of the players whose sockets it holds: it writes them to a hash
 * under its name (kept alive by its heartbeat, so the hash of a node that
 * died without a goodbye expires with it) and announces every change on the
 * bus. Every node keeps a copy of all entries, so reads (`online_players`,
 * friends' presence, "is this friend online") never wait on Redis; a node
 * that joins late, or comes back after it was taken for dead, is read from
 * its hash. On a node without Redis the copy is just this node's entries.
 */
export class FleetPresence {
  /**
   * player → their entry, from the one node that holds their sockets (nearly
   * always), or node → entry while several do: a map per player was a
   * twentieth of an idle socket's heap.
   */
  readonly #players = new Map<string, Held | Map<string, Held>>();
  readonly #byNode = new Map<string, Set<string>>();
  /** Nodes whose hash this node has read (or that announced every entry to it since it started). */
  readonly #known = new Set<string>();
  #timer: ReturnType<typeof setInterval> | null = null;
  #lastBeat = Date.now();
  #beating = false;
  /** The nodes alive at the last heartbeat, this one included. */
  #alive: ReadonlySet<string>;
  /**
   * Told, on one node of the fleet, of the players a dead node held who are
   * now online nowhere (their friends are owed an "offline"); a node that
   * said goodbye told them itself as its sockets closed.
   */
  onLost: ((players: string[]) => void) | null = null;

  constructor(
    private readonly bus: Bus,
    private readonly log: Logger,
  ) {
    this.#alive = new Set([bus.nodeId]);
    bus.on('presence', (m: PresenceMessage, from) => {
      if (from !== bus.nodeId) this.#apply(from, m.p, m.v === null ? null : { presence: m.v, at: m.a });
    });
    // A node whose hash lapsed wrote it again: read it again, as if it had just joined.
    bus.on('presence_reset', (_m, from) => {
      if (from !== bus.nodeId) this.#known.delete(from);
    });
    bus.on('node_gone', (_m, from) => {
      if (from === bus.nodeId) return;
      this.#forget(from);
      this.#alive = new Set([...this.#alive].filter((n) => n !== from));
    });
  }

  start(): void {
    if (!this.bus.redis || this.#timer) return;
    this.#lastBeat = Date.now();
    void this.#heartbeat();
    this.#timer = setInterval(() => void this.#heartbeat(), HEARTBEAT_MS);
    this.#timer.unref();
  }

  /** A player on this node set their presence (or connected: the default status). */
  set(playerId: string, presence: Presence): void {
    const at = Date.now();
    this.#apply(this.bus.nodeId, playerId, { presence, at });
    this.bus.redis?.hset(this.#hashKey(this.bus.nodeId), playerId, JSON.stringify({ v: presence, a: at })).catch(() => {});
    this.bus.publish('presence', { p: playerId, v: presence, a: at } satisfies PresenceMessage);
  }

  /** The player's last socket on this node closed. */
  clear(playerId: string): void {
    this.#apply(this.bus.nodeId, playerId, null);
    this.bus.redis?.hdel(this.#hashKey(this.bus.nodeId), playerId).catch(() => {});
    this.bus.publish('presence', { p: playerId, v: null, a: Date.now() } satisfies PresenceMessage);
  }

  /** The newest presence the player set on any live node, or null when they hold no socket anywhere. */
  get(playerId: string): Presence | null {
    const held = this.#players.get(playerId);
    if (!(held instanceof Map)) return held?.presence ?? null;
    let best: Entry | null = null;
    for (const entry of held.values()) if (!best || entry.at > best.at) best = entry;
    return best?.presence ?? null;
  }

  isOnline(playerId: string): boolean {
    return this.#players.has(playerId);
  }

  /** Whether a heartbeat reached Redis within the last `ms`: a link that looks open but answers nothing (a hung Redis) is cut too. */
  heardWithin(ms: number): boolean {
    return Date.now() - this.#lastBeat <= ms;
  }

  /** Distinct players online anywhere; throws when this node has lost touch with the fleet for longer than a node lives. */
  count(): number {
    if (this.bus.redis && Date.now() - this.#lastBeat > NODE_TTL_MS) throw new Error('presence unavailable: no heartbeat reached Redis lately');
    return this.#players.size;
  }

  /** Shutdown: stop beating and say goodbye, so the others stop counting this node's players at once. */
  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    const redis = this.bus.redis;
    if (!redis) return;
    this.bus.publish('node_gone', {});
    await redis
      .multi()
      .del(this.#nodeKey(this.bus.nodeId), this.#hashKey(this.bus.nodeId))
      .srem(`${this.bus.prefix}nodes`, this.bus.nodeId)
      .exec()
      .catch(() => {});
  }

  /** Where a node's heartbeat key lives: this, then the node's id (the directory checks one in a script). */
  get beatPrefix(): string {
    return `${this.bus.prefix}node:`;
  }

  #nodeKey(node: string): string {
    return `${this.beatPrefix}${node}`;
  }

  #hashKey(node: string): string {
    return `${this.bus.prefix}presence:${node}`;
  }

  #apply(node: string, playerId: string, entry: Entry | null): void {
    if (entry === null) {
      if (this.#drop(node, playerId)) this.#byNode.get(node)?.delete(playerId);
      return;
    }
    const all = this.#players.get(playerId);
    const held = this.#held(playerId, node);
    if (held && held.at > entry.at) return;
    const next: Held = { node, presence: entry.presence, at: entry.at };
    if (all instanceof Map) all.set(node, next);
    else if (all === undefined || all === held) this.#players.set(playerId, next);
    else this.#players.set(playerId, new Map([[all.node, all], [node, next]]));
    let players = this.#byNode.get(node);
    if (!players) this.#byNode.set(node, (players = new Set()));
    players.add(playerId);
  }

  #held(playerId: string, node: string): Held | undefined {
    const all = this.#players.get(playerId);
    return all instanceof Map ? all.get(node) : all?.node === node ? all : undefined;
  }

  /** Drops the player's entry from a node; whether there was one. */
  #drop(node: string, playerId: string): boolean {
    const all = this.#players.get(playerId);
    if (all instanceof Map) {
      if (!all.delete(node)) return false;
      if (all.size === 1) this.#players.set(playerId, all.values().next().value!);
      return true;
    }
    if (all?.node !== node) return false;
    this.#players.delete(playerId);
    return true;
  }

  /** Drops every entry of a node that left or died; answers the players now online nowhere. */
  #forget(node: string): string[] {
    this.#known.delete(node);
    const players = this.#byNode.get(node);
    this.#byNode.delete(node);
    const gone: string[] = [];
    for (const playerId of players ?? []) if (this.#drop(node, playerId) && !this.#players.has(playerId)) gone.push(playerId);
    return gone;
  }

  /** The nodes alive at the last heartbeat (read without a round trip), this one included. */
  alive(): ReadonlySet<string> {
    return this.#alive;
  }

  /** Alive nodes now: the ones whose heartbeat key has not expired. Also the directory asks. */
  async aliveNodes(): Promise<Set<string>> {
    return (await this.#census()).alive;
  }

  /** The nodes on record, split by whether their heartbeat key is still there. */
  async #census(): Promise<{ alive: Set<string>; dead: string[] }> {
    const redis = this.bus.redis;
    if (!redis) return { alive: new Set([this.bus.nodeId]), dead: [] };
    const members = await redis.smembers(`${this.bus.prefix}nodes`);
    if (members.length === 0) return { alive: new Set(), dead: [] };
    const beats = await redis.mget(members.map((m) => this.#nodeKey(m)));
    return { alive: new Set(members.filter((_, i) => beats[i] !== null)), dead: members.filter((_, i) => beats[i] === null) };
  }

  async #heartbeat(): Promise<void> {
    const redis = this.bus.redis;
    if (!redis || this.#beating) return;
    this.#beating = true;
    try {
      const me = this.bus.nodeId;
      const results = await redis
        .multi()
        .set(this.#nodeKey(me), '1', 'PX', NODE_TTL_MS)
        .pexpire(this.#hashKey(me), NODE_TTL_MS)
        .sadd(`${this.bus.prefix}nodes`, me)
        .exec();
      // The hash lapsed (this node stalled past its TTL, or Redis restarted empty): write it again.
      const kept = results?.[1]?.[1];
      const mine = this.#byNode.get(me);
      if (kept === 0 && mine && mine.size > 0) {
        const fields: string[] = [];
        for (const playerId of mine) {
          const entry = this.#held(playerId, me);
          if (entry) fields.push(playerId, JSON.stringify({ v: entry.presence, a: entry.at }));
        }
        await redis.multi().hset(this.#hashKey(me), ...fields).pexpire(this.#hashKey(me), NODE_TTL_MS).exec();
        this.bus.publish('presence_reset', {});
      }
      this.#lastBeat = Date.now();
      const { alive, dead } = await this.#census();
      alive.add(me);
      this.#alive = alive;
      // The first live node by id speaks for the fleet, so friends hear "offline" once.
      const speaks = [...alive].sort()[0] === me;
      for (const node of new Set([...this.#byNode.keys(), ...this.#known])) {
        if (node !== me && !alive.has(node)) {
          const gone = this.#forget(node);
          this.log.warn('fleet_node_lost', { node, players: gone.length });
          if (speaks && gone.length > 0) this.onLost?.(gone);
        }
      }
      if (dead.length > 0) await redis.srem(`${this.bus.prefix}nodes`, ...dead);
      for (const node of alive) if (node !== me && !this.#known.has(node)) await this.#read(node);
    } catch (err) {
      this.log.warn('fleet_heartbeat_failed', { error: (err as Error).message });
    } finally {
      this.#beating = false;
    }
  }

  /** Takes a node's entries from its hash; an entry a message already brought newer wins. */
  async #read(node: string): Promise<void> {
    const hash = await this.bus.redis!.hgetall(this.#hashKey(node));
    for (const [playerId, text] of Object.entries(hash)) {
      try {
        const stored = JSON.parse(text) as { v: Presence; a: number };
        this.#apply(node, playerId, { presence: stored.v, at: stored.a });
      } catch {
        // A field this version cannot read is left for its writer to replace.
      }
    }
    this.#known.add(node);
  }
}
