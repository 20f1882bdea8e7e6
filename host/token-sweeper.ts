import type { Ctx } from '../runtime/context';
import { deleteExpiredTokens } from '../runtime/tokens';

/** Runs `deleteExpiredTokens` every `token_sweep_interval_ms`; passes never overlap. */
export class TokenSweeper {
  #timer: ReturnType<typeof setInterval> | null = null;
  #running: Promise<number> | null = null;

  constructor(private readonly ctx: Ctx) {}

  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.sweep(), this.ctx.settings.token_sweep_interval_ms);
    this.#timer.unref?.();
  }

  /** One pass; a call while a pass runs joins it. Resolves to the rows deleted. */
  sweep(): Promise<number> {
    this.#running ??= deleteExpiredTokens(this.ctx.db, this.ctx.clock.now())
      .then((deleted) => {
        if (deleted > 0) this.ctx.log.info('expired_tokens_deleted', { deleted });
        return deleted;
      })
      .catch((err) => {
        this.ctx.log.error('token_sweep_failed', { error: err instanceof Error ? err.message : String(err) });
        return 0;
      })
      .finally(() => (this.#running = null));
    return this.#running;
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#running;
  }
}
