import type { Db } from '../../runtime/platform/database';
import { findAccessTokens, type ResolvedAccess } from '../../runtime/accounts/tokens';

/** Most hashes one statement carries. */
const MAX_BATCH = 200;

interface Waiting {
  now: number;
  resolve(found: ResolvedAccess | null): void;
  reject(err: unknown): void;
}

/**
 * Token-cache misses gathered into few database reads. One miss at a time
 * costs one read, as before. In a reconnect storm after a deploy (thousands
 * of cold tokens within a second) at most `reads` statements are in flight;
 * misses arriving meanwhile wait for the next one, which then carries all of
 * them. The embedded database runs statements one at a time, so one read in
 * flight is as fast as it gets there, and every extra small read would only
 * queue behind it: this is what turns a storm's thousands of lookups into
 * tens.
 */
export class TokenLookups {
  #pending = new Map<string, Waiting[]>();
  #scheduled = false;
  #inFlight = 0;

  constructor(
    private readonly db: Db,
    /** Reads in flight at once (1 on the embedded database). */
    private readonly reads: number,
  ) {}

  lookup(tokenHash: string, now: number): Promise<ResolvedAccess | null> {
    return new Promise((resolve, reject) => {
      const waiting = this.#pending.get(tokenHash);
      if (waiting) waiting.push({ now, resolve, reject });
      else this.#pending.set(tokenHash, [{ now, resolve, reject }]);
      if (this.#pending.size >= MAX_BATCH) this.#flush();
      else if (!this.#scheduled) {
        // Misses of the same turn of the event loop share a read.
        this.#scheduled = true;
        setImmediate(() => {
          this.#scheduled = false;
          this.#flush();
        });
      }
    });
  }

  #flush(): void {
    while (this.#pending.size > 0 && this.#inFlight < this.reads) this.#read();
  }

  #read(): void {
    let batch = this.#pending;
    if (batch.size > MAX_BATCH) {
      const keys = [...batch.keys()].slice(0, MAX_BATCH);
      batch = new Map(keys.map((k) => [k, this.#pending.get(k)!]));
      for (const k of keys) this.#pending.delete(k);
    } else {
      this.#pending = new Map();
    }
    // The latest clock of the batch: no waiter is answered with a token
    // that had already expired by its own clock.
    let now = -Infinity;
    for (const waiting of batch.values()) for (const w of waiting) now = Math.max(now, w.now);
    this.#inFlight++;
    findAccessTokens(this.db, [...batch.keys()], now)
      .then(
        (found) => {
          for (const [hash, waiting] of batch) for (const w of waiting) w.resolve(found.get(hash) ?? null);
        },
        (err: unknown) => {
          for (const waiting of batch.values()) for (const w of waiting) w.reject(err);
        },
      )
      .finally(() => {
        this.#inFlight--;
        this.#flush();
      });
  }
}
