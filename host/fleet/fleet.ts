import type { Principal, TokenResolver } from '../../runtime/contracts/context';
import type { ServerFrame } from '../../runtime/contracts/frame-envelope';
import type { ChatPush } from '../../runtime/contracts/live';
import type { Logger } from '../../runtime/platform/log';
import { tokenHash, type TokenCache } from '../infra/token-cache';
import type { SessionRegistry } from '../realtime/sessions';
import { defaultNodeId, LocalBus, RedisBus, type Bus } from './bus';
import { FleetPresence } from './fleet-presence';
import { FleetDirectory, type DirectorySources } from './directory';
import type { Gateway } from '../realtime/gateway';
import { FleetLeaderboards } from './leaderboards';
import { endedSessions, type HeldSession } from '../../runtime/accounts/tokens';
import type { Db } from '../../runtime/platform/database';
import type { NodeLeaderboards } from '../../runtime/contracts/services';
import type { ProfileCache } from '../../runtime/players/profile-cache';

/** Where the fleet's Redis is: `REDIS_URL`, `REDIS_PREFIX`, `SVC_NODE_ID`. */
export interface FleetOptions {
  url: string;
  prefix?: string;
  nodeId?: string;
  /** How long boot waits for Redis; 10 s unless a test says otherwise. */
  waitMs?: number;
}

/**
 * While this node is cut off from the bus (decision 0050), no cached token
 * answer older than this is believed: a revocation made anywhere is refused
 * here within this bound plus one database read.
 */
export const CUT_OFF_TRUST_MS = 1000;
/** While cut off, how often the sessions behind this node's sockets are read again from the database. */
export const CUT_OFF_CHECK_MS = 1000;
/** A link whose heartbeat has not answered for this long counts as cut, however open it looks (a hung Redis). */
const SILENT_LINK_MS = 1500;
/** How often the node looks at its link. */
const WATCH_MS = 250;
/** Sessions per statement of a check: two bind parameters each, well under PostgreSQL's 65,535. */
const CHECK_BATCH = 10_000;

/** Where revocations are the truth: the database, and the clock token expiries are compared with. */
export interface RevocationTruth {
  db: Db;
  now(): number;
}

/** The chat host as the fleet reaches it (host/realtime/chat.ts). */
export interface FleetChat {
  relay: ((message: ChatPush) => void) | null;
  deliverHere(message: ChatPush): void;
}

/**
 * What one node owes the others (docs/decisions/0041): revocations (token
 * cache entries and sockets), pushes to players wherever their sockets are,
 * chat messages in one order for every member, and presence. Everything goes
 * over the bus, but what this node can do itself (its own sockets, its own
 * cache) it does first, in the call; on a node without Redis the bus is this
 * process, and every call does what it did before the fleet existed.
 */
export class Fleet {
  readonly presence: FleetPresence;
  #directory: FleetDirectory | null = null;
  #sessions: SessionRegistry | null = null;
  #cache: TokenCache | null = null;
  #truth: RevocationTruth | null = null;
  #watch: ReturnType<typeof setInterval> | null = null;
  #cutOff = false;
  #lastCheck = 0;
  #checking = false;
  /** A check was asked for while one ran: it may have read the database before what it must see. */
  #checkAgain = false;

  constructor(
    readonly bus: Bus,
    private readonly log: Logger,
  ) {
    this.presence = new FleetPresence(bus, log);
    // Revocations are applied where they happen before they are published; the others apply them on arrival.
    bus.on('evict', (m: { h?: string[]; p?: string[] }, from) => {
      if (from === bus.nodeId) return;
      for (const h of m.h ?? []) this.#cache?.evictHash(h);
      for (const p of m.p ?? []) this.#cache?.evictPlayer(p);
    });
    bus.on('close', (m: { p?: string[]; t?: string[] }, from) => {
      if (from === bus.nodeId || !this.#sessions) return;
      for (const p of m.p ?? []) this.#sessions.disconnect(p);
      if (m.t) this.#sessions.disconnectTokens(m.t);
    });
    bus.on('push', (m: { p: string[]; t: string; y: string; f?: 1 }, from) => {
      const sessions = this.#sessions;
      // The publishing node handed the frame to its own sockets in `push`, unless it asked for the fleet's order (`f`).
      if ((from === bus.nodeId && !m.f) || !sessions) return;
      const sent = sessions.metrics.frameOut(m.y);
      for (const p of m.p) sessions.pushText(p, m.t, sent);
    });
  }

  /** Joins the fleet named by `options`, or stands alone without them. A Redis that cannot be reached refuses the boot. */
  static async open(options: FleetOptions | null, log: Logger): Promise<Fleet> {
    const nodeId = options?.nodeId ?? defaultNodeId();
    if (!options) return new Fleet(new LocalBus(nodeId, log), log);
    const bus = await RedisBus.open(options.url, { nodeId, prefix: options.prefix ?? 'svc:', log, ...(options.waitMs ? { waitMs: options.waitMs } : {}) });
    return new Fleet(bus, log);
  }

  get clustered(): boolean {
    return this.bus.redis !== null;
  }

  /**
   * `ctx.auth` over this node's token cache: evictions reach every node's
   * cache, and while the bus is cut the cache and the sockets answer to the
   * database instead (decision 0050).
   */
  tokens(cache: TokenCache, truth: RevocationTruth): TokenResolver {
    this.#cache = cache;
    this.#truth = truth;
    const bus = this.bus;
    return {
      resolve: (accessToken: string, beforeLookup?: () => void): Principal | null | Promise<Principal | null> => cache.resolve(accessToken, beforeLookup),
      async evictToken(accessToken: string): Promise<void> {
        await cache.evictToken(accessToken);
        // The hash, never the token, leaves the process.
        if (bus.redis) bus.publish('evict', { h: [tokenHash(accessToken)] });
      },
      evictPlayer(playerId: string): void {
        cache.evictPlayer(playerId);
        if (bus.redis) bus.publish('evict', { p: [playerId] });
      },
    };
  }

  /** Public profiles: a change made through any node evicts every node's copy. */
  shareProfiles(cache: ProfileCache): ProfileCache {
    if (!this.clustered) return cache;
    cache.onEvict = (playerId) => this.bus.publish('profile', { p: playerId });
    this.bus.on('profile', (m: { p: string }, from) => {
      if (from !== this.bus.nodeId) cache.evictHere(m.p);
    });
    return cache;
  }

  /** The node's sockets, chat, matches and worlds, once the real-time host built them. */
  attach(live: { sessions: SessionRegistry; chat: FleetChat; gateway: Gateway; hosted: DirectorySources }): void {
    const { sessions, chat } = live;
    this.#sessions = sessions;
    sessions.reach = (playerId, frame) => this.push([playerId], frame);
    if (this.clustered) {
      this.bus.on('chat', (m: ChatPush) => chat.deliverHere(m));
      // Every node, this one included, hands a message out when the bus brings it: one order for all members.
      // Unlike `push`, not delivered here first: members on two nodes would then see two senders' messages in
      // different orders, and the nodes' channel buffers would disagree; the price is a round trip for local members.
      chat.relay = (message) => this.bus.publish('chat', message);
    }
    this.presence.start();
    this.#directory = new FleetDirectory(this.bus, this.presence, live.hosted, this.log);
    this.#directory.attach(live.gateway);
    this.#directory.start();
    if (this.clustered) {
      this.bus.onRelink(() => this.#relinked());
      this.#watch = setInterval(() => this.#look(), WATCH_MS);
      this.#watch.unref();
    }
  }

  /** Whether this node may miss what the bus carries: its link is down, or says nothing. */
  get cutOff(): boolean {
    return this.#cutOff;
  }

  #look(): void {
    const cut = !this.bus.connected() || !this.presence.heardWithin(SILENT_LINK_MS);
    if (cut !== this.#cutOff) {
      this.#cutOff = cut;
      this.#cache?.trustFor(cut ? CUT_OFF_TRUST_MS : null);
      if (cut) this.log.warn('fleet_link_cut', { node: this.bus.nodeId, trust_ms: CUT_OFF_TRUST_MS, check_ms: CUT_OFF_CHECK_MS });
    }
    if (cut && Date.now() - this.#lastCheck >= CUT_OFF_CHECK_MS) void this.#check();
  }

  /** Back on the bus: what it carried meanwhile was lost here, so nothing cached before now is believed, and every socket is checked once. */
  #relinked(): void {
    this.#cache?.evictAll();
    this.log.info('fleet_relinked', { node: this.bus.nodeId });
    void this.#check();
  }

  /** Closes the sockets whose session was ended since they connected, read from the database in one statement per pass. */
  async #check(): Promise<void> {
    const sessions = this.#sessions;
    const truth = this.#truth;
    if (!sessions || !truth) return;
    if (this.#checking) {
      this.#checkAgain = true;
      return;
    }
    this.#checking = true;
    this.#lastCheck = Date.now();
    try {
      const held: HeldSession[] = [];
      for (const s of sessions.sessions()) {
        if (s.playerId !== null && s.tokenId !== null) held.push({ playerId: s.playerId, tokenId: s.tokenId, expiresAt: s.tokenExpiresAt });
      }
      const ended: string[] = [];
      for (let i = 0; i < held.length; i += CHECK_BATCH) ended.push(...(await endedSessions(truth.db, held.slice(i, i + CHECK_BATCH), truth.now())));
      if (ended.length > 0) {
        sessions.disconnectTokens(ended);
        this.log.warn('fleet_sessions_ended_unheard', { sessions: ended.length });
      }
    } catch (err) {
      this.log.warn('fleet_session_check_failed', { error: (err as Error).message });
    } finally {
      this.#checking = false;
      if (this.#checkAgain) {
        this.#checkAgain = false;
        void this.#check();
      }
    }
  }

  /** Keeps this node's boards the same as every other node's (host/fleet/leaderboards.ts). */
  serveLeaderboards(boards: NodeLeaderboards): FleetLeaderboards {
    return new FleetLeaderboards(this.bus, boards, this.presence, this.log);
  }

  /**
   * A frame to these players' sockets on every node. Returns the sockets this
   * node reached at once (a fleet reaches the rest later). `order: 'fleet'`
   * is for frames where the last one wins (presence): a clustered node then
   * delivers to its own sockets only when the frame comes back over the bus,
   * so every socket sees two nodes' frames in the bus's one order.
   */
  push(players: readonly string[], frame: ServerFrame, order: 'here-first' | 'fleet' = 'here-first'): number {
    const sessions = this.#sessions;
    if (!sessions) return 0;
    const text = JSON.stringify(frame);
    if (order === 'fleet' && this.clustered) {
      this.bus.publish('push', { p: players, t: text, y: frame.type, f: 1 });
      return 0;
    }
    const sent = sessions.metrics.frameOut(frame.type);
    const before = sent.n;
    // This node's sockets get the frame now, so it keeps its place among the
    // frames written straight to them (a game.send before its tick's
    // match.state). Every player is still published, those reached here
    // included: a player may hold sockets on several nodes (decision 0004) and
    // the presence copy of who is where lags, so only the node holding a socket
    // knows. Each socket lives on one node and the publisher skips its own
    // message, so each socket gets the frame exactly once.
    for (const p of players) sessions.pushText(p, text, sent);
    if (this.clustered) this.bus.publish('push', { p: players, t: text, y: frame.type });
    return sent.n - before;
  }

  /** Closes the player's sockets on every node. */
  disconnect(playerId: string): void {
    this.#sessions?.disconnect(playerId);
    if (this.clustered) this.bus.publish('close', { p: [playerId] });
  }

  /** Closes the sockets opened with these access tokens, on every node. */
  disconnectTokens(tokenIds: readonly string[]): void {
    if (tokenIds.length === 0) return;
    this.#sessions?.disconnectTokens(tokenIds);
    if (this.clustered) this.bus.publish('close', { t: tokenIds });
  }

  async close(): Promise<void> {
    if (this.#watch) clearInterval(this.#watch);
    this.#watch = null;
    await this.#directory?.close();
    await this.presence.close();
    await this.bus.close();
  }
}
