/**
 * A match's share of its script lane (docs/decisions/0052). The per-callback
 * deadline bounds one call; this bounds how much of the lane's time one
 * match takes over many. Each match earns credit at its share of the lane's
 * time and pays for the time its ticks hold the lane; a match out of credit
 * has its ticks throttled (not run) until it has earned them back, so what
 * it overspends comes out of its own ticks, not its neighbours'.
 */

/** The least share a match is given, however many share its lane: 5 % of the lane, far above any honest tick. */
const SHARE_FLOOR = 0.05;

/** One match's account: credit in lane milliseconds, as of `at` (performance.now()). */
export interface ShareAccount {
  credit: number;
  at: number;
}

export class LaneShares {
  /** `periodMs`: the tick period. Credit saved up by a match using less than its share is capped at one period, so an occasional slow tick is free. */
  constructor(private readonly periodMs: number) {}

  account(now: number): ShareAccount {
    return { credit: this.periodMs, at: now };
  }

  /**
   * Whether a match may run a tick now. Its share is an equal split of the
   * lane between the matches and worlds on it, never below SHARE_FLOOR; a
   * match alone on its lane has no neighbour to protect and always runs.
   */
  admit(account: ShareAccount, now: number, tenants: number): boolean {
    if (tenants <= 1) return true;
    const share = Math.max(1 / tenants, SHARE_FLOOR);
    account.credit = Math.min(this.periodMs, account.credit + (now - account.at) * share);
    account.at = now;
    return account.credit >= 0;
  }

  /**
   * Charges a tick that held the lane `ms`. A lane cannot interrupt a tick,
   * so past one period every neighbour lost whole ticks to it, more the
   * longer it ran: the charge grows with the square of its length (a 500 ms
   * tick pays for 2.5 s of the lane).
   */
  charge(account: ShareAccount, ms: number): void {
    account.credit -= ms > this.periodMs ? (ms * ms) / this.periodMs : ms;
  }
}
