import { LRUCache } from 'lru-cache';
import type { Principal, TokenResolver } from '../../runtime/contracts/context';
import { hash } from 'node:crypto';
import { MAX_TOKEN_LENGTH, type ResolvedAccess } from '../../runtime/accounts/tokens';

export interface TokenCacheOptions {
  /** The uncached lookup by token hash (runtime/tokens `findAccessToken`). */
  lookup(tokenHash: string, now: number): Promise<ResolvedAccess | null>;
  now(): number;
  /** Positive TTL (`auth_cache_ttl_ms`); 0 disables caching. */
  ttlMs: number;
  /** How long an unknown token is remembered as unknown. */
  negativeTtlMs?: number;
  maxEntries?: number;
}

/**
 * The token's SHA-256 in hex, as `hashToken` stores it, computed in line. WebCrypto's
 * digest is asynchronous and runs on libuv's thread pool, where it queues
 * behind password hashing: a reconnect storm during a login storm paid for both.
 */
export function tokenHash(token: string): string {
  // The one-shot form: a third of the cost of a Hash object, on every authenticated request.
  return hash('sha256', token, 'hex');
}

interface Entry {
  principal: Principal | null;
  until: number;
  /** When the database said so. */
  read: number;
}

/**
 * Node-local cache in front of access-token resolution (60 s for a token that
 * resolved, 5 s for one that did not). Entries are keyed by the token's SHA-256, so
 * live bearer strings are not held in memory. A positive entry never outlives
 * the token's own expiry, and revocation evicts at once: by token (logout) or
 * by player (family revoked, ban, erasure).
 *
 * A lookup that started before an eviction may have read the row the
 * eviction was about; such a result answers its own request but is not
 * cached (the epoch check), so the next request re-reads the database.
 */
export class TokenCache implements TokenResolver {
  /**
   * Least recently used goes first when full: a flood of distinct garbage
   * tokens then displaces each other, not the entries of players who keep
   * making requests (insertion order would evict those too).
   */
  readonly #entries: LRUCache<string, Entry>;
  /** player → the keys of their cached tokens: one key (nearly always, and as a string: a Set per player was a tenth of an idle socket's heap), or a set of them. */
  readonly #byPlayer = new Map<string, string | Set<string>>();
  #epoch = 0;
  readonly #negativeTtlMs: number;
  /** Set while the node cannot hear revocations (a fleet node cut off from its bus): no answer older than this is believed. */
  #maxAgeMs: number | null = null;

  constructor(private readonly options: TokenCacheOptions) {
    this.#negativeTtlMs = Math.min(options.negativeTtlMs ?? 5000, options.ttlMs);
    this.#entries = new LRUCache<string, Entry>({
      max: options.maxEntries ?? 100_000,
      dispose: (entry, key) => this.#unindex(key, entry),
    });
  }

  /** A cached answer at once; a lookup (after `beforeLookup`) as a promise. */
  resolve(accessToken: string, beforeLookup?: () => void): Principal | null | Promise<Principal | null> {
    if (accessToken.length === 0 || accessToken.length > MAX_TOKEN_LENGTH) return null;
    const key = tokenHash(accessToken);
    const now = this.options.now();
    const hit = this.#entries.get(key);
    if (hit) {
      if (hit.until > now && (this.#maxAgeMs === null || now - hit.read < this.#maxAgeMs)) return hit.principal;
      this.#drop(key);
    }
    beforeLookup?.();
    return this.#lookup(key, now);
  }

  async #lookup(key: string, now: number): Promise<Principal | null> {
    const epoch = this.#epoch;
    const found = await this.options.lookup(key, now);
    if (epoch === this.#epoch) {
      const until = found ? Math.min(now + this.options.ttlMs, found.expiresAt) : now + this.#negativeTtlMs;
      if (until > now) this.#store(key, { principal: found?.principal ?? null, until, read: now });
    }
    return found?.principal ?? null;
  }

  async evictToken(accessToken: string): Promise<void> {
    this.#epoch++;
    if (accessToken.length === 0 || accessToken.length > MAX_TOKEN_LENGTH) return;
    this.#drop(tokenHash(accessToken));
  }

  /** Drops one token known only by its hash: a logout on another node of the fleet (host/fleet). */
  evictHash(key: string): void {
    this.#epoch++;
    this.#drop(key);
  }

  evictPlayer(playerId: string): void {
    this.#epoch++;
    const keys = this.#byPlayer.get(playerId);
    if (keys === undefined) return;
    for (const key of typeof keys === 'string' ? [keys] : [...keys]) this.#entries.delete(key);
    this.#byPlayer.delete(playerId);
  }

  /** Every entry goes: what was cached may have been revoked where this node could not hear it. */
  evictAll(): void {
    this.#epoch++;
    this.#entries.clear();
    this.#byPlayer.clear();
  }

  /**
   * Believes no cached answer older than `maxAgeMs` (null: the TTLs alone
   * again). The bound is checked on each hit, so it applies at once to
   * everything already cached.
   */
  trustFor(maxAgeMs: number | null): void {
    this.#maxAgeMs = maxAgeMs;
  }

  get size(): number {
    return this.#entries.size;
  }

  #store(key: string, entry: Entry): void {
    this.#entries.set(key, entry);
    if (!entry.principal) return;
    const playerId = entry.principal.playerId;
    const keys = this.#byPlayer.get(playerId);
    if (keys === undefined || keys === key) this.#byPlayer.set(playerId, key);
    else if (typeof keys === 'string') this.#byPlayer.set(playerId, new Set([keys, key]));
    else keys.add(key);
  }

  #drop(key: string): void {
    this.#entries.delete(key);
  }

  /** Runs for every entry that leaves the cache: replaced, deleted or evicted. */
  #unindex(key: string, entry: Entry): void {
    if (!entry.principal) return;
    const playerId = entry.principal.playerId;
    const keys = this.#byPlayer.get(playerId);
    if (keys === key) this.#byPlayer.delete(playerId);
    else if (typeof keys === 'object' && keys.delete(key) && keys.size === 0) this.#byPlayer.delete(playerId);
  }
}
