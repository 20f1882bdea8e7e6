/**
 * A match's phases (declared once per match by `phases(config)` in a probe VM): the shared phase engine
 * (runtime/phases/phases.ts, the one worlds use) driven by one match VM.
 *
 * The clock is the match's own: it starts at 0 when the match is created
 * and moves 100 ms per tick that ran, as the reference says, so a match
 * that waits for players, or skips a tick under load, does not lose phase
 * time it never played. Joins and leaves move it too (a `{players = N}` or
 * `all_ready` start happens at the join that meets it). A player counts as
 * ready from their join, as in worlds: matches have no ready frame.
 */
import type { JsonObject } from '../../../runtime/lua/host-interface';
import type { MatchVm } from '../../../runtime/lua/match';
import { parsePhases, PhaseClock, runTransitions } from '../../../runtime/phases/phases';
import type { Logger } from '../../../runtime/platform/log';

export class MatchPhases {
  readonly #clock: PhaseClock;
  readonly #vm: MatchVm;
  /** Told the listing form after every transition (the main thread keeps it for `phase` in listings). */
  readonly #changed: (listing: JsonObject) => void;
  /** Match time: ms of ticks run since creation. */
  #now = 0;

  private constructor(clock: PhaseClock, vm: MatchVm, changed: (listing: JsonObject) => void) {
    this.#clock = clock;
    this.#vm = vm;
    this.#changed = changed;
  }

  /**
   * Asks the script for its phases (a probe VM) right after `init`, and
   * starts the first one at once, before any join. Null for a mode without
   * phases. Problems with the declaration are logged, never fatal.
   */
  static start(vm: MatchVm, log: Logger, changed: (listing: JsonObject) => void): MatchPhases | null {
    const declared = vm.probePhases();
    if (declared === undefined) return null;
    const { phases, problems } = parsePhases(declared);
    for (const problem of problems) log.warn('match_phases_problem', { match_id: vm.matchId, mode: vm.mode.name, problem });
    if (phases.length === 0) return null;
    const run = new MatchPhases(new PhaseClock(phases, 0), vm, changed);
    run.#advance();
    return run;
  }

  /** The roster changed (a join admitted `joined`, or someone left). */
  players(roster: Iterable<string>, joined: string | null): void {
    this.#clock.setPlayers(roster);
    if (joined !== null) this.#clock.setReady(joined, true);
    this.#advance();
  }

  /** One tick ran: 100 ms of match time. True once every phase has ended (the match finishes `phases_complete`). */
  tick(ms: number): boolean {
    this.#now += ms;
    this.#advance();
    return this.#clock.complete;
  }

  #advance(): void {
    if (runTransitions(this.#clock, this.#now, this.#vm)) this.#changed(this.#clock.listing(this.#now));
  }
}
