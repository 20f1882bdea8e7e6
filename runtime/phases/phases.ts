/**
 * The phase engine: the timed phases a mode script declares with
 * `phases(config)`. The clock is pure, like the vote engine: it is fed the
 * time and the player set and answers the transitions that happened.
 * `runTransitions` is the one place they become the script's
 * `on_phase_ended` / `on_phase_started` calls, for worlds and matches alike;
 * each host then tells its players in its own way (a world broadcasts
 * `payload()` as `world.phase_changed`).
 */
import { byteLength } from '../contracts/frame-envelope';
import { asObjectJson, isObjectJson, type JsonObject, type JsonValue } from '../lua/host-interface';
import { isStorableText } from '../platform/text';

export type StartRule = { type: 'prev_ended' } | { type: 'all_ready' } | { type: 'timer'; ms: number } | { type: 'players'; count: number };

export interface PhaseSpec {
  name: string;
  /** 0: no timer, the phase ends only through `endCurrent`. */
  durationMs: number;
  start: StartRule;
  config: JsonObject;
}

export const MAX_PHASES = 64;
export const PHASE_NAME_MAX_BYTES = 64;
/**
 * A year: longer than any phase a game means, short enough that start + duration
 * stays an exact integer; a larger value is a script bug better reported than kept.
 */
export const MAX_PHASE_MS = 365 * 24 * 3600 * 1000;

const PREV_ENDED: StartRule = { type: 'prev_ended' };

/**
 * Reads what `phases(config)` returned. Nothing (nil) and the empty table (which
 * arrives as `{}`) mean no phases and are no problem; any other non-list is
 * ignored with a problem. Bad entries are dropped or repaired, each with a
 * problem naming it by its Lua index, so one typo does not cost the whole list.
 */
export function parsePhases(value: JsonValue | undefined): { phases: PhaseSpec[]; problems: string[] } {
  const phases: PhaseSpec[] = [];
  const problems: string[] = [];
  if (value === undefined || value === null || isEmptyTable(value)) return { phases, problems };
  if (!Array.isArray(value)) {
    problems.push('phases() must return a list of {name, duration, start, config} tables; ignored');
    return { phases, problems };
  }
  for (let i = 0; i < value.length; i++) {
    const at = `phases[${i + 1}]`;
    if (phases.length === MAX_PHASES) {
      problems.push(`only the first ${MAX_PHASES} phases are kept; ${value.length - i} more ignored`);
      break;
    }
    const entry = value[i];
    if (!isObjectJson(entry)) {
      problems.push(`${at} is not a table; dropped`);
      continue;
    }
    const name = entry.name;
    if (typeof name !== 'string') {
      problems.push(`${at} has no string name; dropped`);
      continue;
    }
    if (!validName(name)) {
      problems.push(`${at}: name must be 1-${PHASE_NAME_MAX_BYTES} bytes of printable text; dropped`);
      continue;
    }
    const named = `${at} (${name})`;
    phases.push({
      name,
      durationMs: readDuration(entry.duration, named, problems),
      start: readStart(entry.start, named, problems),
      config: readConfig(entry.config, named, problems),
    });
  }
  return { phases, problems };
}


function isEmptyTable(v: JsonValue): boolean {
  return isObjectJson(v) && Object.keys(v).length === 0;
}

function validName(name: string): boolean {
  // Names reach logs, callbacks and every client's screen: control characters
  // there are never intended, and unpaired surrogates cannot be stored or sent as UTF-8.
  return name.length > 0 && byteLength(name) <= PHASE_NAME_MAX_BYTES && isStorableText(name) && !/\p{Cc}/u.test(name);
}

/** A millisecond count clamped to [0, MAX_PHASE_MS]; a fraction rounds up so a tiny positive value never reads as 0 ("no timer"). */
function clampMs(ms: number, what: string, problems: string[]): number {
  if (ms < 0) {
    problems.push(`${what} is negative; 0 used`);
    return 0;
  }
  if (ms > MAX_PHASE_MS) {
    problems.push(`${what} is over ${MAX_PHASE_MS} ms; ${MAX_PHASE_MS} used`);
    return MAX_PHASE_MS;
  }
  return Math.ceil(ms);
}

function readDuration(raw: JsonValue | undefined, named: string, problems: string[]): number {
  if (raw === undefined) return 0;
  if (typeof raw !== 'number') {
    problems.push(`${named}: duration is not a number; 0 (no timer) used`);
    return 0;
  }
  return clampMs(raw, `${named}: duration`, problems);
}

function readStart(raw: JsonValue | undefined, named: string, problems: string[]): StartRule {
  if (raw === undefined || raw === 'prev_ended') return PREV_ENDED;
  if (raw === 'all_ready') return { type: 'all_ready' };
  if (typeof raw === 'number') return { type: 'timer', ms: clampMs(raw, `${named}: start timer`, problems) };
  if (isObjectJson(raw)) {
    const { players, timer } = raw;
    if (players !== undefined && timer !== undefined) {
      problems.push(`${named}: start names both players and timer; prev_ended used`);
      return PREV_ENDED;
    }
    if (typeof timer === 'number') return { type: 'timer', ms: clampMs(timer, `${named}: start timer`, problems) };
    if (typeof players === 'number') {
      if (players < 1) problems.push(`${named}: start players is below 1; 1 used`);
      // "At least 2.5 players" can only mean 3.
      return { type: 'players', count: Math.max(1, Math.ceil(players)) };
    }
  }
  problems.push(`${named}: start must be "prev_ended", "all_ready", a number of ms, { players = N } or { timer = ms }; prev_ended used`);
  return PREV_ENDED;
}

function readConfig(raw: JsonValue | undefined, named: string, problems: string[]): JsonObject {
  if (raw === undefined) return {};
  // An empty Lua table nested in the list encodes as [] (only an empty value as a whole is {}): still an empty config.
  const config = asObjectJson(raw);
  if (config) return config;
  problems.push(`${named}: config is not a table of named values; {} used`);
  return {};
}

// ---- a running sequence ----------------------------------------------------------

/** One step: a phase ended, one started, or both at the same instant (ended first). */
export interface PhaseTransition {
  ended: string | null;
  started: string | null;
  /** When it happened: a timer's due time, even when `advance` is called later. */
  at: number;
}

export type PhaseStatus = 'waiting' | 'active' | 'complete';

/** What the player set looks like to a start rule. */
interface Presence {
  count: number;
  allReady: boolean;
}

/**
 * The state of one instance's phases. Transitions are timed exactly: when
 * `advance` runs late, a timer that fell due earlier ends its phase at its due
 * time and the phases after it are scheduled from there, so a host that sleeps
 * until `wakeAt()` or one that ticks loosely see the same sequence.
 *
 * Player-set and readiness changes take effect at the next `advance` (or
 * `endCurrent`): until then the set as of the previous call holds, so call it
 * right after the change.
 *
 * Readiness is consumed when it starts an `all_ready` phase: a later
 * `all_ready` phase waits for everyone to say ready again, though a player may
 * say it early (during the phases before it).
 */
export class PhaseClock {
  readonly phases: readonly PhaseSpec[];
  #index = 0;
  #status: PhaseStatus = 'waiting';
  /** Waiting: when the wait began. Active: when the phase started. */
  #since: number;
  /** When the active phase's timer ends it; null when it has none. */
  #endsAt: number | null = null;
  #lastNow: number;
  readonly #present = new Set<string>();
  /** Always a subset of #present, so "everyone is ready" is a size comparison. */
  readonly #ready = new Set<string>();
  /** The player set as the previous call left it: what held between that call and this one. */
  #settled: Presence = { count: 0, allReady: false };
  /** The transitions at creation, handed out by the first `advance`. */
  #pending: PhaseTransition[] = [];

  /** Throws on an empty list: an instance without phases has no clock. */
  constructor(phases: readonly PhaseSpec[], now: number) {
    if (phases.length === 0) throw new RangeError('a PhaseClock needs at least one phase');
    this.phases = phases.map(saneSpec);
    this.#since = now;
    this.#lastNow = now;
    this.#run(now, this.#settled, -Infinity, this.#pending);
  }

  get complete(): boolean {
    return this.#status === 'complete';
  }

  get status(): PhaseStatus {
    return this.#status;
  }

  /** The phase running or waiting to start; null once complete. */
  get current(): PhaseSpec | null {
    return this.phases[this.#index] ?? null;
  }

  /** Replaces the player set; readiness of those who left is forgotten. */
  setPlayers(playerIds: Iterable<string>): void {
    this.#present.clear();
    for (const id of playerIds) this.#present.add(id);
    for (const id of this.#ready) if (!this.#present.has(id)) this.#ready.delete(id);
  }

  /** False when the player is not present (their word is not kept). */
  setReady(playerId: string, ready: boolean): boolean {
    if (!this.#present.has(playerId)) return false;
    if (ready) this.#ready.add(playerId);
    else this.#ready.delete(playerId);
    return true;
  }

  isReady(playerId: string): boolean {
    return this.#ready.has(playerId);
  }

  /** Moves time and the player set forward; returns the transitions in order (several may happen in one call). */
  advance(now: number): PhaseTransition[] {
    const out = this.#pending;
    this.#pending = [];
    // A clock that steps backwards must not run the schedule backwards.
    const at = Math.max(now, this.#lastNow);
    this.#lastNow = at;
    // First up to now with the set that held since the last call, then at now with the new one.
    this.#run(at, this.#settled, -Infinity, out);
    this.#run(at, this.#presence(), at, out);
    this.#settled = this.#presence();
    return out;
  }

  /**
   * Ends the active phase now (a script asked), then behaves as on its timer.
   * Time is caught up first, so this ends the phase active at `now`; when none
   * is (waiting, complete) only the caught-up transitions are returned.
   */
  endCurrent(now: number): PhaseTransition[] {
    const out = this.advance(now);
    if (this.#status !== 'active') return out;
    this.#end(this.#lastNow, out);
    this.#run(this.#lastNow, this.#settled, -Infinity, out);
    this.#settled = this.#presence();
    return out;
  }

  /** When a timer next moves the sequence (a phase's end or a timed start), or null: the host's next wake-up. */
  wakeAt(): number | null {
    let due: number | null = null;
    if (this.#status === 'active') due = this.#endsAt;
    else if (this.#status === 'waiting') {
      const rule = this.phases[this.#index]!.start;
      if (rule.type === 'timer') due = this.#since + rule.ms;
    }
    // A host timer given Infinity fires at once (Node clamps it to 1 ms): never is null.
    return due !== null && Number.isFinite(due) ? due : null;
  }

  /** The `world.phase_changed` payload (without world_id). */
  payload(now: number): JsonObject {
    const phase = this.phases[this.#index];
    if (this.#status === 'complete' || !phase) return { status: 'complete', phase: null };
    if (this.#status === 'waiting') return { status: 'waiting', phase: phase.name, start_condition: startCondition(phase.start) };
    return { status: 'active', phase: phase.name, remaining_ms: this.#remaining(now), config: phase.config, timers: {} };
  }

  /** The cut-down listing form. */
  listing(now: number): JsonObject {
    const phase = this.phases[this.#index];
    if (this.#status === 'complete' || !phase) return { status: 'complete', phase: null };
    if (this.#status === 'waiting') return { status: 'waiting', phase: phase.name, start_condition: startCondition(phase.start) };
    return { status: 'active', phase: phase.name, remaining_ms: this.#remaining(now) };
  }

  #remaining(now: number): number | null {
    if (this.#endsAt === null) return null;
    // A clock read from before the start (it stepped back) still shows at most the whole duration.
    return Math.min(this.#endsAt - this.#since, Math.max(0, Math.ceil(this.#endsAt - now)));
  }

  #presence(): Presence {
    return { count: this.#present.size, allReady: this.#present.size > 0 && this.#ready.size === this.#present.size };
  }

  /**
   * Runs the sequence up to `horizon` with `presence` as the player set, which
   * holds from `heldFrom` on: a rule on players met by a set that held all
   * along starts the phase when its wait began, one met only by a new set
   * starts it when that set arrived.
   * Each pass either stops or moves one state forward through a finite list,
   * so the loop is bounded by the phase count whatever the durations.
   */
  #run(horizon: number, presence: Presence, heldFrom: number, out: PhaseTransition[]): void {
    for (let steps = 0; steps <= 2 * this.phases.length + 1; steps++) {
      if (this.#status === 'complete') return;
      if (this.#status === 'active') {
        if (this.#endsAt === null || this.#endsAt > horizon) return;
        this.#end(this.#endsAt, out);
        continue;
      }
      const phase = this.phases[this.#index]!;
      const startAt = this.#startTime(phase.start, presence, heldFrom);
      if (startAt === null || startAt > horizon) return;
      this.#start(phase, startAt, out);
    }
  }

  #startTime(rule: StartRule, presence: Presence, heldFrom: number): number | null {
    const since = this.#since;
    switch (rule.type) {
      case 'prev_ended':
        return since;
      case 'timer':
        return since + rule.ms;
      case 'players':
        return presence.count >= rule.count ? Math.max(since, heldFrom) : null;
      case 'all_ready':
        return presence.allReady ? Math.max(since, heldFrom) : null;
    }
  }

  #start(phase: PhaseSpec, at: number, out: PhaseTransition[]): void {
    if (phase.start.type === 'all_ready') this.#ready.clear();
    this.#status = 'active';
    this.#since = at;
    this.#endsAt = phase.durationMs > 0 ? at + phase.durationMs : null;
    // The end of the phase before, at this same instant, is one step with this start.
    const last = out.at(-1);
    if (last && last.started === null && last.ended !== null && last.at === at) last.started = phase.name;
    else out.push({ ended: null, started: phase.name, at });
  }

  #end(at: number, out: PhaseTransition[]): void {
    out.push({ ended: this.phases[this.#index]!.name, started: null, at });
    this.#index++;
    this.#endsAt = null;
    this.#since = at;
    this.#status = this.#index < this.phases.length ? 'waiting' : 'complete';
  }
}

/** The instance VM a clock drives (the world VM, a match VM). */
export interface PhaseScript {
  phase(callback: 'on_phase_started' | 'on_phase_ended', name: string): unknown;
}

/**
 * Moves the clock to `now` and calls the script once per transition, in
 * order, an end before the start it shares an instant with. True when
 * anything moved, so the host knows to tell its players.
 */
export function runTransitions(clock: PhaseClock, now: number, script: PhaseScript): boolean {
  const transitions = clock.advance(now);
  for (const t of transitions) {
    if (t.ended !== null) script.phase('on_phase_ended', t.ended);
    if (t.started !== null) script.phase('on_phase_started', t.started);
  }
  return transitions.length > 0;
}

/**
 * Specs built in code skip parsePhases. Only what would break the schedule is
 * mended: a duration that is not a positive number means no timer, and a timed
 * start before the previous end (negative, NaN) means at once.
 */
function saneSpec(p: PhaseSpec): PhaseSpec {
  const durationMs = Number.isFinite(p.durationMs) && p.durationMs > 0 ? p.durationMs : 0;
  const start = p.start.type === 'timer' && !(p.start.ms >= 0) ? { type: 'timer' as const, ms: 0 } : p.start;
  return durationMs === p.durationMs && start === p.start ? p : { ...p, durationMs, start };
}

function startCondition(rule: StartRule): JsonValue {
  switch (rule.type) {
    case 'prev_ended':
    case 'all_ready':
      return rule.type;
    case 'timer':
      return { type: 'timer', value: rule.ms };
    case 'players':
      return { type: 'players', value: rule.count };
  }
}
