import type { DatabaseFault, Db } from '../platform/database';
import type { IdSource } from '../platform/ids';
import type { Logger } from '../platform/log';
import type { LiveState } from './live';
import type {
  CachedProfiles,
  ClientGate,
  ConsoleSessionStore,
  ExtensionSet,
  IdentityProviders,
  NodeLeaderboards,
  NodeProbe,
  PasswordHasher,
  ReceiptVerifiers,
} from './services';
import type { RateLimitGroup, RegistrationMode, Settings } from './settings';

/**
 * The seam between the host-neutral handler library and whatever hosts it.
 * Anything that outlives one request lives behind one of these members; a
 * handler keeps no state of its own.
 */
export interface Ctx {
  db: Db;
  settings: Settings;
  clock: Clock;
  ids: IdSource;
  limits: RateLimiter;
  log: Logger;
  /** Resolves a bearer access token; the host caches with explicit eviction. */
  auth: TokenResolver;
  /** Public profiles this node has read, evicted by the effects of every change (runtime/players/profile-cache.ts). */
  profiles: CachedProfiles;
  /** What the loaded game directory declares for the whole deployment. */
  game: GameDeclarations;
  readiness: {
    /** False while migrations run: every API route answers 503 `not_ready`. */
    ready(): boolean;
    /**
     * Why the database cannot serve, as the host last observed it, or null
     * while it answers. Never waits on a query: the readiness probe reads it.
     * A host that keeps no such view leaves it out, and the probe asks the
     * database itself under a deadline.
     */
    databaseFault?(): DatabaseFault | null;
  };
  /** Password hashing with the host's bound on concurrent derivations (runtime/accounts/passwords.ts). */
  passwords: PasswordHasher;
  /** The operator's client gate, loaded by the host; null when unset. Call it through `passClientGate`. */
  clientGate: ClientGate | null;
  /** Test-only interleaving points; production hosts leave this unset. */
  seams?: Seams;
  /** This node's real-time state (sessions, matches, matchmaker, RPC), owned by the host. */
  live: LiveState;
  /**
   * Verifies provider tokens (OIDC ID tokens, ticket-provider tickets). Built by
   * the host with `createIdentityProviders` over its own fetch (pinned trust
   * anchor, timeout); holds the discovery and key caches.
   */
  identity: IdentityProviders;
  /**
   * Verifies store receipts (runtime/receipts/stores.ts). The host checks
   * certificate chains with its own X.509 parser and reads the store
   * credentials at boot.
   */
  receipts: ReceiptVerifiers;
  /** This node's leaderboards, in memory (runtime/leaderboards/); the host writes them to the table on an interval. */
  leaderboards: NodeLeaderboards;
  /** The host's measurements of its own process for `/ops/stats`; a host that keeps none leaves it out and those figures answer null. */
  probe?: NodeProbe;
  /** Console browser sessions, in this node's memory (runtime/ops/console-sessions.ts); a host without a console leaves it out. */
  consoleSessions?: ConsoleSessionStore;
  /** The operator's extensions (setting `extensions`), loaded and checked at boot; a host without any leaves it out. */
  extensions?: ExtensionSet;
}

/** Deployment-wide globals of the game script; an operator setting overrides each. */
export interface GameDeclarations {
  /** `script_registration` (alias `registration`); applies only where the operator set none. */
  registration(): RegistrationMode | null;
  /** `guest_auth = true` in the game script. */
  guestAuth(): boolean;
}

/** Who a valid access token belongs to. */
export interface Principal {
  playerId: string;
  /** Row id of the access token, so logout can revoke exactly it. */
  tokenId: string;
  /** When the access token expires (epoch ms), where the resolver read it: a socket outlives its token, and a fleet's outage check must tell an expired token from a revoked one. */
  expiresAt?: number;
}

export interface TokenResolver {
  /**
   * `beforeLookup` runs just before the token costs a database read (a cache
   * miss), so the caller can spend a rate-limit bucket first; a throw from it
   * ends the resolution.
   */
  /** A cached answer comes at once, without a promise (every authenticated request asks). */
  resolve(accessToken: string, beforeLookup?: () => void): Principal | null | Promise<Principal | null>;
  /** Drops one cached access token at once (logout). */
  evictToken(accessToken: string): Promise<void>;
  /** Drops every cached token of a player at once (family revoked, ban, erasure). */
  evictPlayer(playerId: string): void;
}

/** Points where a test can run code between two steps of a service to force a race. */
export interface Seams {
  /** Self-erase: after the password check, before the erasing transaction. */
  eraseAfterCheck?(playerId: string): Promise<void>;
  /** Guest sign-in: the device is unknown, before the creating transaction. */
  guestAfterLookup?(deviceId: string): Promise<void>;
  /** Guest creation: before the unclaimed-guest count; a throw stands for a database fault there. */
  guestBeforeCount?(): Promise<void>;
  /** Provider sign-in: the identity is unknown, before the creating transaction. */
  providerAfterLookup?(provider: string, uid: string): Promise<void>;
}

export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
}

export interface RateDecision {
  ok: boolean;
  /** Milliseconds until the bucket admits again; 0 when ok. */
  retryAfterMs: number;
}

export interface RateLimiter {
  /** Spends one token of `group` for `key`. */
  take(group: RateLimitGroup, key: string): RateDecision;
  /**
   * Whether `group` would admit `key` now, without spending: for buckets
   * that count only failures, checked before the work and spent after it fails.
   */
  check(group: RateLimitGroup, key: string): RateDecision;
}

export const systemClock: Clock = { now: () => Date.now() };
