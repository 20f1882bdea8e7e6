import type { Ctx } from '../../runtime/contracts/context';
import { eraseInactiveGuest, findInactiveGuests, REAP_BATCH } from '../../runtime/accounts/guests';
import { IntervalJob } from './interval-job';

export interface ReapPass {
  deleted: number;
  skipped: number;
  failed: number;
}

/**
 * Erases unclaimed guests unseen for `guest_reap_after` seconds, at most 500
 * per pass, each through the one erasure function in its
 * own transaction with the unclaimed check re-run inside. Time comes from
 * `ctx.clock`, so tests move it; passes never overlap. The sweep writes no
 * audit row: it logs what it did.
 */
export class GuestReaper {
  readonly #job = new IntervalJob(() => this.#pass());

  constructor(private readonly ctx: Ctx) {}

  start(): void {
    if (this.ctx.settings.guest_reap_after === undefined) return;
    this.#job.start(this.ctx.settings.guest_reap_interval_ms);
  }

  /** One pass; a call while a pass runs joins it. */
  sweep(): Promise<ReapPass> {
    return this.#job.run();
  }

  stop(): Promise<void> {
    return this.#job.stop();
  }

  async #pass(): Promise<ReapPass> {
    const result: ReapPass = { deleted: 0, skipped: 0, failed: 0 };
    const after = this.ctx.settings.guest_reap_after;
    if (after === undefined) return result;
    const cutoff = new Date(this.ctx.clock.now() - after * 1000);
    let candidates: string[];
    try {
      candidates = await findInactiveGuests(this.ctx.db, cutoff, REAP_BATCH);
    } catch (err) {
      this.ctx.log.error('guest_reap_failed', { error: err instanceof Error ? err.message : String(err) });
      return result;
    }
    for (const playerId of candidates) {
      try {
        result[await eraseInactiveGuest(this.ctx, playerId, cutoff)]++;
      } catch (err) {
        result.failed++;
        this.ctx.log.error('guest_reap_erase_failed', { player_id: playerId, error: err instanceof Error ? err.message : String(err) });
      }
    }
    if (candidates.length > 0) this.ctx.log.info('guests_reaped', { count: result.deleted, skipped: result.skipped, failed: result.failed });
    return result;
  }
}
