// Entry of dist/handlers.mjs: the host-neutral handler library. An embedding
// host supplies a Ctx (see runtime/context.ts) and calls `createApp(ctx).fetch`.
export { createApp, type App, type RequestMeta } from './app';
export { serialDialect, type StatementRunner } from '../runtime/database';
export { parseSettings } from '../runtime/settings';
export { uuidv7Source } from '../runtime/ids';
export { jsonLogger, silentLogger } from '../runtime/log';
export { systemClock } from '../runtime/context';
export { migrateToLatest } from '../runtime/migrate';
// Builds `ctx.identity` over the embedding host's own fetch.
export { createIdentityProviders } from '../runtime/identities';
export { Kysely } from 'kysely';
// The rest of a Ctx for a REST-only embedding host.
export { uncachedTokenResolver } from '../runtime/tokens';
export { passwordHasher } from '../runtime/passwords';
export { offlineLive } from '../runtime/offline-live';
