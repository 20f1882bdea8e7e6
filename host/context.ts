import { availableParallelism } from 'node:os';
import { systemClock, type Clock, type Ctx, type GameDeclarations } from '../runtime/contracts/context';
import type { LiveState } from '../runtime/contracts/live';
import { createIdentityProviders } from '../runtime/accounts/identities';
import { createReceiptVerifiers } from '../runtime/receipts/stores';
import { uuidv7Source } from '../runtime/platform/ids';
import type { Logger } from '../runtime/platform/log';
import { passwordHasher } from '../runtime/accounts/passwords';
import type { Settings } from '../runtime/contracts/settings';
import { loadClientGate } from './infra/client-gate';
import { loadExtensions } from './infra/extensions';
import type { OpenDatabase } from './infra/database';
import { DatabaseWatch } from './infra/database-watch';
import { WindowLimiter } from '../runtime/platform/rate-limiter';
import { outboundFetch, readTrustAnchor } from './http/outbound';
import { StoreCertificateChain } from './infra/certificate-chain';
import { readStoreCredentials } from './infra/store-credentials';
import { TokenCache } from './infra/token-cache';
import { TokenLookups } from './infra/token-lookups';
import { ProfileCache } from '../runtime/players/profile-cache';
import { Leaderboards } from '../runtime/leaderboards/leaderboards';
import type { NodeProbe } from '../runtime/contracts/services';
import type { Fleet } from './fleet/fleet';
import { ConsoleSessions } from '../runtime/ops/console-sessions';

export interface ContextOptions {
  settings: Settings;
  database: OpenDatabase;
  log: Logger;
  clock?: Clock;
  game?: GameDeclarations;
  live: LiveState;
  /** The process measurements `/ops/stats` reads (host/ops/probe.ts). */
  probe?: NodeProbe;
  /** The fleet this node belongs to (host/fleet): token evictions reach every node's cache. */
  fleet?: Fleet;
}

/** A Ctx and the host-side parts behind it that the host starts and stops. */
export interface HostContext {
  ctx: Ctx;
  limits: WindowLimiter;
  /** Watches a database server (none for the embedded one, which lives in this process). */
  watch: DatabaseWatch | null;
  /** Flips readiness once migrations are done. */
  markReady(): void;
}

/**
 * The one place a Ctx is assembled over a database: `createHost` uses it, and
 * so do the in-process handler tests, so both run the production wiring of
 * token cache, rate limiter, password hasher, client gate and providers.
 */
export async function createContext(options: ContextOptions): Promise<HostContext> {
  const { settings, database, log } = options;
  const clock = options.clock ?? systemClock;
  const limits = new WindowLimiter(settings.rate_limits, () => clock.now());
  // Token reads leave most of the pool to everything else a storm does.
  const lookups = new TokenLookups(database.db, database.kind === 'embedded' ? 1 : Math.max(1, Math.floor(settings.db_pool_size / 2)), database.readPrepared);
  const tokens = new TokenCache({
    lookup: (hash, now) => lookups.lookup(hash, now),
    now: () => clock.now(),
    ttlMs: settings.auth_cache_ttl_ms,
  });
  const clientGate = await loadClientGate(settings.client_gate);
  const extensions = await loadExtensions(settings.extensions, { db: database.db, log, clock, live: options.live });
  // Leave a core to the event loop: a storm of logins queues for the others.
  const passwords = passwordHasher({
    iterations: () => settings.pbkdf2_iterations,
    concurrency: Math.max(1, availableParallelism() - 1),
  });
  const timeoutMs = settings.provider_timeout_ms;
  const identity = createIdentityProviders({
    settings,
    oidcFetch: outboundFetch({ ca: readTrustAnchor(settings.oidc_ca_file), timeoutMs }),
    ticketFetch: outboundFetch({ timeoutMs }),
    clock,
    log,
  });
  const stores = readStoreCredentials(settings);
  const receipts = createReceiptVerifiers({
    settings,
    chain: stores.appleRoots.length > 0 ? new StoreCertificateChain(stores.appleRoots) : null,
    googleKey: stores.googleKey,
    fetch: outboundFetch({ timeoutMs }),
    clock,
    log,
  });
  const watch = database.probe ? new DatabaseWatch({ probe: database.probe, log }) : null;
  if (watch) database.onConnectionLost?.(() => watch.suspect());
  let ready = false;
  const ctx: Ctx = {
    db: database.db,
    settings,
    clock,
    ids: uuidv7Source(() => clock.now()),
    limits,
    log,
    auth: options.fleet ? options.fleet.tokens(tokens, { db: database.db, now: () => clock.now() }) : tokens,
    profiles: options.fleet ? options.fleet.shareProfiles(new ProfileCache(settings.profile_cache_ttl_ms)) : new ProfileCache(settings.profile_cache_ttl_ms),
    game: options.game ?? { registration: () => null, guestAuth: () => false },
    readiness: { ready: () => ready, databaseFault: () => watch?.fault() ?? null },
    passwords,
    clientGate,
    live: options.live,
    identity,
    receipts,
    leaderboards: new Leaderboards(settings),
    ...(options.probe ? { probe: options.probe } : {}),
    extensions,
    // Node-local by design: a session resolves only on the node that made it, and a restart ends every one.
    ...(settings.console ? { consoleSessions: new ConsoleSessions() } : {}),
  };
  return { ctx, limits, watch, markReady: () => (ready = true) };
}
