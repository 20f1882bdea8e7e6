/**
 * The vote engine: pure, fed plain inputs (a config, the eligible voters,
 * casts with the time they arrived, a random source) and answering plain
 * values. It knows nothing of matches, sockets or the database, so the
 * match host drives it today and a world can drive it the same way.
 */
import { byteLength } from '../contracts/frame-envelope';
import { asObjectJson, type JsonValue } from '../lua/host-interface';
import { isUuid } from '../platform/ids';

export type VoteMethod = 'plurality' | 'approval' | 'weighted' | 'ranked';
export type VoteVisibility = 'live' | 'hidden';
/** `ready_up` closes once every eligible voter has cast (not before `min_window_ms`). */
export type WindowType = 'fixed' | 'ready_up';
export type TieBreaker = 'first' | 'random';

export interface VoteOption {
  id: string;
  label: string;
}

export interface VoteConfig {
  /** The script's own id (a UUID), or null for the host to mint one. */
  vote_id: string | null;
  template: string;
  options: VoteOption[];
  method: VoteMethod;
  visibility: VoteVisibility;
  window_ms: number;
  window_type: WindowType;
  min_window_ms: number;
  max_revotes: number;
  veto_enabled: boolean;
  tie_breaker: TieBreaker;
  /** Share of the eligible voters that must cast, 0 for none. */
  quorum: number;
  require_supermajority: boolean;
  /** Share of the votes the winner needs when `require_supermajority`. */
  supermajority: number;
  /** `weighted`: a voter's weight, 1 when absent. */
  weights: Record<string, number>;
  /** Who may vote, among the players present when it opens; null for all of them. */
  voters: string[] | null;
}

/** Casts this long after the window closes still count; the vote resolves when it ends. */
export const LATE_CAST_GRACE_MS = 500;
export const DEFAULT_WINDOW_MS = 15_000;
export const DEFAULT_MAX_REVOTES = 3;
const MIN_WINDOW_MS = 100;
const MAX_WINDOW_MS = 600_000;
const MAX_OPTIONS = 32;
const ID_MAX_BYTES = 64;
const LABEL_MAX_CHARS = 256;
const DEFAULT_SUPERMAJORITY = 2 / 3;
const METHODS: readonly VoteMethod[] = ['plurality', 'approval', 'weighted', 'ranked'];

export type ConfigOutcome = { ok: true; config: VoteConfig } | { ok: false; problem: string };

/**
 * Reads what `vote_requested` returned. `null` means "no vote" (nil, false,
 * an empty table); a table that asks for a vote but cannot describe one is a
 * problem the host logs. Unknown keys are ignored.
 */
export function parseVoteConfig(raw: JsonValue): ConfigOutcome | null {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw) || Object.keys(raw).length === 0) return null;
  const problem = (p: string): ConfigOutcome => ({ ok: false, problem: p });
  const options = parseOptions(raw.options);
  if (typeof options === 'string') return problem(options);
  const method = raw.method ?? 'plurality';
  if (typeof method !== 'string' || !METHODS.includes(method as VoteMethod)) return problem(`method must be one of ${METHODS.join(', ')}`);
  const visibility = raw.visibility ?? 'live';
  if (visibility !== 'live' && visibility !== 'hidden') return problem('visibility must be live or hidden');
  const windowMs = integerIn(raw.window_ms, DEFAULT_WINDOW_MS, MIN_WINDOW_MS, MAX_WINDOW_MS);
  if (windowMs === null) return problem(`window_ms must be an integer from ${MIN_WINDOW_MS} to ${MAX_WINDOW_MS}`);
  const minWindow = integerIn(raw.min_window_ms, 0, 0, windowMs);
  if (minWindow === null) return problem('min_window_ms must be an integer from 0 to window_ms');
  const maxRevotes = integerIn(raw.max_revotes, DEFAULT_MAX_REVOTES, 0, 1000);
  if (maxRevotes === null) return problem('max_revotes must be a non-negative integer');
  const quorum = shareOf(raw.quorum, 0);
  if (quorum === null) return problem('quorum must be a number from 0 to 1');
  const supermajority = shareOf(raw.supermajority, DEFAULT_SUPERMAJORITY);
  if (supermajority === null) return problem('supermajority must be a number from 0 to 1');
  const weights = parseWeights(raw.weights);
  if (weights === null) return problem('weights must map player ids to non-negative numbers');
  const voters = raw.voters === undefined ? null : stringList(raw.voters);
  if (voters === undefined) return problem('voters must be a list of player ids');
  const template = raw.template ?? 'default';
  if (typeof template !== 'string' || template.length === 0 || byteLength(template) > ID_MAX_BYTES) return problem(`template must be a string of 1-${ID_MAX_BYTES} bytes`);
  return {
    ok: true,
    config: {
      vote_id: isUuid(raw.vote_id) ? raw.vote_id.toLowerCase() : null,
      template,
      options,
      method: method as VoteMethod,
      visibility,
      window_ms: windowMs,
      window_type: raw.window_type === 'ready_up' ? 'ready_up' : 'fixed',
      min_window_ms: minWindow,
      max_revotes: maxRevotes,
      veto_enabled: raw.veto_enabled === true,
      tie_breaker: raw.tie_breaker === 'random' ? 'random' : 'first',
      quorum,
      require_supermajority: raw.require_supermajority === true,
      supermajority,
      weights,
      voters,
    },
  };
}

function parseOptions(raw: JsonValue | undefined): VoteOption[] | string {
  if (!Array.isArray(raw) || raw.length < 2 || raw.length > MAX_OPTIONS) return `options must be a list of 2-${MAX_OPTIONS} {id, label} tables`;
  const seen = new Set<string>();
  const out: VoteOption[] = [];
  for (const entry of raw) {
    // A bare string is an option whose label is its id.
    const id = typeof entry === 'string' ? entry : entry !== null && typeof entry === 'object' && !Array.isArray(entry) ? entry.id : undefined;
    if (typeof id !== 'string' || id.length === 0 || byteLength(id) > ID_MAX_BYTES) return `option ids must be strings of 1-${ID_MAX_BYTES} bytes`;
    if (seen.has(id)) return `option id '${id}' appears twice`;
    seen.add(id);
    const label = typeof entry === 'object' && entry !== null && !Array.isArray(entry) && typeof entry.label === 'string' ? entry.label.slice(0, LABEL_MAX_CHARS) : id;
    out.push({ id, label });
  }
  return out;
}

function integerIn(raw: JsonValue | undefined, fallback: number, min: number, max: number): number | null {
  if (raw === undefined) return fallback;
  return typeof raw === 'number' && Number.isInteger(raw) && raw >= min && raw <= max ? raw : null;
}

function shareOf(raw: JsonValue | undefined, fallback: number): number | null {
  if (raw === undefined) return fallback;
  return typeof raw === 'number' && raw >= 0 && raw <= 1 ? raw : null;
}

function parseWeights(raw: JsonValue | undefined): Record<string, number> | null {
  if (raw === undefined) return {};
  // An empty Lua table nested in the config arrives as [] (only an empty value as a whole is {}): no weights.
  const weights = asObjectJson(raw);
  if (!weights) return null;
  const out: Record<string, number> = {};
  for (const [id, w] of Object.entries(weights)) {
    if (typeof w !== 'number' || !Number.isFinite(w) || w < 0) return null;
    out[id] = w;
  }
  return out;
}

/** A list of strings, or undefined when it is not one (an empty Lua table arrives as `{}`). */
function stringList(raw: JsonValue): string[] | undefined {
  if (raw !== null && typeof raw === 'object' && !Array.isArray(raw) && Object.keys(raw).length === 0) return [];
  if (!Array.isArray(raw) || !raw.every((v): v is string => typeof v === 'string')) return undefined;
  return raw;
}

// ---- a vote in progress --------------------------------------------------------

/** One voter's choice: an option id (plurality, weighted) or an ordered list of them (approval, ranked). */
export type Choice = string | string[];

export type CastRefusal = 'invalid_option' | 'not_eligible' | 'rate_limited' | 'vote_closed';
export type VetoRefusal = 'veto_disabled' | 'not_eligible' | 'vote_closed';

export type ResultStatus = 'no_quorum' | 'no_consensus';

export interface VoteResult {
  vote_id: string;
  winner: string | null;
  counts: Record<string, number>;
  distribution: Record<string, number>;
  /** Voters who cast. */
  total_votes: number;
  /** total_votes / eligible voters; 0 when nobody was eligible. */
  turnout: number;
  /** Why there is no winner. */
  status?: ResultStatus;
  /** `ranked`: the counts of each instant-runoff round, the first round first. */
  rounds?: Record<string, number>[];
}

interface Ballot {
  choice: Choice;
  /** Casts after the first. */
  changes: number;
}

export class Vote {
  readonly id: string;
  readonly config: VoteConfig;
  readonly eligible: ReadonlySet<string>;
  readonly openedAt: number;
  /** When the window closes; casts are taken `LATE_CAST_GRACE_MS` longer. */
  readonly windowEndsAt: number;
  readonly #ballots = new Map<string, Ballot>();
  readonly #optionIds: ReadonlySet<string>;

  /** `present`: who could vote when it opened; `voters` in the config narrows it. */
  constructor(id: string, config: VoteConfig, present: Iterable<string>, openedAt: number) {
    this.id = id;
    this.config = config;
    const allowed = config.voters ? new Set(config.voters) : null;
    this.eligible = new Set([...present].filter((p) => !allowed || allowed.has(p)));
    this.openedAt = openedAt;
    this.windowEndsAt = openedAt + config.window_ms;
    this.#optionIds = new Set(config.options.map((o) => o.id));
  }

  /** No cast is taken from this instant on. */
  get acceptsUntil(): number {
    return this.windowEndsAt + LATE_CAST_GRACE_MS;
  }

  get totalVotes(): number {
    return this.#ballots.size;
  }

  /** When the vote should resolve, given the casts so far. */
  closesAt(): number {
    if (this.config.window_type === 'ready_up' && this.eligible.size > 0 && this.#ballots.size === this.eligible.size) {
      return Math.min(this.acceptsUntil, this.openedAt + this.config.min_window_ms);
    }
    return this.acceptsUntil;
  }

  cast(voter: string, choice: unknown, now: number): { ok: true } | { ok: false; reason: CastRefusal } {
    const normal = this.#normalise(choice);
    if (normal === null) return { ok: false, reason: 'invalid_option' };
    if (!this.eligible.has(voter)) return { ok: false, reason: 'not_eligible' };
    const previous = this.#ballots.get(voter);
    if (previous && previous.changes >= this.config.max_revotes) return { ok: false, reason: 'rate_limited' };
    if (now > this.acceptsUntil) return { ok: false, reason: 'vote_closed' };
    this.#ballots.set(voter, { choice: normal, changes: previous ? previous.changes + 1 : 0 });
    return { ok: true };
  }

  /** Whether this voter may veto now (the host holds the tokens). */
  vetoRefusal(voter: string, now: number): VetoRefusal | null {
    if (!this.config.veto_enabled) return 'veto_disabled';
    if (!this.eligible.has(voter)) return 'not_eligible';
    if (now > this.acceptsUntil) return 'vote_closed';
    return null;
  }

  timeRemaining(now: number): number {
    return Math.max(0, this.windowEndsAt - now);
  }

  /** Every voter's current choice. */
  votesCast(): Record<string, Choice> {
    const out: Record<string, Choice> = {};
    for (const [voter, b] of this.#ballots) out[voter] = b.choice;
    return out;
  }

  /** The running count per option (a ranked ballot counts for its first choice). */
  tallies(): Record<string, number> {
    const counts = this.#zero();
    for (const [voter, b] of this.#ballots) {
      if (this.config.method === 'approval') for (const id of b.choice as string[]) counts[id]! += 1;
      else if (this.config.method === 'ranked') counts[(b.choice as string[])[0]!]! += 1;
      else counts[b.choice as string]! += this.#weight(voter);
    }
    return counts;
  }

  /** The outcome; `random` in [0, 1) breaks ties when the config asks for it. */
  result(random: () => number): VoteResult {
    const counts = this.tallies();
    const base = {
      vote_id: this.id,
      counts,
      distribution: shares(counts),
      total_votes: this.#ballots.size,
      turnout: this.eligible.size === 0 ? 0 : this.#ballots.size / this.eligible.size,
    };
    if (this.#ballots.size === 0 || base.turnout < this.config.quorum) return { ...base, winner: null, status: 'no_quorum' };
    const { standing, share, rounds } = this.config.method === 'ranked' ? this.#runoff() : this.#leaders(counts);
    const extra = rounds ? { rounds } : {};
    if (this.config.require_supermajority && share < this.config.supermajority) return { ...base, ...extra, winner: null, status: 'no_consensus' };
    const winner = this.config.tie_breaker === 'random' ? standing[Math.floor(random() * standing.length)]! : standing[0]!;
    return { ...base, ...extra, winner };
  }

  /** The options with the highest count, in option order, and their share of what was counted. */
  #leaders(counts: Record<string, number>): { standing: string[]; share: number; rounds?: undefined } {
    const top = Math.max(...Object.values(counts));
    const standing = this.config.options.map((o) => o.id).filter((id) => counts[id] === top);
    // Approval: the share of voters who approved the leader; otherwise its share of the votes (or weight).
    const whole = this.config.method === 'approval' ? this.#ballots.size : sum(counts);
    return { standing, share: whole === 0 ? 0 : top / whole };
  }

  /**
   * Instant runoff: each round counts every ballot for its highest-ranked
   * option still standing; an option past half of those ballots wins, else the
   * option with the fewest is dropped (of several, the one listed last).
   */
  #runoff(): { standing: string[]; share: number; rounds: Record<string, number>[] } {
    let remaining = this.config.options.map((o) => o.id);
    const rounds: Record<string, number>[] = [];
    for (;;) {
      const round: Record<string, number> = Object.fromEntries(remaining.map((id) => [id, 0]));
      let counted = 0;
      for (const b of this.#ballots.values()) {
        const pick = (b.choice as string[]).find((id) => id in round);
        if (pick === undefined) continue;
        round[pick]! += 1;
        counted++;
      }
      rounds.push(round);
      const top = Math.max(...remaining.map((id) => round[id]!));
      const leaders = remaining.filter((id) => round[id] === top);
      const share = counted === 0 ? 0 : top / counted;
      if (share > 0.5 || remaining.length === leaders.length) return { standing: leaders, share, rounds };
      const low = Math.min(...remaining.map((id) => round[id]!));
      const dropped = remaining.filter((id) => round[id] === low).at(-1);
      remaining = remaining.filter((id) => id !== dropped);
    }
  }

  #normalise(choice: unknown): Choice | null {
    const known = (id: unknown): id is string => typeof id === 'string' && this.#optionIds.has(id);
    if (this.config.method === 'plurality' || this.config.method === 'weighted') return known(choice) ? choice : null;
    const list = typeof choice === 'string' ? [choice] : choice;
    if (!Array.isArray(list) || list.length === 0 || !list.every(known)) return null;
    return new Set(list).size === list.length ? [...list] : null;
  }

  #weight(voter: string): number {
    return this.config.method === 'weighted' ? (this.config.weights[voter] ?? 1) : 1;
  }

  #zero(): Record<string, number> {
    return Object.fromEntries(this.config.options.map((o) => [o.id, 0]));
  }
}

function sum(counts: Record<string, number>): number {
  let total = 0;
  for (const v of Object.values(counts)) total += v;
  return total;
}

function shares(counts: Record<string, number>): Record<string, number> {
  const total = sum(counts);
  const out: Record<string, number> = {};
  for (const [id, n] of Object.entries(counts)) out[id] = total === 0 ? 0 : n / total;
  return out;
}

