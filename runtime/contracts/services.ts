import type { AppleReceiptView, GoogleReceiptView } from '../schemas/iap';
import type { Player } from '../schemas/players';
import type { Transaction } from 'kysely';
import type { Extension } from './extension';
import type { Database } from './tables';

/**
 * The services a host builds for the context besides its real-time state
 * (contracts/live.ts): what handlers and services may call, named here so
 * that neither has to reach a concrete class, and the host (or an embedder)
 * may bring its own.
 */

// ---- accounts --------------------------------------------------------------

/** What the client gate is shown of a pre-auth request. */
export interface ClientGateInput {
  /** Peer address after the trusted-proxy rule. */
  ip: string;
  /** Request headers, lower-case names; credentials (authorization, cookie) removed. */
  headers: Record<string, string>;
  /** The request path, e.g. `/api/v1/auth/register`. */
  path: string;
  /** The body's `token` on `/auth/oauth`; absent elsewhere. Never a password. */
  token?: string;
}

export type ClientGateVerdict = { action: 'allow' | 'skip' } | { action: 'deny'; reason: string };

/** The operator's client gate as loaded; runtime/accounts/client-gate.ts calls it and reads its answer. */
export type ClientGate = (input: ClientGateInput) => Promise<unknown> | unknown;

/** What a provider vouched for. */
export interface ProviderIdentity {
  provider: string;
  uid: string;
  email: string | null;
  displayName: string | null;
  /** Provider flags to store (and refresh on later sign-ins); null when the provider gives none. */
  metadata: Record<string, unknown> | null;
}

/** `ctx.identity`: token verification for every configured provider. */
export interface IdentityProviders {
  /** False for an unknown name or a provider this deployment did not configure. */
  supports(provider: string): boolean;
  /** Resolves the identity or throws 401 `auth.unsupported_provider` / `auth.provider_rejected` (with `details.reason`). */
  verify(provider: string, token: string): Promise<ProviderIdentity>;
}

/**
 * What services call (through `ctx.passwords`). The host bounds how many
 * derivations run at once: each one pins a CPU core for tens of milliseconds,
 * and a login storm that took every core would stall the event loop serving
 * cheap reads. Queued derivations wait their turn instead.
 */
export interface PasswordHasher {
  /** Hashes at the current `pbkdf2_iterations`. */
  hash(password: string): Promise<string>;
  /**
   * See `verifyPassword`; a null `stored` costs the same as a wrong password.
   * Given a loader, it runs once a slot is free, so a queued login holds no
   * database work until its turn comes.
   */
  verify(password: string, stored: string | null | (() => Promise<string | null>)): Promise<boolean>;
}

// ---- profiles --------------------------------------------------------------

/** Public profiles this node has read (runtime/players/profile-cache.ts); every change made through this node evicts at once. */
export interface CachedProfiles {
  /** The cached profile, at once (no promise: the most common read of the API answers without one), or `load`'s answer (kept unless an eviction came in meanwhile). */
  read(playerId: string, load: (playerId: string) => Promise<Player>): Player | Promise<Player>;
  evict(playerId: string): void;
}

// ---- store receipts -------------------------------------------------------

/** `ctx.receipts`: each store's verification; both throw `iap.verification_failed` with a reason. */
export interface ReceiptVerifiers {
  apple(signedTransaction: string): Promise<VerifiedReceipt<AppleReceiptView>>;
  /** Either argument undefined is the store check's own failure (`missing_required_fields`). */
  google(productId: string | undefined, purchaseToken: string | undefined): Promise<VerifiedReceipt<GoogleReceiptView>>;
}

/** What a store vouched for: the ids to record, and the answer's store fields. */
export interface VerifiedReceipt<View> {
  transactionId: string | null;
  originalTransactionId: string | null;
  productId: string | null;
  view: View;
}

// ---- leaderboards ----------------------------------------------------------

export interface Standing {
  playerId: string;
  score: bigint;
  subScore: bigint;
  /** 1-based position on the whole board. */
  rank: number;
  /** Epoch ms of the entry's last change. */
  updatedAt: number;
}

/** What a flush writes for one entry. */
export interface EntryRow {
  playerId: string;
  score: bigint;
  subScore: bigint;
  updatedAt: number;
}

/** One board in this node's memory, as reads, the flush and a fleet's copy see it. */
export interface LeaderboardBoard {
  readonly id: string;
  /** Entries on the board. */
  readonly size: number;
  /** Epoch ms of the board's last change; 0 while empty. */
  readonly changedAt: number;
  top(count: number): Standing[];
  /** Every entry, in no promised order. */
  entries(): Iterable<EntryRow>;
  /** Up to `max` entries changed since they were last taken, scanning from `from`; `next` is -1 once the scan reached the end. */
  takeDirty(from: number, max: number): { rows: EntryRow[]; next: number };
  /** Counts players' entries dirty again (a flush that failed). */
  markDirty(playerIds: readonly string[]): void;
  remove(playerId: string): boolean;
}

/** Told of every change made through this node, so a fleet can make it on every node (host/fleet/leaderboards.ts). */
export interface LeaderboardObserver {
  submitted(boardId: string, playerId: string, score: bigint, subScore: bigint, now: number): void;
  erased(playerId: string): void;
}

/** This node's boards (runtime/leaderboards/leaderboards.ts): REST, game scripts, the flush job and a fleet all go through here. */
export interface NodeLeaderboards {
  observer: LeaderboardObserver | null;
  /** Whether players may submit to the board over REST (scripts always may). */
  clientMaySubmit(boardId: string): boolean;
  /** Applies a score under the board's operator; null when the board does not exist and the node holds its maximum of boards. */
  submit(boardId: string, playerId: string, score: bigint, subScore: bigint, now: number): Standing | null;
  /** A submission another node made. */
  applyRemote(boardId: string, playerId: string, score: bigint, subScore: bigint, at: number): void;
  top(boardId: string, count: number): Standing[];
  around(boardId: string, playerId: string, range: number): Standing[];
  /** The player's entry with its rank, or null. */
  standing(boardId: string, playerId: string): Standing | null;
  /** Drops the player from every board (after an erasure committed). */
  erase(playerId: string): void;
  /** Drops the player from this node's boards only (an erasure another node made). */
  eraseHere(playerId: string): void;
  /** A stored entry back in its board at boot. */
  load(boardId: string, row: EntryRow): void;
  boards(): Iterable<LeaderboardBoard>;
}

// ---- operator plane --------------------------------------------------------

/** What the host measures about its own process and real-time services; the handler library cannot (no `node:` imports). */
export interface NodeSample {
  /** `<hostname>:<pid>`: distinct per process, so two nodes behind one balancer tell apart. */
  node: string;
  uptime_ms: number;
  /** Event-loop delay over the last complete window (how late a timer fires): the "run queue" question. */
  event_loop_lag_p50_ms: number;
  event_loop_lag_p99_ms: number;
  event_loop_lag_max_ms: number;
  /** Share of the same window the loop spent busy, 0 to 1. */
  event_loop_utilization: number;
  memory_rss: number;
  memory_heap_used: number;
  memory_heap_total: number;
  /** Memory of C++ objects bound to JavaScript, array buffers included. */
  memory_external: number;
  memory_array_buffers: number;
  /** Handles and requests keeping the loop alive (sockets, timers, files). */
  active_handles: number;
  script_workers: number;
  live_matches: number;
  live_worlds: number;
  sockets: number;
  /** Match tick lateness since the node started, 99th percentile. */
  tick_lateness_p99_ms: number;
}

export interface NodeProbe {
  sample(): NodeSample;
}

export interface ConsoleSession {
  /** Public handle, named on audit rows (the cookie value never is). */
  id: string;
  csrf: string;
  display: string;
  expiresAt: number;
}

/** The node's console sessions (runtime/ops/console-sessions.ts). */
export interface ConsoleSessionStore {
  open(display: string, now: number, newId: () => string): Promise<{ cookie: string; session: ConsoleSession }>;
  /** The live session a cookie names, or null (unknown, ended, expired). */
  find(cookie: string | null, now: number): Promise<ConsoleSession | null>;
  end(cookie: string | null): Promise<void>;
}

/** The extensions this node runs (runtime/extensions/installed.ts), in the order the `extensions` setting lists them. */
export interface ExtensionSet {
  readonly list: readonly Extension[];
  /** Each extension's part of an export, read in the export's own snapshot. */
  exportAll(trx: Transaction<Database>, playerId: string): Promise<Record<string, unknown>>;
  /** Runs every erase hook inside the erasure's transaction; the first refusal aborts the rest and the erasure. */
  eraseAll(trx: Transaction<Database>, playerId: string): Promise<void>;
}
