import type { RateDecision, RateLimiter } from '../runtime/context';
import type { RateLimitGroup, RateRule } from '../runtime/settings';

/**
 * Node-local fixed-window buckets (docs/decisions/0003). One counter per
 * (group, key) per window; stale windows are swept on an interval so idle
 * keys cost nothing.
 */
export class FixedWindowLimiter implements RateLimiter {
  readonly #windows = new Map<string, { start: number; count: number }>();
  readonly #sweep: ReturnType<typeof setInterval>;

  constructor(
    private readonly rules: Record<RateLimitGroup, RateRule>,
    private readonly now: () => number = Date.now,
    sweepEveryMs = 30_000,
  ) {
    this.#sweep = setInterval(() => this.sweep(), sweepEveryMs);
    this.#sweep.unref?.();
  }

  take(group: RateLimitGroup, key: string): RateDecision {
    const rule = this.rules[group];
    const now = this.now();
    const id = `${group}\u0000${key}`;
    let w = this.#windows.get(id);
    if (!w || now - w.start >= rule.window) {
      // A key's window opens with its first request after the last one closed.
      w = { start: now, count: 0 };
      this.#windows.set(id, w);
    }
    if (w.count >= rule.limit) return { ok: false, retryAfterMs: w.start + rule.window - now };
    w.count++;
    return { ok: true, retryAfterMs: 0 };
  }

  check(group: RateLimitGroup, key: string): RateDecision {
    const rule = this.rules[group];
    const now = this.now();
    const w = this.#windows.get(`${group}\u0000${key}`);
    if (!w || now - w.start >= rule.window || w.count < rule.limit) return { ok: true, retryAfterMs: 0 };
    return { ok: false, retryAfterMs: w.start + rule.window - now };
  }

  sweep(): void {
    const now = this.now();
    for (const [id, w] of this.#windows) {
      const group = id.slice(0, id.indexOf('\u0000')) as RateLimitGroup;
      if (now - w.start >= (this.rules[group]?.window ?? 0)) this.#windows.delete(id);
    }
  }

  get size(): number {
    return this.#windows.size;
  }

  close(): void {
    clearInterval(this.#sweep);
  }
}
