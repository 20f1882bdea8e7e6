import { insertPlayer, issueOrFail } from './accounts';
import { DISPLAY_NAME_MAX } from '../schemas/players';
import type { Clock, Ctx } from '../contracts/context';
import { randomBytes } from '../platform/crypto';
import { isUniqueViolation, jsonb } from '../platform/database';
import { ApiError } from '../contracts/errors';
import type { IdentityProviders, ProviderIdentity } from '../contracts/services';
import type { Logger } from '../platform/log';
import { oidcVerifiers, rejected, type OutboundFetch } from './oidc';
import { assertRegistrationAllowed } from './registration';
import type { Linked, ProviderSignIn, ProviderToken } from '../schemas/accounts';
import type { Settings } from '../contracts/settings';
import { SteamVerifier } from './steam';
import { issueTokenPair } from './tokens';

/**
 * Provider identities: social sign-in, link and unlink.
 * A row of `player_identities` ties one (provider, provider_uid) to one
 * player; the unique constraint on that pair is what settles every race.
 */

export interface IdentityProviderOptions {
  settings: Settings;
  /** Fetch for discovery and key sets; the host pins `oidc_ca_file` here. */
  oidcFetch: OutboundFetch;
  /** Fetch for the ticket provider's web API. */
  ticketFetch: OutboundFetch;
  clock: Clock;
  log: Logger;
}

export const TICKET_PROVIDER = 'steam';
const IDENTITY_CONSTRAINT = 'player_identities_provider_uid';
const USERNAME_ATTEMPTS = 3;
/** Provider strings stored on the identity row are clipped to this many characters. */
const STORED_TEXT_MAX = 255;

export function createIdentityProviders(options: IdentityProviderOptions): IdentityProviders {
  const { settings, log } = options;
  const oidc = oidcVerifiers(settings, options.oidcFetch, options.clock, log);
  let steam: SteamVerifier | null = null;
  if (settings.steam_api_key && settings.steam_app_id !== undefined) {
    steam = new SteamVerifier({
      apiKey: settings.steam_api_key,
      appId: String(settings.steam_app_id),
      base: settings.steam_api_base,
      fetch: options.ticketFetch,
      log,
    });
  } else if (settings.steam_api_key || settings.steam_app_id !== undefined) {
    log.warn('steam_provider_dropped', { provider: TICKET_PROVIDER, reason: 'needs both steam_api_key and steam_app_id' });
  }
  const supports = (provider: string) => oidc.has(provider) || (provider === TICKET_PROVIDER && steam !== null);
  return {
    supports,
    async verify(provider, token) {
      const verifier = oidc.get(provider);
      if (verifier) {
        const claims = await verifier.verify(token);
        return { provider, uid: claims.uid, email: claims.email, displayName: claims.displayName, metadata: null };
      }
      if (provider === TICKET_PROVIDER && steam) {
        const ticket = await steam.verify(token);
        return { provider, uid: ticket.uid, email: null, displayName: ticket.displayName, metadata: ticket.metadata };
      }
      throw unsupported();
    },
  };
}

function unsupported(): ApiError {
  return new ApiError('auth.unsupported_provider', 'That sign-in provider is not available on this deployment.');
}

/** The 23505 of `(provider, provider_uid)`: someone holds this identity already. */
export function isIdentityConflict(err: unknown): boolean {
  return isUniqueViolation(err) && (err as { constraint?: unknown }).constraint === IDENTITY_CONSTRAINT;
}

function clip(text: string | null, max: number): string | null {
  if (text === null) return null;
  return Array.from(text).slice(0, max).join('');
}

/** `<provider>_<first 8 chars of the uid>_<4 digits>`: a username for a new provider account. */
function generatedUsername(identity: ProviderIdentity): string {
  const [n] = new Uint32Array(randomBytes(4).buffer);
  return `${identity.provider}_${Array.from(identity.uid).slice(0, 8).join('')}_${String(n! % 10000).padStart(4, '0')}`;
}

/**
 * `POST /auth/oauth`: a known identity logs its player in (refreshing what
 * the provider says about it); an unknown one creates a player, if the
 * registration posture allows, with a generated username. Of two concurrent
 * first sign-ins the identity insert of one fails on the unique pair: 409
 * `auth.already_registering`, and the retry logs in.
 */
export async function signInWithProvider(ctx: Ctx, { provider, token }: ProviderToken): Promise<ProviderSignIn> {
  if (!ctx.identity.supports(provider)) throw unsupported();
  const identity = await ctx.identity.verify(provider, token);
  const known = await ctx.db
    .selectFrom('player_identities as i')
    .leftJoin('players as p', 'p.id', 'i.player_id')
    .select(['i.id as identity_id', 'p.id as player_id', 'p.username', 'p.banned_at'])
    .where('i.provider', '=', provider)
    .where('i.provider_uid', '=', identity.uid)
    .executeTakeFirst();
  if (known) {
    if (known.player_id === null || known.username === null) {
      ctx.log.error('identity_without_player', { identity_id: known.identity_id, provider });
      throw new ApiError('internal', 'The account of this sign-in is missing.');
    }
    if (known.banned_at !== null) throw rejected('account_banned');
    const playerId = known.player_id;
    const username = known.username;
    await ctx.db
      .updateTable('player_identities')
      .set({
        updated_at: new Date(ctx.clock.now()),
        ...(identity.email !== null ? { provider_email: clip(identity.email, STORED_TEXT_MAX) } : {}),
        ...(identity.displayName !== null ? { provider_display_name: clip(identity.displayName, STORED_TEXT_MAX) } : {}),
        ...(identity.metadata !== null ? { provider_metadata: jsonb(identity.metadata) } : {}),
      })
      .where('id', '=', known.identity_id)
      .execute();
    const pair = await issueOrFail(ctx, () => issueTokenPair(ctx.db, ctx, playerId));
    return { player_id: playerId, ...pair, username };
  }

  assertRegistrationAllowed(ctx, 'provider');
  await ctx.seams?.providerAfterLookup?.(provider, identity.uid);
  for (let attempt = 1; attempt <= USERNAME_ATTEMPTS; attempt++) {
    const username = generatedUsername(identity);
    try {
      const signIn = await ctx.db.transaction().execute(async (trx) => {
        const playerId = await insertPlayer(trx, ctx, {
          username,
          displayName: clip(identity.displayName, DISPLAY_NAME_MAX) ?? username,
          hashedPassword: null,
        });
        await insertIdentity(trx, ctx, playerId, identity);
        const pair = await issueOrFail(ctx, () => issueTokenPair(trx, ctx, playerId));
        return { player_id: playerId, ...pair, username };
      });
      ctx.log.info('player_created', { player_id: signIn.player_id, via: provider });
      return { ...signIn, created: true };
    } catch (err) {
      if (isIdentityConflict(err)) {
        throw new ApiError('auth.already_registering', 'This identity is being registered by another request; retry to sign in.');
      }
      if (!isUniqueViolation(err)) throw err;
      ctx.log.warn('generated_username_taken', { provider, attempt });
    }
  }
  throw new ApiError('auth.registration_failed', 'Could not create the account; try again.');
}

type Executor = Parameters<typeof insertPlayer>[0] | Ctx['db'];

async function insertIdentity(trx: Executor, ctx: Pick<Ctx, 'ids' | 'clock'>, playerId: string, identity: ProviderIdentity): Promise<void> {
  await trx
    .insertInto('player_identities')
    .values({
      id: ctx.ids.uuid(),
      player_id: playerId,
      provider: identity.provider,
      provider_uid: identity.uid,
      provider_email: clip(identity.email, STORED_TEXT_MAX),
      provider_display_name: clip(identity.displayName, STORED_TEXT_MAX),
      provider_metadata: jsonb(identity.metadata ?? {}),
      updated_at: new Date(ctx.clock.now()),
    })
    .execute();
}

/**
 * `POST /auth/link`: adds a verified provider identity to the caller. An
 * identity that exists already, whoever owns it (the caller included),
 * answers 409 `auth.provider_already_linked`.
 */
export async function linkProvider(ctx: Ctx, playerId: string, { provider, token }: ProviderToken): Promise<Linked> {
  if (!ctx.identity.supports(provider)) throw unsupported();
  const identity = await ctx.identity.verify(provider, token);
  const taken = new ApiError('auth.provider_already_linked', 'That provider identity is already linked to an account.');
  const existing = await ctx.db
    .selectFrom('player_identities')
    .select('id')
    .where('provider', '=', provider)
    .where('provider_uid', '=', identity.uid)
    .executeTakeFirst();
  if (existing) throw taken;
  try {
    await insertIdentity(ctx.db, ctx, playerId, identity);
  } catch (err) {
    if (isIdentityConflict(err)) throw taken;
    ctx.log.error('link_failed', { player_id: playerId, provider, error: err instanceof Error ? err.message : String(err) });
    throw new ApiError('auth.link_failed', 'Could not link the identity; try again.');
  }
  return { provider, provider_uid: identity.uid, linked: true };
}

/**
 * `DELETE /auth/unlink`: removes the caller's identities of `provider`,
 * unless that would leave no way to sign in (no password and no identity of
 * another provider, a guest identity included). The player row is locked so
 * two concurrent unlinks cannot each leave the other's method as the last.
 */
export async function unlinkProvider(ctx: Ctx, playerId: string, provider: string): Promise<void> {
  await ctx.db.transaction().execute(async (trx) => {
    const player = await trx.selectFrom('players').select('hashed_password').where('id', '=', playerId).forUpdate().executeTakeFirst();
    if (!player) throw new ApiError('unauthenticated');
    const identities = await trx.selectFrom('player_identities').select('provider').where('player_id', '=', playerId).execute();
    const matching = identities.filter((i) => i.provider === provider).length;
    if (matching === 0) throw new ApiError('auth.identity_not_found', 'No identity of that provider is linked to this account.');
    if (player.hashed_password === null && identities.length === matching) {
      throw new ApiError('auth.last_auth_method', 'This is the last way to sign in to the account; add another first.');
    }
    await trx.deleteFrom('player_identities').where('player_id', '=', playerId).where('provider', '=', provider).execute();
  });
}
