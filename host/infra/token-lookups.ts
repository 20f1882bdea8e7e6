import type { Db } from '../../runtime/platform/database';
import { accessTokenStatements, findAccessTokens, type AccessTokenStatements, type ResolvedAccess } from '../../runtime/accounts/tokens';
import type { PreparedRead } from './prepared-reads';

/** Most hashes one statement carries. */
const MAX_BATCH = 200;
/**
 * Below this many hashes a batch is read as one prepared execution per hash;
 * from it on, as one execution of the array form. Measured on the embedded
 * database with the memory saver on: about 80-100 µs a hash the first way,
 * and about 300 µs plus 17 µs a hash the second. The array form is only ever
 * given this many hashes or more, so PostgreSQL's plan cache settles on its
 * generic plan after five executions (a plan for ten hashes, costed no dearer
 * than a custom one): planned once, not once per batch. A custom plan for an
 * array of 40 constants spends milliseconds estimating each element.
 */
const MIN_ARRAY = 10;

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
  readonly #prepared: { read: PreparedRead; statements: AccessTokenStatements } | null;

  constructor(
    private readonly db: Db,
    /** Reads in flight at once (1 on the embedded database). */
    private readonly reads: number,
    /** The database's prepared reads, where it has them (the embedded one): every batch is read through them. */
    readPrepared?: PreparedRead,
  ) {
    this.#prepared = readPrepared ? { read: readPrepared, statements: accessTokenStatements(db) } : null;
  }

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
    this.#find([...batch.keys()], now)
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

  async #find(hashes: string[], now: number): Promise<Map<string, ResolvedAccess>> {
    if (!this.#prepared) return findAccessTokens(this.db, hashes, now);
    const { read, statements } = this.#prepared;
    const results =
      hashes.length < MIN_ARRAY
        ? await read(statements.one.text, hashes.map((h) => statements.one.parameters(h, now)))
        : await read(statements.many.text, [statements.many.parameters(hashes, now)]);
    const found = new Map<string, ResolvedAccess>();
    for (const rows of results) for (const row of rows) found.set(...statements.resolve(row));
    return found;
  }
}
