import type { Ctx } from '../../runtime/contracts/context';
import { deleteExpiredTokens } from '../../runtime/accounts/tokens';
import { IntervalJob } from './interval-job';

/** Runs `deleteExpiredTokens` every `token_sweep_interval_ms`. */
export class TokenSweeper {
  readonly #job = new IntervalJob(() => this.#pass());

  constructor(private readonly ctx: Ctx) {}

  start(): void {
    this.#job.start(this.ctx.settings.token_sweep_interval_ms);
  }

  /** One pass; a call while a pass runs joins it. Resolves to the rows deleted. */
  sweep(): Promise<number> {
    return this.#job.run();
  }

  stop(): Promise<void> {
    return this.#job.stop();
  }

  async #pass(): Promise<number> {
    try {
      const deleted = await deleteExpiredTokens(this.ctx.db, this.ctx.clock.now());
      if (deleted > 0) this.ctx.log.info('expired_tokens_deleted', { deleted });
      return deleted;
    } catch (err) {
      this.ctx.log.error('token_sweep_failed', { error: err instanceof Error ? err.message : String(err) });
      return 0;
    }
  }
}
