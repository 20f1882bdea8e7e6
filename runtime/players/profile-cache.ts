import { LRUCache } from 'lru-cache';
import type { Player } from '../schemas/players';
import { withAnswerText } from '../platform/answer-text';
import type { CachedProfiles } from '../contracts/services';

/**
 * Public profiles this node has read, so that the most common read of the
 * API (`GET /players/:id`, and `/players/me` on every client start) does not
 * cost a statement each time: on the embedded database one costs more than
 * the rest of the request together.
 *
 * Every change made through this node evicts at once (the `profile_changed`
 * and `player_sessions_ended` effects); `ttlMs` only bounds how long a change
 * made elsewhere stays unseen: an operator's SQL, or another node of a fleet
 * without `onEvict` (a fleet passes every eviction on: host/fleet). A read that
 * started before an eviction may carry the old row: it answers its own
 * request but is not kept (the epoch check), as in the token cache.
 */
export class ProfileCache implements CachedProfiles {
  readonly #entries: LRUCache<string, Player> | null;
  #epoch = 0;
  /** Told of every eviction made through this node, so a fleet can make it on every node. */
  onEvict: ((playerId: string) => void) | null = null;

  constructor(ttlMs: number, maxEntries = 50_000) {
    this.#entries = ttlMs > 0 ? new LRUCache<string, Player>({ max: maxEntries, ttl: ttlMs }) : null;
  }

  read(playerId: string, load: (playerId: string) => Promise<Player>): Player | Promise<Player> {
    return this.#entries?.get(playerId) ?? this.#load(playerId, load);
  }

  async #load(playerId: string, load: (playerId: string) => Promise<Player>): Promise<Player> {
    const epoch = this.#epoch;
    // Kept profiles are answered as they are, so their JSON text is written once (frozen: nothing may change a kept one).
    const player = withAnswerText(await load(playerId));
    if (epoch === this.#epoch) this.#entries?.set(playerId, player);
    return player;
  }

  evict(playerId: string): void {
    this.evictHere(playerId);
    this.onEvict?.(playerId);
  }

  /** Drops this node's copy only (an eviction another node made). */
  evictHere(playerId: string): void {
    this.#epoch++;
    this.#entries?.delete(playerId);
  }
}
