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
 * Token-cache misses gathered into one database read per turn of the event
 * loop. One miss at a time costs one read, as before; a reconnect storm after
 * a deploy (thousands of cold tokens within a second) costs one read per
 * batch, which is what keeps the embedded database, whose statements run one
 * at a time, from becoming the queue every player waits in.
 */
export class TokenLookups {
  #pending = new Map<string, Waiting[]>();
  #scheduled = false;

  constructor(private readonly db: Db) {}

  lookup(tokenHash: string, now: number): Promise<ResolvedAccess | null> {
    return new Promise((resolve, reject) => {
      const waiting = this.#pending.get(tokenHash);
      if (waiting) waiting.push({ now, resolve, reject });
      else this.#pending.set(tokenHash, [{ now, resolve, reject }]);
      if (this.#pending.size >= MAX_BATCH) this.#flush();
      else if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => this.#flush());
      }
    });
  }

  #flush(): void {
    this.#scheduled = false;
    if (this.#pending.size === 0) return;
    const batch = this.#pending;
    this.#pending = new Map();
    // The latest clock of the batch (one event-loop turn): no waiter is
    // answered with a token that had already expired by its own clock.
    let now = -Infinity;
    for (const waiting of batch.values()) for (const w of waiting) now = Math.max(now, w.now);
    findAccessTokens(this.db, [...batch.keys()], now).then(
      (found) => {
        for (const [hash, waiting] of batch) for (const w of waiting) w.resolve(found.get(hash) ?? null);
      },
      (err: unknown) => {
        for (const waiting of batch.values()) for (const w of waiting) w.reject(err);
      },
    );
  }
}
