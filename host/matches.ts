import type { Ctx } from '../runtime/context';
import { byteLength, checkJoinCtx, FrameError, isPlainObject, type ClientFrame } from '../runtime/frames';
import type { GameInfo, JsonObject, MatchRuntime, MatchServices, MatchVmOptions, ModeInfo, ScriptSource } from '../runtime/lua/api';
import { recordFinishedMatch, type LiveMatches, type LiveMatchFilter, type LiveMatchStatus, type MatchListing } from '../runtime/matches';
import { scriptSend } from './script-bindings';
import type { Session, SessionRegistry } from './sessions';
import type { Gateway, Reply } from './ws';

/** The match tick is fixed (spec part 1). */
export const TICK_MS = 100;
/** A match that never reaches `min_players` stops silently (wire-protocol 6). */
const WAITING_TIMEOUT_MS = 60_000;
/** A finished match lingers this long answering `not_in_match`, then is gone. */
const FINISHED_LINGER_MS = 5000;

/** The loaded game directory as the match host needs it; `info` may change on rescans. */
export interface GameHandle {
  readonly info: GameInfo;
  readonly source: ScriptSource;
}

export type VmFactory = (options: MatchVmOptions) => MatchRuntime;

interface LiveMatch {
  id: string;
  mode: ModeInfo;
  vm: MatchRuntime;
  status: LiveMatchStatus;
  /** Join order; the roster stays intact through the finished linger so broadcasts still arrive. */
  roster: Set<string>;
  /** Everyone ever admitted, for the finished record. */
  everJoined: Set<string>;
  joinable: boolean;
  startedAt: Date | null;
  slot: number;
  waitingTimer: ReturnType<typeof setTimeout> | null;
}

/** Outcome of one join, as `match.joined` reports it (wire-protocol 6.3). */
export type JoinedInfo = Record<string, unknown>;

export interface LatenessSummary {
  count: number;
  p50: number;
  p99: number;
  max: number;
}

/**
 * Tick lateness in whole-millisecond buckets (the clock's own resolution), so
 * every tick counts however long the node runs, in a few kilobytes.
 */
class LatenessHistogram {
  static readonly BUCKETS = 2001;
  readonly #counts = new Uint32Array(LatenessHistogram.BUCKETS);
  #count = 0;
  #max = 0;

  record(ms: number): void {
    const bucket = Math.min(LatenessHistogram.BUCKETS - 1, Math.max(0, Math.round(ms)));
    this.#counts[bucket]!++;
    this.#count++;
    if (ms > this.#max) this.#max = ms;
  }

  reset(): void {
    this.#counts.fill(0);
    this.#count = 0;
    this.#max = 0;
  }

  summary(): LatenessSummary {
    return { count: this.#count, p50: this.#quantile(0.5), p99: this.#quantile(0.99), max: this.#max };
  }

  /** The smallest bucket at or below which a share `q` of the ticks fall. */
  #quantile(q: number): number {
    if (this.#count === 0) return 0;
    const rank = Math.ceil(q * this.#count);
    let seen = 0;
    for (let ms = 0; ms < LatenessHistogram.BUCKETS; ms++) {
      seen += this.#counts[ms]!;
      if (seen >= rank) return ms;
    }
    return LatenessHistogram.BUCKETS - 1;
  }
}

/**
 * One shared timer wheel for every match: 100 slots of 1 ms make up the 100 ms
 * tick. A match lives in one slot and ticks when the wheel passes it, so a
 * thousand matches cost one timer, and new matches go to the emptiest slot so
 * the work spreads evenly over the period instead of piling up in one burst.
 */
class TickWheel<T> {
  static readonly SLOTS = 100;
  static readonly SLOT_MS = TICK_MS / TickWheel.SLOTS;
  readonly #slots: Set<T>[] = Array.from({ length: TickWheel.SLOTS }, () => new Set<T>());
  #cursor = 0;
  #cursorAt = 0;
  #timer: ReturnType<typeof setTimeout> | null = null;
  #count = 0;
  /** Lateness of every tick (ms between its slot's due time and its start). */
  readonly lateness = new LatenessHistogram();

  constructor(
    private readonly now: () => number,
    private readonly run: (item: T, lateMs: number) => void,
  ) {}

  add(item: T): number {
    let best = 0;
    for (let i = 1; i < TickWheel.SLOTS; i++) if (this.#slots[i]!.size < this.#slots[best]!.size) best = i;
    this.#slots[best]!.add(item);
    if (this.#count++ === 0) this.#start();
    return best;
  }

  remove(item: T, slot: number): void {
    if (this.#slots[slot]!.delete(item) && --this.#count === 0) this.#stop();
  }

  #start(): void {
    this.#cursorAt = this.now() + TickWheel.SLOT_MS;
    this.#arm();
  }

  #stop(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #arm(): void {
    this.#timer = setTimeout(() => this.#turn(), Math.max(0, this.#cursorAt - this.now()));
  }

  #turn(): void {
    this.#timer = null;
    // Catch up on every slot that fell due, so a slow turn delays ticks but never drops them.
    while (this.#count > 0 && this.#cursorAt <= this.now()) {
      const due = this.#cursorAt;
      const slot = this.#slots[this.#cursor]!;
      for (const item of [...slot]) {
        const late = this.now() - due;
        this.lateness.record(late);
        this.run(item, late);
      }
      this.#cursor = (this.#cursor + 1) % TickWheel.SLOTS;
      this.#cursorAt += TickWheel.SLOT_MS;
    }
    if (this.#count > 0) this.#arm();
  }

  close(): void {
    this.#stop();
    for (const s of this.#slots) s.clear();
    this.#count = 0;
  }
}

/**
 * Live matches of this node: one Lua VM per match, ticked by the shared wheel
 * (lua-scripting 5.2: queued inputs → reload check → tick → finish check →
 * `match.state` per player), plus the `match.*` frames of wire-protocol 6.
 * A player is in at most one match; joining another leaves the first.
 */
export class MatchHost implements LiveMatches {
  readonly #matches = new Map<string, LiveMatch>();
  readonly #byPlayer = new Map<string, LiveMatch>();
  readonly #wheel: TickWheel<LiveMatch>;
  readonly #lingering = new Set<ReturnType<typeof setTimeout>>();
  readonly #send: MatchServices['send'];

  constructor(
    private readonly ctx: Ctx,
    private readonly sessions: SessionRegistry,
    private readonly game: GameHandle,
    private readonly createVm: VmFactory,
  ) {
    this.#wheel = new TickWheel<LiveMatch>(() => ctx.clock.now(), (m) => this.#tick(m));
    this.#send = scriptSend(sessions);
    // A player whose last socket closed leaves the match (no reconnect grace for matches).
    sessions.onPlayerGone((playerId) => this.leave(playerId));
  }

  get size(): number {
    return this.#matches.size;
  }

  /** Tick lateness since the last reset, for the benchmark and operators. */
  lateness(): LatenessSummary {
    return this.#wheel.lateness.summary();
  }

  resetLateness(): void {
    this.#wheel.lateness.reset();
  }

  mode(name: string): ModeInfo | undefined {
    return this.game.info.modes.get(name);
  }

  /** Starts a match of the mode in `waiting`: VM built and `init` run. Throws when that fails. */
  create(modeName: string): LiveMatch {
    const mode = this.mode(modeName);
    if (!mode || mode.kind !== 'match') throw new FrameError('not_found');
    if (this.#matches.size >= this.ctx.settings.match_max) throw new FrameError('match_capacity_reached');
    const id = this.ctx.ids.uuid();
    const log = this.ctx.log.child({ match_id: id, mode: mode.name });
    const match: LiveMatch = {
      id,
      mode,
      vm: undefined as unknown as MatchRuntime,
      status: 'waiting',
      roster: new Set(),
      everJoined: new Set(),
      joinable: true,
      startedAt: null,
      slot: -1,
      waitingTimer: null,
    };
    match.vm = this.createVm({
      source: this.game.source,
      mode,
      matchId: id,
      services: {
        log,
        limits: this.ctx.limits,
        clock: this.ctx.clock,
        ids: this.ctx.ids,
        broadcast: (leaf, payload) => this.#toRoster(match, `{"type":${JSON.stringify(`match.${leaf}`)},"payload":${JSON.stringify(payload)}}`),
        send: this.#send,
        setJoinable: (joinable) => void (match.joinable = joinable),
      },
    });
    const init = match.vm.init();
    if (!init.ok) {
      match.vm.close();
      log.warn('match_init_failed', { kind: init.kind, message: init.message });
      throw new FrameError('match_start_failed');
    }
    this.#matches.set(id, match);
    match.waitingTimer = setTimeout(() => {
      if (match.status === 'waiting') this.#stop(match, 'waiting_timeout');
    }, WAITING_TIMEOUT_MS);
    match.waitingTimer.unref();
    log.info('match_created', {});
    return match;
  }

  /**
   * Puts the player into the match after the match's own checks (locked, full,
   * the script's `join`). Spends no join token: callers decide that.
   */
  joinInto(match: LiveMatch, playerId: string, ctx: JsonObject = {}): JoinedInfo {
    if (match.status === 'finished') throw new FrameError('not_in_match');
    if (match.roster.has(playerId)) return this.#info(match);
    if (!match.joinable) throw new FrameError('match_locked');
    if (match.roster.size >= match.mode.max_players) throw new FrameError('match_full');
    if (match.status === 'paused') throw new FrameError('match_paused');
    const r = match.vm.join(playerId, ctx);
    if (!r.ok) {
      if (r.refused) throw new FrameError('join_refused', { details: r.reason ? { refused_reason: r.reason } : {} });
      if (r.kind === 'budget') throw new FrameError('timeout');
      throw new FrameError('internal');
    }
    const previous = this.#byPlayer.get(playerId);
    if (previous && previous !== match) this.leave(playerId);
    match.roster.add(playerId);
    match.everJoined.add(playerId);
    this.#byPlayer.set(playerId, match);
    if (match.status === 'waiting' && match.roster.size >= match.mode.min_players) this.#run(match);
    return this.#info(match);
  }

  /** Runs the script's `leave`; an emptied match stops without a record. */
  leave(playerId: string): void {
    const match = this.#byPlayer.get(playerId);
    if (!match) return;
    this.#byPlayer.delete(playerId);
    if (match.status === 'finished') return;
    const r = match.vm.leave(playerId);
    if (!r.ok) this.ctx.log.warn('match_leave_failed', { match_id: match.id, kind: r.kind });
    match.roster.delete(playerId);
    if (match.roster.size === 0) this.#stop(match, 'empty');
  }

  list(filter: LiveMatchFilter): MatchListing[] {
    const out: MatchListing[] = [];
    for (const m of this.#matches.values()) {
      if (!m.mode.listed || (m.status !== 'waiting' && m.status !== 'running')) continue;
      if (filter.mode !== undefined && m.mode.name !== filter.mode) continue;
      if (filter.hasCapacity && m.roster.size >= m.mode.max_players) continue;
      if (filter.joinable !== undefined && m.joinable !== filter.joinable) continue;
      out.push(this.#listing(m));
    }
    return out;
  }

  /** Serves the `match.*` client frames. */
  attach(gateway: Gateway): void {
    gateway.route('match.list', { auth: true, handle: (_s, f) => this.#listFrame(f) });
    gateway.route('match.join', { auth: true, handle: (s, f) => this.#joinFrame(s, f) });
    gateway.route('match.find_or_create', { auth: true, handle: (s, f) => this.#findOrCreateFrame(s, f) });
    gateway.route('match.leave', {
      auth: true,
      handle: (s) => {
        this.leave(s.playerId!);
        return { type: 'match.left', payload: { success: true } };
      },
    });
    gateway.route('match.input', { auth: true, handle: (s, f) => this.#inputFrame(s, f) });
  }

  close(): void {
    this.#wheel.close();
    for (const t of this.#lingering) clearTimeout(t);
    for (const m of this.#matches.values()) {
      if (m.waitingTimer) clearTimeout(m.waitingTimer);
      m.vm.close();
    }
    this.#matches.clear();
    this.#byPlayer.clear();
  }

  // ---- frames -------------------------------------------------------------

  #listFrame(frame: ClientFrame): Reply {
    const p = frame.payload;
    if (!isPlainObject(p)) throw new FrameError('unknown_type');
    const filter: LiveMatchFilter = {};
    if ('mode' in p) {
      if (typeof p.mode !== 'string') throw new FrameError('invalid_mode_filter');
      // Decisions table: a mode filter over 64 bytes is ignored, as for worlds.
      if (byteLength(p.mode) <= 64) filter.mode = p.mode;
    }
    if ('has_capacity' in p) {
      if (typeof p.has_capacity !== 'boolean') throw new FrameError('invalid_has_capacity_filter');
      filter.hasCapacity = p.has_capacity;
    }
    if ('joinable' in p) {
      if (typeof p.joinable !== 'boolean') throw new FrameError('invalid_joinable_filter');
      filter.joinable = p.joinable;
    }
    return { type: 'match.list', payload: { matches: this.list(filter) } };
  }

  #joinFrame(session: Session, frame: ClientFrame): Reply {
    const p = frame.payload;
    if (!frame.hasPayload || (isPlainObject(p) && !('match_id' in p))) throw new FrameError('unknown_type');
    if (!isPlainObject(p)) throw new FrameError('invalid_payload');
    const playerId = session.playerId!;
    // A lookup miss answers before the join bucket is touched (wire-protocol 6.3).
    const match = typeof p.match_id === 'string' ? this.#matches.get(p.match_id) : undefined;
    if (!match) throw new FrameError('match_not_found');
    this.#spendJoin(playerId);
    const joinCtx = 'ctx' in p ? checkJoinCtx(p.ctx) : {};
    return { type: 'match.joined', payload: this.joinInto(match, playerId, joinCtx) };
  }

  #findOrCreateFrame(session: Session, frame: ClientFrame): Reply {
    const p = frame.payload;
    if (!frame.hasPayload || (isPlainObject(p) && !('mode' in p))) throw new FrameError('unknown_type');
    if (!isPlainObject(p)) throw new FrameError('invalid_payload');
    const playerId = session.playerId!;
    this.#spendJoin(playerId);
    const joinCtx = 'ctx' in p ? checkJoinCtx(p.ctx) : {};
    if (typeof p.mode !== 'string') throw new FrameError('unknown_request');
    const mode = this.mode(p.mode);
    if (!mode) throw new FrameError('not_found');
    if (mode.kind !== 'match') throw new FrameError('wrong_mode_type');
    if (!mode.quick_play) throw new FrameError('quick_play_disabled');
    // The fullest match with room wins, so concurrent callers converge (the loop is single-threaded).
    let best: LiveMatch | null = null;
    for (const m of this.#matches.values()) {
      if (m.mode.name !== mode.name || !m.joinable || (m.status !== 'waiting' && m.status !== 'running')) continue;
      if (m.roster.size >= m.mode.max_players || m.roster.has(playerId)) {
        if (m.roster.has(playerId)) return { type: 'match.joined', payload: this.#info(m) };
        continue;
      }
      if (!best || m.roster.size > best.roster.size) best = m;
    }
    if (!best) {
      if (this.#matches.size >= this.ctx.settings.match_max) throw new FrameError('match_capacity_reached');
      best = this.create(mode.name);
    }
    return { type: 'match.joined', payload: this.joinInto(best, playerId, joinCtx) };
  }

  #inputFrame(session: Session, frame: ClientFrame): null {
    // Wire-protocol 2.4: not among the frames that work without a payload.
    if (!frame.hasPayload) throw new FrameError('unknown_type');
    const input = unwrapInput(frame.payload);
    const match = this.#byPlayer.get(session.playerId!);
    if (!match || match.status === 'finished') {
      throw new FrameError('not_in_match', { frameType: 'match.input', echoCid: false });
    }
    // Waiting or paused: the frame was delivered, but there is no tick to apply it to.
    if (match.status === 'running') match.vm.input(session.playerId!, input);
    return null;
  }

  #spendJoin(playerId: string): void {
    if (!this.ctx.limits.take('join', `p:${playerId}`).ok) throw new FrameError('join_rate_limited');
  }

  // ---- lifecycle ------------------------------------------------------------

  #run(match: LiveMatch): void {
    match.status = 'running';
    match.startedAt = new Date(this.ctx.clock.now());
    if (match.waitingTimer) clearTimeout(match.waitingTimer);
    match.waitingTimer = null;
    match.slot = this.#wheel.add(match);
  }

  #tick(match: LiveMatch): void {
    if (match.status !== 'running') return;
    let r;
    try {
      r = match.vm.tick();
    } catch (err) {
      // The VM contains script failures itself; reaching here is a host bug. Keep the node alive.
      this.ctx.log.error('match_tick_crashed', { match_id: match.id, error: err });
      return this.#finish(match, { status: 'error', reason: 'internal' });
    }
    if (r.finished) return this.#finish(match, r.finished.result);
    for (const playerId of match.roster) {
      if (!this.sessions.isOnline(playerId)) continue;
      this.sessions.pushText(playerId, `{"type":"match.state","payload":${match.vm.viewJson(playerId)}}`);
    }
  }

  #finish(match: LiveMatch, result: Record<string, unknown>): void {
    match.status = 'finished';
    this.#wheel.remove(match, match.slot);
    const finishedAt = new Date(this.ctx.clock.now());
    this.#toRoster(match, JSON.stringify({ type: 'match.finished', payload: { match_id: match.id, result } }));
    for (const playerId of match.roster) if (this.#byPlayer.get(playerId) === match) this.#byPlayer.delete(playerId);
    this.ctx.log.info('match_finished', { match_id: match.id, mode: match.mode.name, players: match.roster.size });
    recordFinishedMatch(this.ctx.db, {
      id: match.id,
      mode: match.mode.name,
      status: 'finished',
      players: [...match.everJoined],
      result,
      startedAt: match.startedAt,
      finishedAt,
    }).catch((err) => this.ctx.log.error('match_record_failed', { match_id: match.id, error: err }));
    const t = setTimeout(() => {
      this.#lingering.delete(t);
      this.#matches.delete(match.id);
      match.vm.close();
    }, FINISHED_LINGER_MS);
    t.unref();
    this.#lingering.add(t);
  }

  /** Ends a match without a finished frame or record (emptied, never started). */
  #stop(match: LiveMatch, why: string): void {
    if (match.status === 'running') this.#wheel.remove(match, match.slot);
    if (match.waitingTimer) clearTimeout(match.waitingTimer);
    match.status = 'finished';
    for (const playerId of match.roster) if (this.#byPlayer.get(playerId) === match) this.#byPlayer.delete(playerId);
    this.#matches.delete(match.id);
    match.vm.close();
    this.ctx.log.info('match_stopped', { match_id: match.id, reason: why });
  }

  #toRoster(match: LiveMatch, text: string): void {
    for (const playerId of match.roster) this.sessions.pushText(playerId, text);
  }

  #listing(m: LiveMatch): MatchListing {
    return {
      match_id: m.id,
      mode: m.mode.name,
      status: m.status,
      player_count: m.roster.size,
      max_players: m.mode.max_players,
      joinable: m.joinable,
    };
  }

  #info(m: LiveMatch): JoinedInfo {
    return { ...this.#listing(m), players: [...m.roster], listed: m.mode.listed };
  }
}

/**
 * Wire-protocol 6.6: the payload is the input; a payload whose only key is
 * `data` holding an object, or a JSON string of one, is unwrapped.
 */
function unwrapInput(payload: unknown): JsonObject {
  if (!isPlainObject(payload)) throw new FrameError('invalid_payload');
  const keys = Object.keys(payload);
  if (keys.length === 1 && keys[0] === 'data') {
    const data = payload.data;
    if (isPlainObject(data)) return data as JsonObject;
    if (typeof data === 'string') {
      let decoded: unknown;
      try {
        decoded = JSON.parse(data);
      } catch {
        throw new FrameError('invalid_payload');
      }
      if (!isPlainObject(decoded)) throw new FrameError('invalid_payload');
      return decoded as JsonObject;
    }
  }
  return payload as JsonObject;
}
