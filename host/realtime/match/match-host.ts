/**
 * The match host: the main thread's side of this node's matches. It owns
 * the live match table (who is in which match, joins and their limits,
 * listings), each match's lifecycle (match-lifecycle.ts) and place on the
 * lanes' tick wheel, the `match.*` frames and the events the match lanes
 * send back, the finished record, tick lateness, and the bots and votes of
 * its matches (bots.ts, ../votes.ts). The scripts themselves run on the
 * script lanes (../lanes/, match-lane.ts).
 */
import type { Ctx } from '../../../runtime/contracts/context';
import { FrameError } from '../../../runtime/contracts/frame-envelope';
import { isLimitKind, type JoinResult, type JsonObject, type ModeInfo } from '../../../runtime/lua/host-interface';
import type { LiveMatches } from '../../../runtime/contracts/live';
import { recordFinishedMatch } from '../../../runtime/matches/matches';
import {
  type matchFindOrCreate,
  type matchInput,
  type matchJoin,
  type matchLeave,
  type matchList,
  type LiveMatchFilter,
  type LiveMatchStatus,
  type MatchFindOrCreate,
  type MatchJoin,
  type MatchListing,
} from '../../../runtime/schemas/matches';
import type { CreateAnswer, EventOf } from '../lanes/protocol';
import type { ThrottleReason } from '../lanes/fair-share';
import { TICK_MS, type TickWheel } from '../lanes/tick-wheel';
import { MatchLifecycle } from './match-lifecycle';
import type { ScriptPool } from '../lanes/pool';
import { LatenessHistogram, type LatenessSummary } from '../lanes/histogram';
import { MatchVotes } from '../votes';
import type { PhaseListing } from '../../../runtime/schemas/phases';
import { MatchBots } from './bots';
import { isBotId } from '../../../runtime/bots/ids';
import type { Session, SessionRegistry } from '../sessions';
import type { Tally } from '../../metrics/registry';
import type { FrameHandler, Reply } from '../gateway';
import type { GameHandle } from '../../game-directory';

/** Skipped ticks are logged at most this often, with the count since the last line. */
const SKIP_LOG_EVERY_MS = 10_000;
/** A match that never reaches `min_players` stops silently. */
const WAITING_TIMEOUT_MS = 60_000;
/** A finished match lingers this long answering `not_in_match`, then is gone. */
const FINISHED_LINGER_MS = 5000;
const LOST_JOIN: JoinResult = { ok: false, refused: false, kind: 'error', message: 'worker_lost' };

interface LiveMatch {
  id: string;
  mode: ModeInfo;
  /** Its stage and whether its script admits players (match-lifecycle.ts). */
  life: MatchLifecycle;
  /** The wire status of its stage (votes and bots read it). */
  readonly status: LiveMatchStatus;
  /** Settles once the VM is built and `init` ran (rejects with `match_start_failed`). */
  ready: Promise<void>;
  /** Joins sent to the script and not answered yet, by player (they hold a place against `max_players`). */
  joining: Map<string, Promise<JoinedInfo>>;
  /** A tick was sent and its outcome has not come back: the next one is skipped, not queued. */
  inFlight: boolean;
  /** Join order; the roster stays intact through the finished linger so broadcasts still arrive. */
  roster: Set<string>;
  /** Everyone ever admitted, for the finished record. */
  everJoined: Set<string>;
  startedAt: Date | null;
  /** Where the mode's phases stood at their last transition (listing form), and when (wall ms) the lane said so; null without phases. */
  phase: PhaseListing | null;
  phaseAt: number;
  /** Ticks its lane throttled since the last `match_ticks_throttled` line, and when that line was written. */
  throttled: number;
  throttleLoggedAt: number;
}

/** Outcome of one join, as `match.joined` reports it. */
export type JoinedInfo = Record<string, unknown>;

/**
 * Live matches of this node, their `match.*` frames and their tick
 * bookkeeping. The scripts run on the script lanes (match-lane.ts):
 * each tick the wheel sends the match's queued inputs and a tick command to
 * its lane, which runs one tick's steps (inputs → reload check → tick →
 * finish check → views) and sends back the encoded
 * `match.state` frames. A player is in at most one match; joining another
 * leaves the first.
 */
export class MatchHost implements LiveMatches {
  readonly #matches = new Map<string, LiveMatch>();
  readonly #byPlayer = new Map<string, LiveMatch>();
  readonly #lateness = new LatenessHistogram();
  readonly #lingering = new Set<ReturnType<typeof setTimeout>>();
  readonly #votes: MatchVotes;
  readonly #bots: MatchBots<LiveMatch>;
  readonly #stateSent: Tally;
  #skippedSinceLog = 0;
  /** Joins in flight per player, and the players whose last socket closed during one (#joinLanded). */
  readonly #joins = new Map<string, number>();
  readonly #goneWhileJoining = new Set<string>();
  #skipLoggedAt = 0;

  constructor(
    private readonly ctx: Ctx,
    private readonly sessions: SessionRegistry,
    private readonly game: GameHandle,
    private readonly pool: ScriptPool,
    /** The lanes' one clock (host/realtime/lanes/tick-wheel.ts). */
    private readonly wheel: TickWheel,
  ) {
    pool.subscribe('match', (e) => this.onLaneEvent(e));
    pool.onLost((ids) => this.onLanesLost(ids));
    this.#stateSent = sessions.metrics.frameOut('match.state');
    this.#votes = new MatchVotes(ctx, sessions, pool, (playerId) => this.#byPlayer.get(playerId));
    this.#bots = new MatchBots(ctx, this, this.#votes);
    // A player whose last socket closed leaves the match (no reconnect grace for matches). During a
    // join the goodbye finds no match yet: it is remembered and said when the join lands (#joinLanded).
    sessions.onPlayerGone((playerId) => {
      if (this.#joins.has(playerId)) this.#goneWhileJoining.add(playerId);
      this.leave(playerId);
    });
  }

  get size(): number {
    return this.#matches.size;
  }

  /** Ids of the live matches on this node (the fleet's directory publishes them). */
  liveIds(): IterableIterator<string> {
    return this.#matches.keys();
  }

  /** Bots in this node's matches: `game.bots`, their votes, their think times. */
  get bots(): MatchBots<LiveMatch> {
    return this.#bots;
  }

  /** The node's votes; worlds open theirs here too (one `vote.*` frame route). */
  get votes(): MatchVotes {
    return this.#votes;
  }

  /** Tick lateness since the last reset, for the benchmark and operators. */
  lateness(): LatenessSummary {
    return this.#lateness.summary();
  }

  resetLateness(): void {
    this.#lateness.reset();
  }

  mode(name: string): ModeInfo | undefined {
    return this.game.info.modes.get(name);
  }

  /** Starts a match of the mode in `waiting`: VM built and `init` run. Rejects with `match_start_failed` when that fails. */
  async create(modeName: string): Promise<LiveMatch> {
    const mode = this.mode(modeName);
    if (!mode || mode.kind !== 'match') throw new FrameError('not_found');
    if (this.#matches.size >= this.ctx.settings.match_max) throw new FrameError('match_capacity_reached');
    const id = this.ctx.ids.uuid();
    const life = new MatchLifecycle();
    const match: LiveMatch = {
      id,
      mode,
      life,
      get status() {
        return life.status;
      },
      ready: Promise.resolve(),
      joining: new Map(),
      inFlight: false,
      roster: new Set(),
      everJoined: new Set(),
      startedAt: null,
      phase: null,
      phaseAt: 0,
      throttled: 0,
      throttleLoggedAt: 0,
    };
    // Registered before the script answers: it counts against match_max, and concurrent find_or_create callers converge on it.
    this.#matches.set(id, match);
    this.pool.assign(id);
    match.ready = this.pool.request<CreateAnswer>(id, { ok: false }, (req) => ({ kind: 'match', op: 'create', req, matchId: id, mode })).then((answer) => {
      if (!answer.ok) {
        life.end();
        this.#matches.delete(id);
        this.#release(id);
        throw new FrameError('match_start_failed');
      }
      if (life.stage !== 'created') return;
      life.open(WAITING_TIMEOUT_MS, () => this.#stop(match, 'waiting_timeout'));
      this.ctx.log.info('match_created', { match_id: id, mode: mode.name });
    });
    match.ready.catch(() => {});
    await match.ready;
    return match;
  }

  /**
   * Puts the player into the match after the match's own checks (locked, full,
   * the script's `join`). Spends no join token: callers decide that.
   */
  async joinInto(match: LiveMatch, playerId: string, ctx: JsonObject = {}): Promise<JoinedInfo> {
    await match.ready;
    if (match.life.over) throw new FrameError('not_in_match');
    if (match.roster.has(playerId)) return this.#info(match);
    const pending = match.joining.get(playerId);
    if (pending) return pending;
    if (!match.life.joinable) throw new FrameError('match_locked');
    if (match.roster.size + match.joining.size >= match.mode.max_players) throw new FrameError('match_full');
    if (match.status === 'paused') throw new FrameError('match_paused');
    const joined = this.#join(match, playerId, ctx);
    match.joining.set(playerId, joined);
    this.#joins.set(playerId, (this.#joins.get(playerId) ?? 0) + 1);
    try {
      return await joined;
    } finally {
      match.joining.delete(playerId);
      this.#joinLanded(playerId);
    }
  }

  /**
   * A player whose last socket closed while the lane ran `join` (match.join,
   * find_or_create, the matchmaker) leaves now, or it would hold a place for
   * good. Only a goodbye heard during the join counts: bots and players
   * matched over REST never had a socket here, and stay.
   */
  #joinLanded(playerId: string): void {
    const left = (this.#joins.get(playerId) ?? 1) - 1;
    if (left > 0) return void this.#joins.set(playerId, left);
    this.#joins.delete(playerId);
    if (this.#goneWhileJoining.delete(playerId) && !this.sessions.has(playerId)) this.leave(playerId);
  }

  async #join(match: LiveMatch, playerId: string, ctx: JsonObject): Promise<JoinedInfo> {
    const r = await this.pool.request<JoinResult>(match.id, LOST_JOIN, (req) => ({ kind: 'match', op: 'join', req, matchId: match.id, playerId, ctx }));
    if (match.life.over) throw new FrameError('not_in_match');
    if (!r.ok) {
      if (r.refused) throw new FrameError('join_refused', { details: r.reason ? { refused_reason: r.reason } : {} });
      if (isLimitKind(r.kind)) throw new FrameError('timeout');
      throw new FrameError('internal');
    }
    const previous = this.#byPlayer.get(playerId);
    if (previous && previous !== match) this.leave(playerId);
    match.roster.add(playerId);
    match.everJoined.add(playerId);
    this.#byPlayer.set(playerId, match);
    if (match.life.stage === 'waiting' && match.roster.size >= match.mode.min_players) this.#run(match);
    return this.#info(match);
  }

  /** Runs the script's `leave`; an emptied match stops without a record. */
  leave(playerId: string): void {
    const match = this.#byPlayer.get(playerId);
    if (!match) return;
    this.#byPlayer.delete(playerId);
    if (match.life.over) return;
    this.pool.soon(match.id, { kind: 'match', op: 'leave', matchId: match.id, playerId });
    match.roster.delete(playerId);
    // Bots play for people: a match only bots are left in stops as an empty one does.
    const human = (id: string) => !isBotId(id);
    if (![...match.roster].some(human) && ![...match.joining.keys()].some(human)) this.#stop(match, 'empty');
  }

  list(filter: LiveMatchFilter): MatchListing[] {
    const out: MatchListing[] = [];
    for (const m of this.#matches.values()) {
      if (!m.life.live || !m.mode.listed) continue;
      if (filter.mode !== undefined && m.mode.name !== filter.mode) continue;
      if (filter.has_capacity && m.roster.size >= m.mode.max_players) continue;
      if (filter.joinable !== undefined && m.life.joinable !== filter.joinable) continue;
      out.push(this.#listing(m));
    }
    return out;
  }


  isParticipant(matchId: string, playerId: string): boolean {
    return this.#matches.get(matchId)?.everJoined.has(playerId) ?? false;
  }

  close(): void {
    for (const m of this.#matches.values()) m.life.close();
    this.#votes.close();
    this.#bots.close();
    for (const t of this.#lingering) clearTimeout(t);
    this.#matches.clear();
    this.#byPlayer.clear();
  }

  /** What the lanes report: state frames, script effects, finished matches. */
  onLaneEvent(e: EventOf<'match'>): void {
    if (e.k === 'thinks') return this.#bots.recordThinks(e.buckets);
    if (e.k === 'states') return this.#states(e);
    const match = this.#matches.get(e.matchId);
    if (!match) return;
    switch (e.k) {
      case 'skipped':
        match.inFlight = false;
        return this.#skipped(1);
      case 'throttled':
        match.inFlight = false;
        return this.#throttled(match, e.reason);
      case 'finished':
        match.inFlight = false;
        if (!match.life.over) this.#finish(match, e.result);
        return;
      case 'broadcast':
        return this.#toRoster(match, e.text, this.sessions.metrics.frameOutOf(e.text));
      case 'joinable':
        match.life.joinable = e.joinable;
        return;
      case 'phase':
        match.phase = e.phase as PhaseListing;
        match.phaseAt = Date.now();
        return;
      case 'vote':
        if (match.life.running) {
          const voteId = this.#votes.open(match, e.config);
          if (voteId !== null) this.#bots.voteOpened(match, voteId, e.config.options);
        }
        return;
      case 'bots':
        return this.#bots.request(match, e.op, e.name);
    }
  }

  /** The views of a batch's ticks to their players (protocol.ts says how the lists line up). */
  #states(e: EventOf<'match'> & { k: 'states' }): void {
    const { matchIds, lateMs, counts, to, frames } = e;
    let next = 0;
    for (let i = 0; i < matchIds.length; i++) {
      const first = next;
      next += counts[i]!;
      const match = this.#matches.get(matchIds[i]!);
      if (!match) continue;
      match.inFlight = false;
      this.#lateness.record(lateMs[i]!);
      this.sessions.metrics.tickLateness(lateMs[i]!);
      if (!match.life.running) continue;
      for (let j = first; j < next; j++) {
        const playerId = to[j] as string | null;
        if (playerId === null) this.#toRoster(match, frames[j]!, this.#stateSent);
        else if (match.roster.has(playerId)) this.sessions.pushText(playerId, frames[j]!, this.#stateSent);
      }
    }
  }

  /** A script worker died: its matches end in error, and their players are told. */
  onLanesLost(matchIds: string[]): void {
    for (const id of matchIds) {
      const match = this.#matches.get(id);
      if (match && match.life.started && !match.life.over) this.#finish(match, { status: 'error', reason: 'worker_lost' });
    }
  }

  // ---- frames (the frame table, ../frame-table.ts, routes them here) -------

  readonly listFrame: FrameHandler<typeof matchList> = (_s, filter) => ({ type: 'match.list', payload: { matches: this.list(filter) } });
  readonly joinFrame: FrameHandler<typeof matchJoin> = (s, p) => this.#joinFrame(s, p);
  readonly findOrCreateFrame: FrameHandler<typeof matchFindOrCreate> = (s, p) => this.#findOrCreateFrame(s, p);
  readonly leaveFrame: FrameHandler<typeof matchLeave> = (s) => {
    this.leave(s.playerId!);
    return { type: 'match.left', payload: { success: true } };
  };
  readonly inputFrame: FrameHandler<typeof matchInput> = (s, input) => this.#inputFrame(s, input);

  async #joinFrame(session: Session, { match_id, ctx }: MatchJoin): Promise<Reply> {
    const playerId = session.playerId!;
    // A lookup miss answers before the join bucket is touched.
    const match = this.#matches.get(match_id);
    if (!match || !match.life.started) throw new FrameError('match_not_found');
    this.#spendJoin(playerId);
    return { type: 'match.joined', payload: await this.joinInto(match, playerId, ctx) };
  }

  async #findOrCreateFrame(session: Session, { mode: modeName, ctx: joinCtx }: MatchFindOrCreate): Promise<Reply> {
    const playerId = session.playerId!;
    this.#spendJoin(playerId);
    const mode = this.mode(modeName);
    if (!mode) throw new FrameError('not_found');
    if (mode.kind !== 'match') throw new FrameError('wrong_mode_type');
    if (!mode.quick_play) throw new FrameError('quick_play_disabled');
    // The fullest match with room wins, so concurrent callers converge on it, a match still starting included.
    let best: LiveMatch | null = null;
    for (const m of this.#matches.values()) {
      if (m.mode.name !== mode.name || !m.life.joinable || !m.life.live) continue;
      if (m.roster.has(playerId) || m.joining.has(playerId)) return { type: 'match.joined', payload: await this.joinInto(m, playerId, joinCtx) };
      const taken = m.roster.size + m.joining.size;
      if (taken >= m.mode.max_players) continue;
      if (!best || taken > best.roster.size + best.joining.size) best = m;
    }
    if (best) return { type: 'match.joined', payload: await this.joinInto(best, playerId, joinCtx) };
    if (this.#matches.size >= this.ctx.settings.match_max) throw new FrameError('match_capacity_reached');
    const created = await this.create(mode.name);
    try {
      return { type: 'match.joined', payload: await this.joinInto(created, playerId, joinCtx) };
    } catch (err) {
      // Opened for this caller, who could not join: nobody else is in it to keep it.
      if (created.life.stage === 'waiting' && created.roster.size === 0 && created.joining.size === 0) this.#stop(created, 'join_failed');
      throw err;
    }
  }

  #inputFrame(session: Session, input: JsonObject): null {
    const match = this.#byPlayer.get(session.playerId!);
    if (!match || match.life.over) {
      throw new FrameError('not_in_match', { frameType: 'match.input', echoCid: false });
    }
    // Waiting or paused: the frame was delivered, but there is no tick to apply it to.
    if (match.life.running) this.pool.queue(match.id, { kind: 'match', op: 'input', matchId: match.id, playerId: session.playerId!, input });
    return null;
  }

  #spendJoin(playerId: string): void {
    if (!this.ctx.limits.take('join', `p:${playerId}`).ok) throw new FrameError('join_rate_limited');
  }

  // ---- lifecycle ------------------------------------------------------------

  #run(match: LiveMatch): void {
    match.life.run(this.wheel.add({ period: TICK_MS, tick: (due) => this.#tick(match, due), skipped: (turns) => this.#skipped(turns) }));
    match.startedAt = new Date(this.ctx.clock.now());
    // Phase time moves with ticks only: the wait for players did not spend any.
    match.phaseAt = Date.now();
  }

  #tick(match: LiveMatch, due: number): void {
    if (!match.life.running) return;
    // The lane has not answered the previous tick (a script at its deadline): skip, never queue.
    if (match.inFlight) return this.#skipped(1);
    match.inFlight = true;
    this.pool.queue(match.id, { kind: 'match', op: 'tick', matchIds: [match.id], due });
  }

  /** Counted in the lateness histogram; logged at most once per SKIP_LOG_EVERY_MS with the count since. */
  #skipped(ticks: number): void {
    for (let i = 0; i < ticks; i++) {
      this.#lateness.skip();
      this.sessions.metrics.tickLateness(TICK_MS);
    }
    this.#skippedSinceLog += ticks;
    const now = Date.now();
    if (now - this.#skipLoggedAt < SKIP_LOG_EVERY_MS) return;
    this.ctx.log.warn('match_ticks_skipped', { ticks: this.#skippedSinceLog, since_ms: this.#skipLoggedAt ? now - this.#skipLoggedAt : null });
    this.#skippedSinceLog = 0;
    this.#skipLoggedAt = now;
  }

  /** Counted per mode; logged at most once per SKIP_LOG_EVERY_MS per match, naming it, with the count since. */
  #throttled(match: LiveMatch, reason: ThrottleReason): void {
    this.#lateness.throttle();
    this.sessions.metrics.tickThrottled(match.mode.name);
    match.throttled++;
    const now = Date.now();
    if (now - match.throttleLoggedAt < SKIP_LOG_EVERY_MS) return;
    this.ctx.log.warn('match_ticks_throttled', {
      match_id: match.id,
      mode: match.mode.name,
      ticks: match.throttled,
      since_ms: match.throttleLoggedAt ? now - match.throttleLoggedAt : null,
      reason,
    });
    match.throttled = 0;
    match.throttleLoggedAt = now;
  }

  #finish(match: LiveMatch, result: Record<string, unknown>): void {
    match.life.finish();
    this.#release(match.id);
    this.#votes.end(match);
    const finishedAt = new Date(this.ctx.clock.now());
    this.#toRoster(match, JSON.stringify({ type: 'match.finished', payload: { match_id: match.id, result } }), this.sessions.metrics.frameOut('match.finished'));
    for (const playerId of match.roster) if (this.#byPlayer.get(playerId) === match) this.#byPlayer.delete(playerId);
    this.ctx.log.info('match_finished', { match_id: match.id, mode: match.mode.name, players: match.roster.size, status: result.status ?? null, reason: result.reason ?? null });
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
      match.life.end();
      this.#matches.delete(match.id);
    }, FINISHED_LINGER_MS);
    t.unref();
    this.#lingering.add(t);
  }

  /** Ends a match without a finished frame or record (emptied, never started). */
  #stop(match: LiveMatch, why: string): void {
    match.life.end();
    for (const playerId of match.roster) if (this.#byPlayer.get(playerId) === match) this.#byPlayer.delete(playerId);
    this.#matches.delete(match.id);
    this.#release(match.id);
    this.#votes.end(match);
    this.ctx.log.info('match_stopped', { match_id: match.id, reason: why });
  }

  #release(id: string): void {
    this.pool.release(id, { kind: 'match', op: 'close', matchId: id });
  }

  #toRoster(match: LiveMatch, text: string, sent: Tally): void {
    for (const playerId of match.roster) this.sessions.pushText(playerId, text, sent);
  }

  #listing(m: LiveMatch): MatchListing {
    return {
      match_id: m.id,
      mode: m.mode.name,
      status: m.status,
      player_count: m.roster.size,
      max_players: m.mode.max_players,
      joinable: m.life.joinable,
      ...(m.phase ? { phase: phaseNow(m) } : {}),
    };
  }

  #info(m: LiveMatch): JoinedInfo {
    return { ...this.#listing(m), players: [...m.roster], listed: m.mode.listed };
  }
}

/** A match's phase as of now: the remaining time counts down from the last transition while the match ticks. */
function phaseNow(m: LiveMatch): PhaseListing {
  const phase = m.phase!;
  if (typeof phase.remaining_ms !== 'number' || !m.life.running) return phase;
  return { ...phase, remaining_ms: Math.max(0, phase.remaining_ms - (Date.now() - m.phaseAt)) };
}
