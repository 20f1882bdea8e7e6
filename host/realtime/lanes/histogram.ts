import { TICK_MS } from './tick-wheel';

/**
 * Counts in fixed buckets (the last one takes everything beyond), so every
 * value counts however long the node runs, in a few kilobytes: tick
 * lateness in whole milliseconds, bot think times in tenths.
 */
export class BucketHistogram {
  readonly #counts: Float64Array;
  #count = 0;

  constructor(readonly buckets: number) {
    this.#counts = new Float64Array(buckets);
  }

  get count(): number {
    return this.#count;
  }

  /** Counts `n` values in bucket `bucket` (clamped into range). */
  add(bucket: number, n = 1): void {
    this.#counts[Math.min(this.buckets - 1, Math.max(0, bucket))]! += n;
    this.#count += n;
  }

  /** The bucket holding the `q` quantile of what was counted; -1 when nothing was. */
  quantileBucket(q: number): number {
    if (this.#count === 0) return -1;
    const rank = Math.ceil(q * this.#count);
    let seen = 0;
    for (let b = 0; b < this.buckets; b++) {
      seen += this.#counts[b]!;
      if (seen >= rank) return b;
    }
    return this.buckets - 1;
  }

  reset(): void {
    this.#counts.fill(0);
    this.#count = 0;
  }
}

export interface LatenessSummary {
  count: number;
  p50: number;
  p99: number;
  max: number;
  /** Ticks that did not run because their match was a whole period behind (counted above as one period late). */
  skipped: number;
  /** Ticks that did not run because their match had taken more than its share of its lane (not counted above: the match's own doing). */
  throttled: number;
}

/**
 * Tick lateness in whole-millisecond buckets (the clock's own resolution), so
 * every tick counts however long the node runs, in a few kilobytes.
 */
export class LatenessHistogram {
  readonly #ms = new BucketHistogram(2001);
  #max = 0;
  #skipped = 0;
  #throttled = 0;

  record(ms: number): void {
    this.#ms.add(Math.round(ms));
    if (ms > this.#max) this.#max = ms;
  }

  skip(): void {
    this.#skipped++;
    this.record(TICK_MS);
  }

  throttle(): void {
    this.#throttled++;
  }

  reset(): void {
    this.#ms.reset();
    this.#max = 0;
    this.#skipped = 0;
    this.#throttled = 0;
  }

  summary(): LatenessSummary {
    const at = (q: number) => Math.max(0, this.#ms.quantileBucket(q));
    return { count: this.#ms.count, p50: at(0.5), p99: at(0.99), max: this.#max, skipped: this.#skipped, throttled: this.#throttled };
  }
}
