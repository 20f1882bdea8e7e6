import type { Ctx } from '../../../runtime/contracts/context';
import { FrameError } from '../../../runtime/contracts/frame-envelope';
import { isLimitKind, type JoinResult, type JsonObject, type ModeInfo } from '../../../runtime/lua/host-interface';
import { recordFinishedMatch } from '../../../runtime/matches/matches';
import type { LiveWorlds } from '../../../runtime/contracts/live';
import { forgetWorld, loadPersistentWorlds, rememberWorld, saveSnapshot, type ZoneSnapshot } from '../../../runtime/worlds/worlds';
import {
  inputSeq,
  type worldCreate,
  type worldFindOrCreate,
  type worldInput,
  type worldJoin,
  type worldLeave,
  type worldList,
  type worldResync,
  type WorldJoined,
  type WorldListFilter,
  type WorldListing,
  type WorldStatus,
} from '../../../runtime/schemas/worlds';
import type { GameHandle } from '../../game-directory';
import type { ScriptPool } from '../lanes/pool';
import type { CreateAnswer, EventOf, WorldJoinAnswer } from '../lanes/protocol';
import type { TickWheel, WheelPlace } from '../lanes/tick-wheel';
import type { MatchVotes, VotingMatch } from '../votes';
import type { FrameHandler, Reply } from '../gateway';
import type { ChatHost } from '../chat';
import { SharedFrame, type Session, type SessionRegistry } from '../sessions';
import type { Tally } from '../../metrics/registry';
import { emptySplit, type TickSplit } from './world-run';
import type { DatagramPlane } from '../datagram/plane';
import { stripeId, worldOfStripe } from './zone-stripes';

/** A finished world answers `not_in_match` this long, then is gone. */
const FINISHED_LINGER_MS = 5000;
/** Listings are rebuilt at most this often. */
const LIST_CACHE_MS = 500;
/** Unless `world_lanes` says otherwise, a world's stripes are at least this many columns wide. */
const MIN_STRIPE_COLUMNS = 4;

const LOST_JOIN: JoinResult = { ok: false, refused: false, kind: 'error', message: 'worker_lost' };

interface LiveWorld {
  id: string;
  mode: ModeInfo;
  status: WorldStatus;
  ownerId: string | null;
  /** Settles once the world VM ran `init` (rejects with `world_server_not_started`). */
  ready: Promise<void>;
  /** Players in the world, connected or inside their `player_ttl_ms`. */
  roster: Set<string>;
  everJoined: Set<string>;
  /** Joins sent to the lane and not answered yet (they hold a place against `max_players`). */
  joining: Map<string, Promise<WorldJoined>>;
  /** Players whose sockets all closed, until their `player_ttl_ms` runs out. */
  detached: Map<string, ReturnType<typeof setTimeout> | null>;
  startedAt: number | null;
  phase: JsonObject | null;
  /** Its place on the lanes' tick wheel while it runs, at the mode's `tick_rate`. */
  place: WheelPlace | null;
  graceTimer: ReturnType<typeof setTimeout> | null;
  /** The zone each player stands in, and the chat channels that follow from it. */
  zones: Map<string, [number, number]>;
  /** A joiner's frames (its keyframes first), held until its `world.joined` has gone out (#releaseHeld). */
  held: Map<string, [SharedFrame, Tally][]>;
  /** Lanes its zones run on (decision 0067): the home lane and stripes 1… on the others. */
  stripes: number;
}

export interface WorldTickStats {
  /** Milliseconds each world tick's script steps took on its lane. */
  busy: number[];
  late: number[];
  skipped: number;
  /** Bytes of every zone delta made: what one player watching the whole world would have received. */
  deltaBytes: number;
  /** Milliseconds by part, summed over the ticks in `busy` (lane work), and the main thread's writing of their frames. */
  split: TickSplit & { writes: number };
  /** Milliseconds each lane worked on those ticks, by stripe (the home lane first). */
  lanes: number[];
}

function emptyStats(): WorldTickStats {
  return { busy: [], late: [], skipped: 0, deltaBytes: 0, split: { ...emptySplit(), writes: 0 }, lanes: [] };
}

/**
 * Live worlds of this node: their `world.*` frames, their ticks (on the
 * lanes' one wheel, at each mode's `tick_rate`), who is in which world, and
 * persistence for persistent modes. The scripts run on the script lanes
 * (world-lane.ts, world-run.ts); this side writes the frames they produce.
 */
export class WorldHost implements LiveWorlds {
  readonly #worlds = new Map<string, LiveWorld>();
  readonly #byPlayer = new Map<string, LiveWorld>();
  readonly #owned = new Map<string, number>();
  readonly #lingering = new Set<ReturnType<typeof setTimeout>>();
  readonly #snapshotWaiters = new Map<string, () => void>();
  #snapshotTimer: ReturnType<typeof setInterval> | null = null;
  #listCache: { at: number; worlds: LiveWorld[] } | null = null;
  /** Serialises `find_or_create` so concurrent callers converge on one world. */
  #quickPlay: Promise<unknown> = Promise.resolve();
  #stats: WorldTickStats = emptyStats();
  #closed = false;
  /** The node's datagram plane (set once at start when the `datagrams` setting turns it on): zones' poses go out through it. */
  datagrams: DatagramPlane | null = null;

  constructor(
    private readonly ctx: Ctx,
    private readonly sessions: SessionRegistry,
    private readonly game: GameHandle,
    private readonly pool: ScriptPool,
    private readonly chat: ChatHost,
    /** The node's votes (host/realtime/votes.ts): a world's `_vote` opens one for its players. */
    private readonly votes: MatchVotes,
    /** The lanes' one clock, which matches tick on too (host/realtime/lanes/tick-wheel.ts). */
    private readonly wheel: TickWheel,
  ) {
    pool.subscribe('world', (e) => this.onLaneEvent(e));
    pool.onLost((ids) => this.onLanesLost(ids));
    sessions.onPlayerGone((playerId) => this.#gone(playerId));
    votes.worldOf = (playerId) => {
      const world = this.#byPlayer.get(playerId);
      return world ? this.#voting(world) : undefined;
    };
    this.#snapshotTimer = setInterval(() => this.#snapshotAll(), ctx.settings.world_snapshot_ms);
    this.#snapshotTimer.unref();
  }

  get size(): number {
    return this.#worlds.size;
  }

  /** Ids of the live worlds on this node (the fleet's directory publishes them). */
  liveIds(): IterableIterator<string> {
    return this.#worlds.keys();
  }

  /** Tick timings since the last call (the benchmark reads them). */
  takeStats(): WorldTickStats {
    const stats = this.#stats;
    this.#stats = emptyStats();
    return stats;
  }

  // ---- frames (the frame table, ../frame-table.ts, routes them here) ---------

  readonly listFrame: FrameHandler<typeof worldList> = (_s, filter) => ({ type: 'world.list', payload: { worlds: this.list(filter) } });
  readonly createFrame: FrameHandler<typeof worldCreate> = (s, { mode }) => this.#createFrame(s, mode);
  readonly findOrCreateFrame: FrameHandler<typeof worldFindOrCreate> = (s, p) => this.#findOrCreateFrame(s, p.mode, p.ctx);
  readonly joinFrame: FrameHandler<typeof worldJoin> = (s, p) => this.#joinFrame(s, p.world_id, p.ctx);
  readonly leaveFrame: FrameHandler<typeof worldLeave> = async (s) => {
    await this.leave(s.playerId!);
    return { type: 'world.left', payload: { success: true } };
  };
  readonly inputFrame: FrameHandler<typeof worldInput> = (s, input, frame) => this.#inputFrame(s, input, frame.seq);
  readonly resyncFrame: FrameHandler<typeof worldResync> = (s, zone) => this.#resyncFrame(s, zone);

  // ---- LiveWorlds -----------------------------------------------------------

  list(filter: Pick<WorldListFilter, 'mode' | 'has_capacity'>): WorldListing[] {
    const now = Date.now();
    if (!this.#listCache || now - this.#listCache.at >= LIST_CACHE_MS) {
      this.#listCache = { at: now, worlds: [...this.#worlds.values()].filter((w) => w.mode.listed && (w.status === 'loading' || w.status === 'running')) };
    }
    const out: WorldListing[] = [];
    for (const w of this.#listCache.worlds) {
      if (filter.mode !== undefined && w.mode.name !== filter.mode) continue;
      if (filter.has_capacity && w.roster.size >= w.mode.max_players) continue;
      out.push(this.#listing(w));
    }
    return out;
  }

  get(id: string): WorldListing | null {
    const w = this.#worlds.get(id.toLowerCase());
    return w ? this.#listing(w) : null;
  }

  async create(modeName: string | null, ownerId: string): Promise<WorldListing> {
    const world = await this.#create(modeName, ownerId);
    return this.#listing(world);
  }

  inWorld(playerId: string, worldId: string): boolean {
    const w = this.#byPlayer.get(playerId);
    return w !== undefined && w.id === worldId && w.status !== 'finished';
  }

  // ---- lifecycle --------------------------------------------------------------

  async #create(modeName: string | null, ownerId: string | null, known?: { id: string; seed: number; zones: ZoneSnapshot[] }): Promise<LiveWorld> {
    const mode = modeName === null ? undefined : this.game.info.modes.get(modeName);
    if (!mode) throw new FrameError('not_found');
    if (mode.kind !== 'world' || !mode.world) throw new FrameError('wrong_mode_type');
    if (this.#worlds.size >= this.ctx.settings.world_max) throw new FrameError('world_capacity_reached');
    if (ownerId !== null && (this.#owned.get(ownerId) ?? 0) >= this.ctx.settings.world_max_per_player) throw new FrameError('player_world_limit_reached');
    const id = known?.id ?? this.ctx.ids.uuid();
    const seed = known?.seed ?? Date.now();
    const world: LiveWorld = {
      id,
      mode,
      status: 'loading',
      ownerId,
      ready: Promise.resolve(),
      roster: new Set(),
      everJoined: new Set(),
      joining: new Map(),
      detached: new Map(),
      startedAt: null,
      phase: null,
      place: null,
      graceTimer: null,
      zones: new Map(),
      held: new Map(),
      stripes: 1,
    };
    // Counted from the start: concurrent creators see the caps, and joins wait on `ready`.
    this.#worlds.set(id, world);
    this.#listCache = null;
    if (ownerId !== null) this.#owned.set(ownerId, (this.#owned.get(ownerId) ?? 0) + 1);
    this.pool.assign(id);
    world.stripes = this.#placeStripes(id, mode);
    const recovery = known ? { zones: known.zones } : null;
    world.ready = this.pool.request<CreateAnswer>(id, { ok: false }, (req) => ({ kind: 'world', op: 'create', req, worldId: id, mode, seed, recovery, poses: this.datagrams?.manifest ?? null, stripes: world.stripes })).then(async (answer) => {
      if (!answer.ok) {
        this.#drop(world);
        this.#release(world);
        throw new FrameError('world_server_not_started');
      }
      if (world.status !== 'loading') return;
      world.status = 'running';
      world.startedAt = Date.now();
      this.#listCache = null;
      world.place = this.wheel.add({ period: mode.world!.tick_rate, tick: (due) => this.#tick(world, due), skipped: () => {} });
      this.ctx.log.info('world_created', { world_id: id, mode: mode.name, recovered: known !== undefined });
      if (mode.world!.persistent && !known) {
        await rememberWorld(this.ctx.db, { id, mode: mode.name, seed }).catch((err) => this.ctx.log.error('world_remember_failed', { world_id: id, error: err }));
      }
    });
    world.ready.catch(() => {});
    await world.ready;
    return world;
  }

  /**
   * Lanes for the world's stripes besides its home (decision 0067), each on a
   * lane of its own: as many as `world_lanes` asks, no more than the grid has
   * columns; unset, every lane but no stripe narrower than four columns (a
   * small world pays more for the rounds between lanes than it gains).
   */
  #placeStripes(id: string, mode: ModeInfo): number {
    if (this.pool.workers === 0) return 1;
    const columns = mode.world!.grid_size;
    const asked = this.ctx.settings.world_lanes ?? Math.max(1, Math.floor(columns / MIN_STRIPE_COLUMNS));
    const wanted = Math.min(asked, this.pool.lanes, columns);
    const placed = [id];
    for (let s = 1; s < wanted; s++) {
      const stripe = stripeId(id, s);
      if (!this.pool.assignApart(stripe, placed)) break;
      // The world's two lanes talk over a channel of their own, not through this thread.
      if (!this.pool.link(id, stripe, (port) => ({ kind: 'world', op: 'stripe_link', worldId: id, stripe: s, port }))) {
        this.pool.release(stripe, { kind: 'world', op: 'stripe', worldId: id, stripe: s, msg: { t: 'close' } });
        break;
      }
      placed.push(stripe);
    }
    return placed.length;
  }

  /** Brings back every persistent world a previous run of this node left (the host calls it once the database answers). */
  async recover(): Promise<void> {
    const worlds = await loadPersistentWorlds(this.ctx.db);
    for (const w of worlds) {
      const mode = this.game.info.modes.get(w.mode);
      if (!mode || mode.kind !== 'world' || !mode.world?.persistent) {
        this.ctx.log.warn('world_not_recovered', { world_id: w.id, mode: w.mode, reason: 'the mode is gone or no longer a persistent world' });
        continue;
      }
      if (this.#worlds.has(w.id)) continue;
      await this.#create(w.mode, null, w).catch((err) => this.ctx.log.error('world_recovery_failed', { world_id: w.id, error: err instanceof Error ? err.message : String(err) }));
    }
  }

  /** A world's tick on the wheel: its lane runs it or skips it (world-lane.ts decides, knowing when the world was busy). */
  #tick(world: LiveWorld, due: number): void {
    if (world.status !== 'running') return;
    // Goes out after the wheel's slot with the inputs queued before it.
    this.pool.queue(world.id, { kind: 'world', op: 'tick', worldId: world.id, due });
  }

  async #joinInto(world: LiveWorld, playerId: string, ctx: JsonObject): Promise<WorldJoined> {
    await world.ready;
    if (world.status === 'finished') throw new FrameError('not_in_match');
    const other = this.#byPlayer.get(playerId);
    if (other && other !== world && other.status !== 'finished') throw new FrameError('already_in_world');
    const pending = world.joining.get(playerId);
    if (pending) return pending;
    if (world.roster.has(playerId) && !world.detached.has(playerId)) return this.#joined(world);
    if (!world.roster.has(playerId) && world.roster.size + world.joining.size >= world.mode.max_players) throw new FrameError('world_full');
    const held: [SharedFrame, Tally][] = [];
    world.held.set(playerId, held);
    const joined = this.#join(world, playerId, ctx);
    world.joining.set(playerId, joined);
    try {
      return await joined;
    } finally {
      world.joining.delete(playerId);
      // The gateway writes the reply in a microtask once this settles; what the lane sent meanwhile follows it.
      setImmediate(() => this.#releaseHeld(world, playerId, held));
    }
  }

  /** Sends a joiner's held frames after its reply, in their order; a join that did not land drops them. */
  #releaseHeld(world: LiveWorld, playerId: string, held: [SharedFrame, Tally][]): void {
    if (world.held.get(playerId) !== held) return;
    world.held.delete(playerId);
    if (this.#byPlayer.get(playerId) !== world || world.detached.has(playerId)) return;
    for (const [frame, sent] of held) this.sessions.pushShared(playerId, frame, sent);
  }

  /** One frame to one player of the world, behind the frames held for its join if it is joining. */
  #deliver(world: LiveWorld, playerId: string, frame: SharedFrame, sent: Tally): void {
    const held = world.held.get(playerId);
    if (held) held.push([frame, sent]);
    else this.sessions.pushShared(playerId, frame, sent);
  }

  async #join(world: LiveWorld, playerId: string, ctx: JsonObject): Promise<WorldJoined> {
    const r = await this.pool.request<WorldJoinAnswer>(world.id, LOST_JOIN, (req) => ({ kind: 'world', op: 'join', req, worldId: world.id, playerId, ctx, binary: this.sessions.onBinaryWire(playerId) }));
    if (world.status === 'finished') throw new FrameError('not_in_match');
    if (!r.ok) {
      if (r.refused) throw new FrameError('join_refused', { details: r.reason ? { refused_reason: r.reason } : {} });
      if (r.message === 'zone_unavailable') throw new FrameError('zone_unavailable');
      if (isLimitKind(r.kind)) throw new FrameError('timeout');
      throw new FrameError('internal');
    }
    const ttl = world.detached.get(playerId);
    if (ttl) clearTimeout(ttl);
    world.detached.delete(playerId);
    if (world.graceTimer) clearTimeout(world.graceTimer);
    world.graceTimer = null;
    world.roster.add(playerId);
    world.everJoined.add(playerId);
    this.#byPlayer.set(playerId, world);
    if (r.zone) this.#moved(world, playerId, r.zone);
    // The last socket may have closed while the lane ran `join`: its goodbye found no world then,
    // so it is said now, or the player would hold a place (and an entity) for good.
    if (!this.sessions.has(playerId)) this.#gone(playerId);
    return this.#joined(world);
  }

  /** Leaves the player's world: its entity goes, and the zones it watched send their removals first. */
  async leave(playerId: string): Promise<void> {
    const world = this.#byPlayer.get(playerId);
    if (!world) return;
    this.#byPlayer.delete(playerId);
    if (world.status === 'finished') return;
    const ttl = world.detached.get(playerId);
    if (ttl) clearTimeout(ttl);
    world.detached.delete(playerId);
    world.roster.delete(playerId);
    world.zones.delete(playerId);
    this.chat.setFollowed(playerId, []);
    await this.#leaveLane(world.id, playerId, false);
    if (world.roster.size === 0 && world.joining.size === 0) this.#emptied(world);
  }

  /** The player's last socket closed: out now, or after `player_ttl_ms` unless it joins again. */
  #gone(playerId: string): void {
    const world = this.#byPlayer.get(playerId);
    if (!world || world.status === 'finished') return;
    const ttl = world.mode.world!.player_ttl_ms;
    if (ttl === 0) return void this.leave(playerId);
    void this.#leaveLane(world.id, playerId, true);
    this.chat.setFollowed(playerId, []);
    const timer = ttl < 0 ? null : setTimeout(() => void this.leave(playerId), ttl);
    timer?.unref();
    world.detached.set(playerId, timer);
  }

  /** Nobody is left: a persistent world stays; others end now, or after their grace unless someone joins. */
  #emptied(world: LiveWorld): void {
    const settings = world.mode.world!;
    if (settings.persistent || world.status !== 'running') return;
    if (settings.empty_grace_ms === 0) return this.#finish(world, { status: 'empty' });
    if (world.graceTimer) return;
    world.graceTimer = setTimeout(() => {
      world.graceTimer = null;
      if (world.roster.size === 0 && world.joining.size === 0) this.#finish(world, { status: 'empty_grace_expired' });
    }, settings.empty_grace_ms);
    world.graceTimer.unref();
  }

  #finish(world: LiveWorld, result: JsonObject): void {
    if (world.status === 'finished') return;
    const wasRunning = world.status === 'running';
    world.status = 'finished';
    this.#listCache = null;
    world.place?.remove();
    if (world.graceTimer) clearTimeout(world.graceTimer);
    for (const t of world.detached.values()) if (t) clearTimeout(t);
    this.#release(world);
    this.votes.end(this.#voting(world));
    this.#unown(world);
    this.#toRoster(world, JSON.stringify({ type: 'world.finished', payload: { world_id: world.id, result } }));
    for (const playerId of world.roster) {
      if (this.#byPlayer.get(playerId) === world) this.#byPlayer.delete(playerId);
      this.chat.setFollowed(playerId, []);
    }
    this.ctx.log.info('world_finished', { world_id: world.id, mode: world.mode.name, players: world.roster.size, status: result.status ?? null });
    if (wasRunning) {
      recordFinishedMatch(this.ctx.db, {
        id: world.id,
        mode: world.mode.name,
        status: 'finished',
        players: [...world.everJoined],
        result,
        startedAt: world.startedAt === null ? null : new Date(world.startedAt),
        finishedAt: new Date(this.ctx.clock.now()),
      }).catch((err) => this.ctx.log.error('world_record_failed', { world_id: world.id, error: err }));
    }
    if (world.mode.world!.persistent) void forgetWorld(this.ctx.db, world.id).catch((err) => this.ctx.log.error('world_forget_failed', { world_id: world.id, error: err }));
    const t = setTimeout(() => {
      this.#lingering.delete(t);
      this.#worlds.delete(world.id);
    }, FINISHED_LINGER_MS);
    t.unref();
    this.#lingering.add(t);
  }

  /** A world that never started: gone without a trace. */
  #drop(world: LiveWorld): void {
    world.status = 'finished';
    this.#worlds.delete(world.id);
    this.#listCache = null;
    this.#unown(world);
  }

  #unown(world: LiveWorld): void {
    if (world.ownerId === null) return;
    const n = (this.#owned.get(world.ownerId) ?? 1) - 1;
    if (n <= 0) this.#owned.delete(world.ownerId);
    else this.#owned.set(world.ownerId, n);
    world.ownerId = null;
  }

  // ---- lane events --------------------------------------------------------------

  onLaneEvent(e: EventOf<'world'>): void {
    const world = this.#worlds.get(e.worldId);
    if (e.k === 'snapshot') {
      this.#snapshotWaiters.get(e.worldId)?.();
      void this.#saveSnapshot(e.worldId, e.zones);
      return;
    }
    if (!world || world.status === 'finished') return;
    switch (e.k) {
      case 'step': {
        if (e.tick) {
          const lanes = this.#stats.lanes;
          e.tick.lanes.forEach((ms, s) => (lanes[s] = (lanes[s] ?? 0) + ms));
          this.#stats.busy.push(e.tick.busyMs);
          this.#stats.late.push(e.tick.lateMs);
          this.#stats.deltaBytes += e.tick.deltaBytes;
          const split = this.#stats.split;
          for (const part in e.tick.split) split[part as keyof TickSplit] += e.tick.split[part as keyof TickSplit];
        }
        const t0 = e.tick ? performance.now() : 0;
        if (e.phase) world.phase = e.phase;
        for (const [text, players, bytes] of e.out.sends) {
          if (players === null) this.#toRoster(world, text);
          else {
            const sent = this.sessions.metrics.frameOutOf(text);
            // Framed once for all its players, in each wire's form on first use.
            const frame = new SharedFrame(text, bytes ?? null);
            // A joiner's keyframes are held until its join is answered (#releaseHeld).
            for (const p of players) if (this.#byPlayer.get(p) === world || world.joining.has(p)) this.#deliver(world, p, frame, sent);
          }
        }
        for (const [p, x, y] of e.out.moved) this.#moved(world, p, [x, y]);
        if (this.datagrams) {
          for (const [players, bodies] of e.out.poses) this.datagrams.sendPoses(players, bodies);
          if (e.out.saturated > 0) this.datagrams.noteSaturated(e.out.saturated);
        }
        if (e.tick) this.#stats.split.writes += performance.now() - t0;
        return;
      }
      case 'skipped':
        this.#stats.skipped += e.n ?? 1;
        return;
      case 'finished':
        return this.#finish(world, e.result);
      case 'vote':
        if (world.status === 'running') this.votes.open(this.#voting(world), e.config);
        return;
    }
  }

  /** A script worker died: its worlds end in error, and their players are told. */
  onLanesLost(ids: string[]): void {
    for (const id of ids) {
      // A stripe's lane is as much the world's as its home: without its zones the world cannot go on.
      const world = this.#worlds.get(worldOfStripe(id) ?? id);
      if (world && world.status === 'running') this.#finish(world, { status: 'error', reason: 'worker_lost' });
    }
  }

  /** Settles once the lane has removed the player (its removal frames are out before the answer). */
  async #leaveLane(worldId: string, playerId: string, detach: boolean): Promise<void> {
    await this.pool.requestIfPlaced(worldId, { ok: false }, (req) => ({ kind: 'world', op: 'leave', req, worldId, playerId, detach }));
  }

  /** The world is over on the main thread: its VMs go too, on every lane. */
  #release({ id: worldId, stripes }: LiveWorld): void {
    this.pool.release(worldId, { kind: 'world', op: 'close', worldId });
    for (let s = 1; s < stripes; s++) this.pool.release(stripeId(worldId, s), { kind: 'world', op: 'stripe', worldId, stripe: s, msg: { t: 'close' } });
  }

  // ---- frames -------------------------------------------------------------------

  async #createFrame(session: Session, mode: string): Promise<Reply> {
    const playerId = session.playerId!;
    const world = await this.#create(mode, playerId);
    return { type: 'world.joined', payload: await this.#joinInto(world, playerId, {}) };
  }

  async #findOrCreateFrame(session: Session, modeName: string, ctx: JsonObject): Promise<Reply> {
    const playerId = session.playerId!;
    const mode = this.game.info.modes.get(modeName);
    if (!mode) throw new FrameError('not_found');
    if (mode.kind !== 'world') throw new FrameError('wrong_mode_type');
    if (!mode.quick_play) throw new FrameError('quick_play_disabled');
    const pick = this.#quickPlay.then(async () => {
      for (const w of this.#worlds.values()) {
        if (w.mode.name !== mode.name || (w.status !== 'loading' && w.status !== 'running')) continue;
        if (w.roster.has(playerId) || w.roster.size + w.joining.size < w.mode.max_players) return w;
      }
      return this.#create(mode.name, playerId);
    });
    this.#quickPlay = pick.catch(() => {});
    const world = await pick;
    return { type: 'world.joined', payload: await this.#joinInto(world, playerId, ctx) };
  }

  async #joinFrame(session: Session, worldId: string, ctx: JsonObject): Promise<Reply> {
    const playerId = session.playerId!;
    const world = this.#worlds.get(worldId.toLowerCase());
    // A lookup miss answers before the join bucket is touched; a finished world answers `not_in_match` until it is gone.
    if (!world) throw new FrameError('world_not_found');
    if (!this.ctx.limits.take('join', `p:${playerId}`).ok) throw new FrameError('join_rate_limited');
    return { type: 'world.joined', payload: await this.#joinInto(world, playerId, ctx) };
  }

  /**
   * A `world.input` that came another way than the player's socket (the
   * datagram plane): stamped and queued as the socket's, dropped without a
   * word when the player is in no running world here.
   */
  inputFrom(playerId: string, input: JsonObject, seq: number | null): void {
    this.#queueInput(playerId, input, seq);
  }

  #inputFrame(session: Session, input: JsonObject, seq: unknown): null {
    if (!this.#queueInput(session.playerId!, input, inputSeq(seq))) throw new FrameError('not_in_match', { frameType: 'world.input', echoCid: false });
    return null;
  }

  /** Queues the input for the player's running world; false when it is in none here. */
  #queueInput(playerId: string, input: JsonObject, seq: number | null): boolean {
    const world = this.#byPlayer.get(playerId);
    if (!world || world.status !== 'running') return false;
    this.pool.queue(world.id, { kind: 'world', op: 'input', worldId: world.id, playerId, input, seq });
    return true;
  }

  #resyncFrame(session: Session, zone: [number, number] | null): null {
    const playerId = session.playerId!;
    const world = this.#byPlayer.get(playerId);
    if (!zone || !world || world.status !== 'running') return null;
    if (!this.ctx.limits.take('resync', `p:${playerId}`).ok || !this.ctx.limits.take('resync_global', 'node').ok) return null;
    this.pool.soon(world.id, { kind: 'world', op: 'resync', worldId: world.id, playerId, x: zone[0], y: zone[1], binary: session.binaryWire });
    return null;
  }

  // ---- chat, persistence ------------------------------------------------------

  /** The player stands in a new zone: its `zone:` channel and the `prox:` channels of the zones it watches follow. */
  #moved(world: LiveWorld, playerId: string, [x, y]: [number, number]): void {
    world.zones.set(playerId, [x, y]);
    const r = world.mode.world!.view_radius;
    const n = world.mode.world!.grid_size;
    const channels = [`world:${world.id}`, `zone:${world.id}:${x},${y}`];
    for (let dx = -r; dx <= r; dx++) for (let dy = -r; dy <= r; dy++) if (x + dx >= 0 && y + dy >= 0 && x + dx < n && y + dy < n) channels.push(`prox:${world.id}:${x + dx},${y + dy}`);
    this.chat.setFollowed(playerId, channels);
  }

  #snapshotAll(): Promise<void>[] {
    const waits: Promise<void>[] = [];
    for (const w of this.#worlds.values()) {
      if (!w.mode.world!.persistent || w.status !== 'running') continue;
      waits.push(
        new Promise<void>((resolve) => {
          this.#snapshotWaiters.set(w.id, resolve);
          this.pool.soon(w.id, { kind: 'world', op: 'snapshot', worldId: w.id });
        }),
      );
    }
    return waits;
  }

  async #saveSnapshot(worldId: string, zones: ZoneSnapshot[]): Promise<void> {
    try {
      await saveSnapshot(this.ctx.db, this.ctx.ids, worldId, zones, new Date(this.ctx.clock.now()));
    } catch (err) {
      this.ctx.log.error('world_snapshot_failed', { world_id: worldId, error: err instanceof Error ? err.message : String(err) });
    } finally {
      this.#snapshotWaiters.delete(worldId);
    }
  }

  /** Shutdown: persistent worlds save once more (bounded), then every timer stops. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#snapshotTimer) clearInterval(this.#snapshotTimer);
    const saves = this.#snapshotAll();
    if (saves.length > 0) await Promise.race([Promise.all(saves), new Promise((r) => setTimeout(r, 2000).unref())]);
    for (const w of this.#worlds.values()) {
      w.place?.remove();
      if (w.graceTimer) clearTimeout(w.graceTimer);
      for (const t of w.detached.values()) if (t) clearTimeout(t);
    }
    for (const t of this.#lingering) clearTimeout(t);
  }

  // ---- shapes ---------------------------------------------------------------------

  /** A world as the votes see it: those attached are eligible and hear the pushes. */
  #voting(world: LiveWorld): VotingMatch {
    const attached = new Set([...world.roster].filter((p) => !world.detached.has(p)));
    return { id: world.id, status: world.status, roster: attached, mode: world.mode };
  }

  #toRoster(world: LiveWorld, text: string): void {
    const sent = this.sessions.metrics.frameOutOf(text);
    const frame = new SharedFrame(text);
    for (const playerId of world.roster) if (!world.detached.has(playerId)) this.#deliver(world, playerId, frame, sent);
  }

  #listing(w: LiveWorld): WorldListing {
    return {
      world_id: w.id,
      mode: w.mode.name,
      status: w.status,
      player_count: w.roster.size,
      max_players: w.mode.max_players,
      grid_size: w.mode.world!.grid_size,
      started_at: w.startedAt,
      ...(w.phase ? { phase: w.phase as WorldListing['phase'] } : {}),
    };
  }

  #joined(w: LiveWorld): WorldJoined {
    return { ...this.#listing(w), listed: w.mode.listed, quick_play: w.mode.quick_play, players: [...w.roster] };
  }
}
