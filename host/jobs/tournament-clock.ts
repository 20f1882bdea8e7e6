import type { Ctx } from '../../runtime/contracts/context';
import { advanceTournaments, openTournaments, type Advanced, type StandingsSource } from '../../runtime/tournaments/tournaments';

/** The longest the clock sleeps: a declaration edited on another node, or a clock that jumped, is noticed within this. */
const MAX_SLEEP_MS = 60_000;
/** After a failed pass (the database away), the next try. */
const RETRY_MS = 5_000;

/**
 * Moves tournaments through their statuses on time: it sleeps until the
 * next `start_at` or `end_at` among the open ones (at most a minute), then
 * runs a pass. Nothing is kept but the table: at boot the first pass
 * catches up on whatever came due while no node was running, so a restart
 * neither skips a finish nor pays one twice (the finish itself is
 * exactly-once, runtime/tournaments/tournaments.ts).
 */
export class TournamentClock {
  #timer: ReturnType<typeof setTimeout> | null = null;
  #running: Promise<Advanced> | null = null;
  /** The one pass queued behind the running one, shared by every call made meanwhile. */
  #queued: Promise<Advanced> | null = null;
  #stopped = false;

  constructor(
    private readonly ctx: Pick<Ctx, 'db' | 'ids' | 'log' | 'clock'>,
    private readonly standings: StandingsSource,
  ) {}

  start(): void {
    this.#stopped = false;
    void this.tick();
  }

  /**
   * A pass that reads the clock at or after this call, then the clock
   * re-arms. A call while a pass runs does not join it (that pass may have
   * read the time before the clock moved, e.g. a boot pass): it waits for one
   * more pass after it, shared with every other call made meanwhile, so
   * passes never overlap on one node and a burst of calls costs one pass.
   */
  tick(): Promise<Advanced> {
    if (this.#stopped) return Promise.resolve({ activated: [], finished: [] });
    // A queued pass outlives the running one by a moment (it starts once that one settles): join it.
    if (this.#queued) return this.#queued;
    if (!this.#running) return this.#start();
    this.#queued ??= this.#running.then(() => {
      this.#queued = null;
      return this.#stopped ? { activated: [], finished: [] } : this.#start();
    });
    return this.#queued;
  }

  #start(): Promise<Advanced> {
    const run = this.#pass().finally(() => {
      if (this.#running === run) this.#running = null;
    });
    this.#running = run;
    return run;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#queued?.catch(() => {});
    await this.#running?.catch(() => {});
  }

  async #pass(): Promise<Advanced> {
    let sleep = RETRY_MS;
    try {
      const now = this.ctx.clock.now();
      const moved = await advanceTournaments(this.ctx, now, this.standings);
      if (moved.activated.length > 0) this.ctx.log.info('tournaments_started', { tournament_ids: moved.activated });
      sleep = await this.#untilNext();
      return moved;
    } catch (err) {
      this.ctx.log.error('tournament_clock_failed', { error: err instanceof Error ? err.message : String(err) });
      return { activated: [], finished: [] };
    } finally {
      this.#arm(sleep);
    }
  }

  async #untilNext(): Promise<number> {
    const now = this.ctx.clock.now();
    let next = now + MAX_SLEEP_MS;
    for (const t of await openTournaments(this.ctx.db)) {
      const due = new Date(t.status === 'pending' ? t.start_at : t.end_at).getTime();
      next = Math.min(next, due);
    }
    return Math.max(0, next - now);
  }

  #arm(ms: number): void {
    if (this.#stopped) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.tick(), ms);
    this.#timer.unref?.();
  }
}
