/**
 * A match's share of its script lane (docs/decisions/0052). The per-callback
 * deadline bounds one call; this bounds how much of the lane's time one
 * match takes over many. Each match earns credit at its share of the lane's
 * time and pays for the time its ticks hold the lane; a match out of credit
 * has its ticks throttled (not run) until it has earned them back, so what
 * it overspends comes out of its own ticks, not its neighbours'.
 *
 * A lane cannot interrupt a tick, so a tick longer than one period costs
 * every neighbour whole ticks however it is paid for afterwards. Such ticks
 * draw on a second allowance, the lane's own: together they may take
 * OVERRUN_SHARE of its time, so a neighbour loses at most that share of its
 * ticks to them however many matches overrun. A match is held to it once it
 * has overrun twice in a row: one overrun may be a collection or the thread
 * losing its core in the middle of an honest tick.
 */

/** The least share a match is given, however many share its lane: 5 ms of each period, far above any honest tick. */
const SHARE_FLOOR = 0.05;
/** The lane's time that ticks longer than one period may take together: half of the 1 % a p99 leaves. */
const OVERRUN_SHARE = 0.005;
/** Ticks in a row longer than a period after which a match is held to the lane's allowance for them. */
const OVERRUNS_HELD = 2;

/** Why a tick was not run: its match spent more than its share, or its ticks overrun a period and the lane's allowance for those is spent. */
export type ThrottleReason = 'share' | 'overrun';

/** One match's account: credit in lane milliseconds as of `at` (performance.now()), and how many of its last ticks run overran a period. */
export interface ShareAccount {
  credit: number;
  at: number;
  overruns: number;
}

export class LaneShares {
  #overrun: number;
  #overrunAt: number;

  /** `periodMs`: the tick period; credit saved up (a match's, the lane's) is capped at one period, so an occasional slow tick is free. */
  constructor(
    private readonly periodMs: number,
    now: number,
  ) {
    this.#overrun = periodMs;
    this.#overrunAt = now;
  }

  account(now: number): ShareAccount {
    return { credit: this.periodMs, at: now, overruns: 0 };
  }

  /**
   * Null if a match may run a tick now, else why not; `tenants` are the
   * matches and worlds on the lane. Its share is an equal split of the lane
   * between them, never below SHARE_FLOOR. A match alone on its lane has no
   * neighbour to protect: it always runs and owes nothing.
   */
  admit(account: ShareAccount, now: number, tenants: number): ThrottleReason | null {
    if (tenants <= 1) {
      account.credit = this.periodMs;
      account.at = now;
      account.overruns = 0;
      return null;
    }
    const share = Math.max(1 / tenants, SHARE_FLOOR);
    account.credit = Math.min(this.periodMs, account.credit + (now - account.at) * share);
    account.at = now;
    if (account.credit < 0) return 'share';
    if (account.overruns < OVERRUNS_HELD) return null;
    this.#overrun = Math.min(this.periodMs, this.#overrun + (now - this.#overrunAt) * OVERRUN_SHARE);
    this.#overrunAt = now;
    return this.#overrun >= 0 ? null : 'overrun';
  }

  /**
   * Charges a tick that held the lane `ms` (one `admit` let through with
   * neighbours). The match pays for at most one period of it: the rest is
   * the lane allowance's, so one collection pause in an honest tick does not
   * leave its match seconds in debt.
   */
  charge(account: ShareAccount, ms: number, tenants: number): void {
    if (tenants <= 1) return;
    account.credit -= Math.min(ms, this.periodMs);
    if (ms <= this.periodMs) return void (account.overruns = 0);
    account.overruns++;
    this.#overrun -= ms;
  }
}
