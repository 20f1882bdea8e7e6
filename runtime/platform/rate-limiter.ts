import type { RateDecision, RateLimiter } from '../contracts/context';
import type { RateLimitGroup, RateRule } from '../contracts/settings';

/**
 * Groups counted over a sliding window: a fixed window admits twice the limit
 * across its edge, which matters where the limit guards a costly or abusable
 * step (opening sockets, joining matches). The log holds at most `limit`
 * timestamps per key, so these groups stay small.
 */
const SLIDING: ReadonlySet<RateLimitGroup> = new Set(['ws_connect', 'join']);

/** Every admission is the same answer; one shared, frozen object spares an allocation per request. */
const ADMITTED: RateDecision = Object.freeze({ ok: true, retryAfterMs: 0 });

interface Window {
  start: number;
  count: number;
  /** Admission times, oldest first (sliding groups only). */
  log?: number[];
}

/**
 * The node-local buckets (docs/decisions/0003): one counter per (group, key)
 * per fixed window, or a log of admissions for the sliding groups. Stale
 * entries are swept on an interval so idle keys cost nothing. It lives below
 * the handler library so an embedding host (handlers/embedded-context.ts)
 * counts exactly as the Node host does.
 */
export class WindowLimiter implements RateLimiter {
  /** By group, then key: a request's key is looked up as it came, not joined to its group into a new string first. */
  readonly #windows = new Map<RateLimitGroup, Map<string, Window>>();
  readonly #sweep: ReturnType<typeof setInterval>;
  /** Told of every refusal (the metrics listener counts them by group); null when nobody listens. */
  onRefused: ((group: RateLimitGroup) => void) | null = null;

  constructor(
    private readonly rules: Record<RateLimitGroup, RateRule>,
    private readonly now: () => number = Date.now,
    sweepEveryMs = 30_000,
  ) {
    this.#sweep = setInterval(() => this.sweep(), sweepEveryMs);
    this.#sweep.unref?.();
  }

  take(group: RateLimitGroup, key: string): RateDecision {
    return this.#decide(group, key, true);
  }

  check(group: RateLimitGroup, key: string): RateDecision {
    return this.#decide(group, key, false);
  }

  #decide(group: RateLimitGroup, key: string, spend: boolean): RateDecision {
    const rule = this.rules[group];
    const now = this.now();
    let windows = this.#windows.get(group);
    if (!windows) this.#windows.set(group, (windows = new Map()));
    let w = windows.get(key);
    if (SLIDING.has(group)) {
      const log = w?.log ?? [];
      while (log.length > 0 && now - log[0]! >= rule.window) log.shift();
      if (log.length >= rule.limit) {
        this.onRefused?.(group);
        return { ok: false, retryAfterMs: log[0]! + rule.window - now };
      }
      if (spend) {
        log.push(now);
        if (!w) windows.set(key, { start: now, count: 0, log });
        else w.start = now;
      }
      return ADMITTED;
    }
    if (!w || now - w.start >= rule.window) {
      if (!spend) return ADMITTED;
      // A key's window opens with its first request after the last one closed.
      w = { start: now, count: 0 };
      windows.set(key, w);
    }
    if (w.count >= rule.limit) {
      this.onRefused?.(group);
      return { ok: false, retryAfterMs: w.start + rule.window - now };
    }
    if (spend) w.count++;
    return ADMITTED;
  }

  sweep(): void {
    const now = this.now();
    for (const [group, windows] of this.#windows) {
      const window = this.rules[group]?.window ?? 0;
      for (const [key, w] of windows) if (now - w.start >= window) windows.delete(key);
    }
  }

  get size(): number {
    let size = 0;
    for (const windows of this.#windows.values()) size += windows.size;
    return size;
  }

  close(): void {
    clearInterval(this.#sweep);
  }
}
