import type { Ctx } from '../../runtime/contracts/context';
import { flushBoards, reloadBoards, type FlushOutcome } from '../../runtime/leaderboards/entries';
import { IntervalJob } from './interval-job';

/** The first window: the first flush comes at most this long (30 s) after boot, whatever the interval. */
const FIRST_WINDOW_MS = 30_000;

/**
 * Keeps the table behind this node's leaderboards: reloads every board at
 * boot, writes changed entries every `leaderboard_flush_interval_ms` (the
 * first time within 30 s) and once more on graceful shutdown, after the
 * matches whose scripts submit scores have stopped. A crash loses what was
 * submitted since the last flush: at most one interval.
 */
export class LeaderboardFlush {
  readonly #job = new IntervalJob(() => this.#pass());
  #first: ReturnType<typeof setTimeout> | null = null;
  #started = false;

  constructor(
    private readonly ctx: Ctx,
    /** Whether this node writes the table: on a fleet one node does (host/fleet/leaderboards.ts). */
    private readonly writes: () => boolean = () => true,
  ) {}

  async reload(): Promise<void> {
    const started = Date.now();
    const entries = await reloadBoards(this.ctx.db, this.ctx.leaderboards);
    this.ctx.log.info('leaderboards_loaded', { entries, ms: Date.now() - started });
  }

  start(): void {
    if (this.#started) return;
    this.#started = true;
    const interval = this.ctx.settings.leaderboard_flush_interval_ms;
    if (interval <= FIRST_WINDOW_MS) return this.#job.start(interval);
    this.#first = setTimeout(() => {
      void this.#job.run();
      this.#job.start(interval);
    }, FIRST_WINDOW_MS);
    this.#first.unref?.();
  }

  /** One pass now; a call while a pass runs joins it. */
  flush(): Promise<FlushOutcome> {
    return this.#job.run();
  }

  /** Stops the interval and writes what changed since the last pass. */
  async stop(): Promise<void> {
    if (this.#first) clearTimeout(this.#first);
    await this.#job.stop();
    if (this.#started) await this.flush();
  }

  async #pass(): Promise<FlushOutcome> {
    // Another node writes; this one keeps its changed marks in case it becomes the writer.
    if (!this.writes()) return { written: 0, dropped: 0, failed: 0 };
    const started = Date.now();
    const outcome = await flushBoards(this.ctx.db, this.ctx.leaderboards, this.ctx.ids, this.ctx.log);
    if (outcome.written + outcome.dropped + outcome.failed > 0) this.ctx.log.info('leaderboards_flushed', { ...outcome, ms: Date.now() - started });
    return outcome;
  }
}
