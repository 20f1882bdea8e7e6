import { createIdentityProviders } from '../runtime/accounts/identities';
import type { OutboundFetch } from '../runtime/accounts/oidc';
import { passwordHasher } from '../runtime/accounts/passwords';
import { uncachedTokenResolver } from '../runtime/accounts/tokens';
import { systemClock, type Ctx } from '../runtime/contracts/context';
import type { Settings } from '../runtime/contracts/settings';
import { Leaderboards } from '../runtime/leaderboards/leaderboards';
import { ProfileCache } from '../runtime/players/profile-cache';
import type { Db } from '../runtime/platform/database';
import { uuidv7Source } from '../runtime/platform/ids';
import { silentLogger } from '../runtime/platform/log';
import { offlineLive } from '../runtime/platform/offline-live';
import { WindowLimiter } from '../runtime/platform/rate-limiter';
import { createReceiptVerifiers } from '../runtime/receipts/stores';

export interface EmbeddedContextOptions {
  /** The embedding host's database (e.g. `new Kysely({ dialect: serialDialect(run) })`). */
  db: Db;
  /** Parsed settings (`parseSettings(raw).settings`). */
  settings: Settings;
  /** How identity providers and stores are reached; the platform's own `fetch` unless given. */
  fetch?: OutboundFetch;
  /**
   * Members the host supplies itself. The defaults are built around them, so
   * an overridden `clock` or `log` is the one the token resolver, providers
   * and stores use.
   */
  overrides?: Partial<Ctx>;
}

/**
 * A Ctx for a host that embeds the handler library (a Workers-style runtime):
 * everything that needs no Node API, with nothing cached across requests that
 * could go stale in another isolate.
 *
 * - tokens are read from the database on every call (no cache to evict);
 * - public profiles are read through, leaderboards kept in this isolate's
 *   memory (no host job writes them to the table);
 * - rate limits count in this isolate, as the Node host counts per node;
 * - no real-time state (`offlineLive`): the socket frames need a host;
 * - no game directory: registration follows the settings, guests are off
 *   unless the settings allow them;
 * - no client gate, no certificate chain for Apple receipts, no Google key:
 *   supply `receipts` to verify store purchases;
 * - ready at once: migrate the database before serving (`migrateToLatest`).
 */
export function createEmbeddedContext(options: EmbeddedContextOptions): Ctx {
  const { db, settings, overrides = {} } = options;
  const clock = overrides.clock ?? systemClock;
  const log = overrides.log ?? silentLogger;
  const outbound: OutboundFetch = options.fetch ?? ((url, init) => fetch(url, init));
  // The optional members (seams, probe, console sessions, extensions) come only from the overrides.
  return {
    ...overrides,
    db,
    settings,
    clock,
    log,
    ids: overrides.ids ?? uuidv7Source(),
    limits: overrides.limits ?? new WindowLimiter(settings.rate_limits, () => clock.now()),
    auth: overrides.auth ?? uncachedTokenResolver(db, () => clock.now()),
    profiles: overrides.profiles ?? new ProfileCache(0),
    leaderboards: overrides.leaderboards ?? new Leaderboards(settings),
    game: overrides.game ?? { registration: () => null, guestAuth: () => false },
    readiness: overrides.readiness ?? { ready: () => true },
    passwords: overrides.passwords ?? passwordHasher({ iterations: () => settings.pbkdf2_iterations, concurrency: 2 }),
    clientGate: overrides.clientGate ?? null,
    live: overrides.live ?? offlineLive(),
    identity: overrides.identity ?? createIdentityProviders({ settings, oidcFetch: outbound, ticketFetch: outbound, clock, log }),
    receipts: overrides.receipts ?? createReceiptVerifiers({ settings, chain: null, googleKey: null, fetch: outbound, clock, log }),
  };
}
