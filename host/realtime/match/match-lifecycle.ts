/**
 * A match's lifecycle on this node, in one place: which stage it is in,
 * whether its script lets players in, and the timer and wheel place that
 * belong to a stage, so leaving the stage lets go of them.
 *
 *   created ──init ran──▶ waiting ──min_players──▶ running ──result──▶ finishing ──linger──▶ finished
 *      │                     │                        │                                      ▲
 *      └─ init failed ───────┴─ stopped (timeout, ────┴─ stopped (emptied) ──────────────────┘
 *                               emptied, join failed)
 *
 * `created`: the lane is building the VM; the match counts against
 * `match_max` but is neither listed nor found by id. `waiting`: joinable,
 * not ticking, until `min_players` or WAITING_TIMEOUT_MS. `running`: on the
 * tick wheel. `finishing`: the result is out and recorded; for a while the
 * match still answers `not_in_match`. `finished`: gone. A stop skips
 * `finishing`: no result, no record. The wire status is `waiting` until the
 * match runs, `finished` once it is over (`paused` is declared on the wire
 * and never reached).
 */
import type { LiveMatchStatus } from '../../../runtime/schemas/matches';
import type { WheelPlace } from '../lanes/tick-wheel';

export type MatchStage = 'created' | 'waiting' | 'running' | 'finishing' | 'finished';

const NEXT: Record<MatchStage, readonly MatchStage[]> = {
  created: ['waiting', 'finished'],
  waiting: ['running', 'finishing', 'finished'],
  running: ['finishing', 'finished'],
  finishing: ['finished'],
  finished: [],
};

const WIRE: Record<MatchStage, LiveMatchStatus> = {
  created: 'waiting',
  waiting: 'waiting',
  running: 'running',
  finishing: 'finished',
  finished: 'finished',
};

export class MatchLifecycle {
  #stage: MatchStage = 'created';
  #waitingTimer: ReturnType<typeof setTimeout> | null = null;
  #place: WheelPlace | null = null;
  /** The script's own lock (`game.set_joinable`); the stage decides the rest. */
  joinable = true;

  get stage(): MatchStage {
    return this.#stage;
  }

  /** The status listings and `match.joined` report. */
  get status(): LiveMatchStatus {
    return WIRE[this.#stage];
  }

  /** Its `init` ran: it can be found by id, and a lost worker ends it with a result. */
  get started(): boolean {
    return this.#stage !== 'created';
  }

  /** Waiting or running: listed, and a candidate for quick play. */
  get live(): boolean {
    return this.#stage === 'waiting' || this.#stage === 'running';
  }

  get running(): boolean {
    return this.#stage === 'running';
  }

  /** Finishing or finished: it answers `not_in_match` and takes nothing more. */
  get over(): boolean {
    return this.#stage === 'finishing' || this.#stage === 'finished';
  }

  /** created → waiting; `timedOut` runs if it is still waiting after `timeoutMs`. */
  open(timeoutMs: number, timedOut: () => void): void {
    this.#move('waiting');
    this.#waitingTimer = setTimeout(() => {
      this.#waitingTimer = null;
      if (this.#stage === 'waiting') timedOut();
    }, timeoutMs);
    this.#waitingTimer.unref();
  }

  /** waiting → running, ticking from `place` on the wheel. */
  run(place: WheelPlace): void {
    this.#move('running');
    this.#place = place;
  }

  /** → finishing: the match ended with a result. */
  finish(): void {
    this.#move('finishing');
  }

  /** → finished: stopped without a result, or done lingering. */
  end(): void {
    this.#move('finished');
  }

  /** Shutdown: every timer and wheel place goes, whatever the stage. */
  close(): void {
    this.#release();
  }

  #move(to: MatchStage): void {
    if (!NEXT[this.#stage].includes(to)) throw new Error(`match lifecycle: ${this.#stage} cannot go to ${to}`);
    this.#stage = to;
    this.#release();
  }

  /** What one stage held: none of it outlives the stage. */
  #release(): void {
    if (this.#waitingTimer) clearTimeout(this.#waitingTimer);
    this.#waitingTimer = null;
    if (this.#stage !== 'running') {
      this.#place?.remove();
      this.#place = null;
    }
  }
}
