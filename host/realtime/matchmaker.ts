import type { Ctx } from '../../runtime/contracts/context';
import { ApiError } from '../../runtime/contracts/errors';
import { byteLength, FrameError } from '../../runtime/contracts/frame-envelope';
import type { matchmakerAdd, matchmakerRemove } from '../../runtime/schemas/matchmaker';
import type { ModeInfo } from '../../runtime/lua/host-interface';
import type { LiveMatchmaker, MatchmakerQueued, MatchmakerSample, MatchmakerTicketView } from '../../runtime/contracts/live';
import type { MatchHost } from './match/match-host';
import type { Session, SessionRegistry } from './sessions';
import type { FrameHandler } from './gateway';
import { isBotId } from '../../runtime/bots/ids';

interface Ticket {
  id: string;
  playerId: string;
  mode: string;
  properties: Record<string, unknown>;
  submittedAt: number;
  /** Failed match starts for the group this ticket was in (3 and the ticket is dropped). */
  attempts: number;
}

/** Strategy `skill_based`: the base spread a group may have. */
const SKILL_WINDOW = 200;
/** ... widened by this much per `matchmaker_skill_widen_ms` the lowest ticket waited. */
const SKILL_WIDEN_STEP = 50;
const DEFAULT_SKILL = 1000;
const MAX_START_ATTEMPTS = 3;
const START_SLICE_MS = 10;
/** Match starts awaiting their script lane at once. */
const START_CONCURRENCY = 32;

/**
 * The node-local matchmaker. Tickets live only in
 * memory, one per player and mode; every `matchmaker_tick_ms` each mode's
 * queue is expired, grouped by the mode's `strategy` into groups of
 * `match_size`, and each group becomes a match its players are joined to
 * before they are told `match.matched`.
 */
export class Matchmaker implements LiveMatchmaker {
  readonly #tickets = new Map<string, Ticket>();
  /** Per mode, in submit order. */
  readonly #queues = new Map<string, Ticket[]>();
  readonly #byPlayerMode = new Map<string, Ticket>();
  #samples: Record<string, MatchmakerSample> = {};
  #sampledAt: number | null = null;
  #timer: ReturnType<typeof setInterval> | null = null;
  /** Groups formed but not yet started (see `#drainStarts`). */
  readonly #starts: { mode: ModeInfo; group: Ticket[] }[] = [];
  #draining = false;
  #startsInFlight = 0;

  constructor(
    private readonly ctx: Ctx,
    private readonly sessions: SessionRegistry,
    private readonly matches: MatchHost,
  ) {}

  start(): void {
    this.#timer = setInterval(() => this.tick(), this.ctx.settings.matchmaker_tick_ms);
    this.#timer.unref();
  }

  close(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  add(playerId: string, mode: string, properties: Record<string, unknown>): MatchmakerQueued {
    const info = this.#mode(mode);
    if (!info) throw new ApiError('matchmaker.unknown_mode', 'Unknown game mode.');
    const existing = this.#byPlayerMode.get(key(playerId, mode));
    if (existing) return queued(existing, info, true);
    if (this.#tickets.size >= this.ctx.settings.matchmaker_max_queue) throw new ApiError('matchmaker.queue_full', 'The matchmaker queue is full.');
    const ticket: Ticket = { id: this.ctx.ids.uuid(), playerId, mode, properties, submittedAt: this.ctx.clock.now(), attempts: 0 };
    this.#tickets.set(ticket.id, ticket);
    this.#byPlayerMode.set(key(playerId, mode), ticket);
    let q = this.#queues.get(mode);
    if (!q) this.#queues.set(mode, (q = []));
    q.push(ticket);
    return queued(ticket, info, false);
  }

  get(playerId: string, ticketId: string): MatchmakerTicketView {
    const t = this.#owned(playerId, ticketId);
    return { id: t.id, mode: t.mode, status: 'pending', properties: t.properties, submitted_at: t.submittedAt };
  }

  remove(playerId: string, ticketId: string): void {
    this.#drop(this.#owned(playerId, ticketId));
  }

  /** Who waits in a mode's queue, oldest first (bot queue fill reads it). */
  queued(mode: string): readonly { id: string; playerId: string; properties: Record<string, unknown> }[] {
    return this.#queues.get(mode) ?? [];
  }

  samples(): Record<string, MatchmakerSample> {
    return this.#samples;
  }

  sampledAt(): number | null {
    return this.#sampledAt;
  }

  /** One matchmaker pass: expire, group, start matches, then publish the sample. */
  tick(): void {
    const now = this.ctx.clock.now();
    const maxWait = this.ctx.settings.matchmaker_max_wait_ms;
    // A snapshot: failed starts put tickets back, which must wait for the next pass.
    for (const [modeName, queue] of [...this.#queues]) {
      for (const t of queue.filter((t) => now - t.submittedAt >= maxWait)) {
        this.#drop(t);
        this.sessions.push(t.playerId, { type: 'match.matchmaker_expired', payload: { ticket_id: t.id } });
      }
      const mode = this.matches.mode(modeName);
      if (!mode || mode.kind !== 'match') {
        for (const t of [...queue]) {
          this.#drop(t);
          this.sessions.push(t.playerId, { type: 'match.matchmaker_failed', payload: { reason: 'no_game_module' } });
        }
        continue;
      }
      const live = this.#queues.get(modeName) ?? [];
      const groups = mode.strategy === 'skill_based' ? this.#skillGroups(live, mode.match_size, now) : fillGroups(live, mode.match_size);
      for (const group of groups) {
        // Out of the queue now so no later pass regroups them; started in slices below.
        for (const t of group) this.#drop(t);
        this.#starts.push({ mode, group });
      }
    }
    this.#publishSamples(now);
    this.#drainStarts();
  }

  /**
   * Starting a match costs milliseconds (a VM, `init`, the joins), so a big
   * pass is spread over slices of about `START_SLICE_MS`, yielding to the
   * match loop in between instead of stalling every running match at once.
   */
  #drainStarts(): void {
    if (this.#draining) return;
    this.#draining = true;
    const slice = () => {
      const until = performance.now() + START_SLICE_MS;
      while (this.#starts.length > 0 && this.#startsInFlight < START_CONCURRENCY && performance.now() < until) {
        const next = this.#starts.shift()!;
        // Script lanes build VMs asynchronously; a bounded number in flight keeps a big pass from flooding them.
        this.#startsInFlight++;
        void this.#startGroup(next.mode, next.group).finally(() => {
          this.#startsInFlight--;
          if (this.#timer !== null) this.#drainStarts();
        });
      }
      if (this.#starts.length > 0 && this.#startsInFlight < START_CONCURRENCY && this.#timer !== null) setImmediate(slice);
      else this.#draining = false;
    };
    slice();
  }

  // The frame table (frame-table.ts) routes the `matchmaker.*` client frames here.
  readonly addFrame: FrameHandler<typeof matchmakerAdd> = (session, { mode, properties }) => {
    try {
      return { type: 'matchmaker.queued', payload: { ...this.add(session.playerId!, mode, properties) } };
    } catch (err) {
      if (err instanceof ApiError) throw FrameError.from(err, 'matchmaker.add');
      throw err;
    }
  };

  readonly removeFrame: FrameHandler<typeof matchmakerRemove> = (session, { ticket_id }) => {
    const t = this.#tickets.get(ticket_id);
    // Another player's ticket answers exactly as an unknown one, so a ticket
    // id's existence does not leak (docs/decisions/0017).
    if (!t || t.playerId !== session.playerId) throw new FrameError('not_found', { frameType: 'matchmaker.remove', message: 'No such ticket on this node.' });
    this.#drop(t);
    return { type: 'matchmaker.removed', payload: { success: true } };
  };

  #mode(name: string): ModeInfo | null {
    if (byteLength(name) > 64) return null;
    const mode = this.matches.mode(name);
    // World-backed modes need the world host; until it serves them they are not matchable here.
    return mode && mode.kind === 'match' ? mode : null;
  }

  #owned(playerId: string, ticketId: string): Ticket {
    const t = this.#tickets.get(ticketId);
    // Another player's ticket answers as an unknown one (docs/decisions/0017).
    if (!t || t.playerId !== playerId) throw new ApiError('matchmaker.ticket_not_found', 'No such ticket on this node.');
    return t;
  }

  #drop(t: Ticket): void {
    if (!this.#tickets.delete(t.id)) return;
    this.#byPlayerMode.delete(key(t.playerId, t.mode));
    const q = this.#queues.get(t.mode);
    if (!q) return;
    const i = q.indexOf(t);
    if (i >= 0) q.splice(i, 1);
    if (q.length === 0) this.#queues.delete(t.mode);
  }

  /**
   * Sorted by skill, consecutive runs of `size` whose spread fits the window,
   * which widens with the time the lowest-skilled ticket of the run waited.
   */
  #skillGroups(queue: Ticket[], size: number, now: number): Ticket[][] {
    const widenMs = this.ctx.settings.matchmaker_skill_widen_ms;
    const sorted = [...queue].sort((a, b) => skill(a) - skill(b));
    const groups: Ticket[][] = [];
    let i = 0;
    while (i + size <= sorted.length) {
      const run = sorted.slice(i, i + size);
      const lowest = run[0]!;
      const window = SKILL_WINDOW + SKILL_WIDEN_STEP * Math.floor((now - lowest.submittedAt) / widenMs);
      if (skill(run[run.length - 1]!) - skill(lowest) <= window) {
        groups.push(run);
        i += size;
      } else {
        i++;
      }
    }
    return groups;
  }

  async #startGroup(mode: ModeInfo, group: Ticket[]): Promise<void> {
    let match;
    try {
      match = await this.matches.create(mode.name);
    } catch (err) {
      this.ctx.log.warn('matchmaker_start_failed', { mode: mode.name, error: err instanceof Error ? err.message : String(err) });
      for (const t of group) {
        t.attempts++;
        if (t.attempts >= MAX_START_ATTEMPTS) {
          this.sessions.push(t.playerId, { type: 'match.matchmaker_failed', payload: { reason: 'match_start_failed' } });
        } else {
          // Back into the queue with its original submit time (and so its expiry clock).
          this.#tickets.set(t.id, t);
          this.#byPlayerMode.set(key(t.playerId, t.mode), t);
          let q = this.#queues.get(t.mode);
          if (!q) this.#queues.set(t.mode, (q = []));
          q.unshift(t);
        }
      }
      return;
    }
    const players = group.map((t) => t.playerId);
    for (const t of group) {
      try {
        await this.matches.joinInto(match, t.playerId);
      } catch (err) {
        // A refused player is still told about the match it was grouped into.
        this.ctx.log.info('matchmaker_join_failed', { match_id: match.id, player_id: t.playerId, reason: err instanceof FrameError ? err.reason : String(err) });
      }
      this.sessions.push(t.playerId, { type: 'match.matched', payload: { match_id: match.id, players } });
      if (!isBotId(t.playerId)) this.sessions.metrics.matchmakerMatched(t.mode, this.ctx.clock.now() - t.submittedAt);
    }
  }

  #publishSamples(now: number): void {
    const samples: Record<string, MatchmakerSample> = {};
    for (const [mode, queue] of this.#queues) {
      let oldest = 0;
      let total = 0;
      for (const t of queue) {
        const w = now - t.submittedAt;
        total += w;
        if (w > oldest) oldest = w;
      }
      samples[mode] = { waiting: queue.length, oldest_wait_ms: oldest, average_wait_ms: queue.length ? Math.round(total / queue.length) : 0 };
    }
    this.#samples = samples;
    this.#sampledAt = now;
  }
}

/** Strategy `fill`: queue order, groups of exactly `size`; leftovers wait. */
function fillGroups(queue: Ticket[], size: number): Ticket[][] {
  const groups: Ticket[][] = [];
  for (let i = 0; i + size <= queue.length; i += size) groups.push(queue.slice(i, i + size));
  return groups;
}

/** `properties.skill` when an integer, else 1000. */
function skill(t: Ticket): number {
  const s = t.properties.skill;
  return typeof s === 'number' && Number.isInteger(s) ? s : DEFAULT_SKILL;
}

function key(playerId: string, mode: string): string {
  return `${playerId}\u0000${mode}`;
}

function queued(t: Ticket, mode: ModeInfo, already: boolean): MatchmakerQueued {
  return { ticket_id: t.id, status: 'pending', players_needed: mode.match_size, already_queued: already };
}
