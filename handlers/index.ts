// Entry of dist/handlers.mjs: the host-neutral handler library. An embedding
// host supplies a Ctx (see runtime/contracts/context.ts) and calls `createApp(ctx).fetch`.
export { createApp, type App, type RequestMeta } from './app';
// The starting point for that Ctx: built from a database and settings, any member overridden.
export { createEmbeddedContext, type EmbeddedContextOptions } from './embedded-context';
export { serialDialect, type StatementRunner } from '../runtime/platform/database';
export { parseSettings } from '../runtime/contracts/settings';
export { uuidv7Source } from '../runtime/platform/ids';
export { jsonLogger, silentLogger } from '../runtime/platform/log';
export { systemClock } from '../runtime/contracts/context';
export { migrateToLatest } from '../runtime/platform/migrate';
// Builds `ctx.identity` over the embedding host's own fetch.
export { createIdentityProviders } from '../runtime/accounts/identities';
export { Kysely } from 'kysely';
// The pieces createEmbeddedContext builds with, for a host that assembles its own.
export { uncachedTokenResolver } from '../runtime/accounts/tokens';
export { passwordHasher } from '../runtime/accounts/passwords';
export { offlineLive } from '../runtime/platform/offline-live';
// `new ProfileCache(0)` reads every profile from the database; a TTL caches them per isolate.
export { ProfileCache } from '../runtime/players/profile-cache';
// Boards live in the isolate's memory; without a host job nothing writes them to the table.
export { Leaderboards } from '../runtime/leaderboards/leaderboards';
// Store receipts over the embedding host's fetch; the first store needs a certificate chain the host supplies (null: not configured).
export { createReceiptVerifiers } from '../runtime/receipts/stores';
