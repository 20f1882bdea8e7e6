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
