import { sql, type Transaction } from 'kysely';
import { insertPlayer, issueOrFail } from './accounts';
import type { Ctx } from '../contracts/context';
import { base64ToBytes, bytesToBase64, bytesToHex, constantTimeEqual, randomBytes } from '../platform/crypto';
import { isUniqueViolation, jsonb, type Db } from '../platform/database';
import { erasePlayer } from '../changes/erasure';
import { ApiError, rateLimited } from '../contracts/errors';
import { isIdentityConflict } from './identities';
import { assertRegistrationAllowed } from './registration';
import type { Database } from '../contracts/tables';
import type { GuestDevice, GuestSignIn, GuestUpgraded, NewCredentials } from '../schemas/accounts';
import { afterCommit } from '../changes/effects';
import { issueTokenPair, revokePlayerTokens } from './tokens';

/**
 * Guest accounts. A device proves itself with
 * a (device_id, device_secret) pair; the service keeps per guest only a
 * keyed-hash verifier of the secret: HMAC-SHA256 over salt ‖ secret, keyed
 * with the operator pepper named by `key_id`, so neither a database leak nor
 * a pepper leak alone lets anyone resume a guest. The verifier lives in the
 * guest identity's `provider_metadata` (provider `guest`, uid = device_id).
 */

export const GUEST_PROVIDER = 'guest';
const SALT_BYTES = 16;
/** Guest creations take this transaction-scoped lock so the cap is counted and filled one at a time. */
const CREATE_LOCK = sql`select pg_advisory_xact_lock(hashtext('svc.guest_create'))`;
/** A reap pass erases at most this many guests, so one pass stays short. */
export const REAP_BATCH = 500;

interface GuestVerifier {
  salt: string;
  key_id: string;
  verifier: string;
  revoked: boolean;
}

/**
 * Guests are on when the game declares `guest_auth = true` (or the operator's
 * own `guest_auth` setting, which wins both ways, says so) and a usable pepper
 * exists for the current key id.
 */
export function guestsEnabled(ctx: Pick<Ctx, 'settings' | 'game'>): boolean {
  const declared = ctx.settings.guest_auth ?? ctx.game.guestAuth();
  return declared && ctx.settings.guest_verifier_pepper[ctx.settings.guest_verifier_key_id] !== undefined;
}

export function assertGuestsEnabled(ctx: Pick<Ctx, 'settings' | 'game'>): void {
  if (!guestsEnabled(ctx)) throw new ApiError('guest.disabled', 'Guest sign-in is not enabled on this deployment.');
}

async function computeVerifier(pepper: string, salt: Uint8Array, secret: Uint8Array): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey('raw', new TextEncoder().encode(pepper), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const message = new Uint8Array(salt.length + secret.length);
  message.set(salt, 0);
  message.set(secret, salt.length);
  return new Uint8Array(await crypto.subtle.sign('HMAC', key, message));
}

/** A fresh verifier under the current key id. */
async function newVerifier(ctx: Pick<Ctx, 'settings'>, secret: Uint8Array): Promise<GuestVerifier> {
  const keyId = ctx.settings.guest_verifier_key_id;
  const salt = randomBytes(SALT_BYTES);
  const verifier = await computeVerifier(ctx.settings.guest_verifier_pepper[keyId]!, salt, secret);
  return { salt: bytesToBase64(salt), key_id: keyId, verifier: bytesToBase64(verifier), revoked: false };
}

/** Constant-time check of `secret` against a stored verifier; false when its key id has no pepper any more. */
async function secretMatches(ctx: Pick<Ctx, 'settings' | 'log'>, stored: GuestVerifier, secret: Uint8Array): Promise<boolean> {
  const pepper = ctx.settings.guest_verifier_pepper[stored.key_id];
  const salt = base64ToBytes(stored.salt);
  const expected = base64ToBytes(stored.verifier);
  if (pepper === undefined || !salt || !expected) {
    ctx.log.warn('guest_verifier_unusable', { key_id: stored.key_id, reason: pepper === undefined ? 'no pepper for key id' : 'corrupt' });
    return false;
  }
  return constantTimeEqual(await computeVerifier(pepper, salt, secret), expected);
}

function storedVerifier(metadata: unknown): GuestVerifier | null {
  const m = (metadata ?? {}) as Partial<GuestVerifier>;
  if (typeof m.verifier !== 'string' || typeof m.salt !== 'string' || typeof m.key_id !== 'string') return null;
  return { salt: m.salt, key_id: m.key_id, verifier: m.verifier, revoked: m.revoked === true };
}

/**
 * SQL for "p is an unclaimed guest": no password, at least one guest
 * identity, no identity of any other provider.
 */
export function unclaimed(player: string) {
  const id = sql.ref(`${player}.id`);
  return sql<boolean>`(${sql.ref(`${player}.hashed_password`)} is null
    and exists (select 1 from player_identities g where g.player_id = ${id} and g.provider = ${GUEST_PROVIDER})
    and not exists (select 1 from player_identities o where o.player_id = ${id} and o.provider <> ${GUEST_PROVIDER}))`;
}

/** When the player's guest identity was last touched (create, resume). */
function lastSeen(player: string) {
  return sql<Date>`(select max(g.updated_at) from player_identities g where g.player_id = ${sql.ref(`${player}.id`)} and g.provider = ${GUEST_PROVIDER})`;
}

export async function countUnclaimedGuests(db: Db | Transaction<Database>): Promise<number> {
  const row = await db.selectFrom('players as p').select(sql<number>`count(*)::int`.as('n')).where(unclaimed('p')).executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Raised inside the creating transaction so it rolls back; mapped to its API error code outside. */
class CreateDenied extends Error {
  constructor(
    readonly reason: 'cap_reached' | 'count_failed',
    readonly fields: Record<string, unknown> = {},
  ) {
    super(reason);
  }
}

/**
 * `POST /auth/guest`: resumes the guest registered for the device, or creates
 * one. The caller has checked enablement and ran the client gate.
 */
export async function signInAsGuest(ctx: Ctx, device: GuestDevice): Promise<GuestSignIn> {
  const found = await ctx.db
    .selectFrom('player_identities as i')
    .leftJoin('players as p', 'p.id', 'i.player_id')
    .select(['i.id as identity_id', 'i.provider_metadata', 'p.id as player_id', 'p.username', 'p.banned_at'])
    .select(unclaimed('p').as('is_unclaimed'))
    .where('i.provider', '=', GUEST_PROVIDER)
    .where('i.provider_uid', '=', device.device_id)
    .executeTakeFirst();
  if (!found) return createGuest(ctx, device);

  if (found.player_id === null || found.username === null) {
    ctx.log.error('guest_without_player', { identity_id: found.identity_id });
    throw new ApiError('internal', 'The account of this device is missing.');
  }
  const stored = storedVerifier(found.provider_metadata);
  // Upgrade deletes the verifier: the device no longer signs anyone in.
  if (!stored) throw new ApiError('guest.already_upgraded', 'This guest account has been claimed; sign in with its credentials.');
  if (!(await secretMatches(ctx, stored, device.device_secret))) {
    throw new ApiError('guest.invalid_device_secret', 'The device secret does not match this device.');
  }
  if (stored.revoked || found.banned_at !== null) throw new ApiError('guest.revoked', 'This guest credential has been revoked.');
  if (!found.is_unclaimed) throw new ApiError('guest.already_upgraded', 'This guest account has been claimed; sign in with its credentials.');

  // Touching the identity is what "seen" means to the reaper; a verifier under
  // a retired key id is re-made under the current one, so old peppers can go.
  const rekeyed = stored.key_id === ctx.settings.guest_verifier_key_id ? null : await newVerifier(ctx, device.device_secret);
  await ctx.db
    .updateTable('player_identities')
    .set({ updated_at: new Date(ctx.clock.now()), ...(rekeyed ? { provider_metadata: jsonb(rekeyed) } : {}) })
    .where('id', '=', found.identity_id)
    .execute();
  const playerId = found.player_id;
  const pair = await issueOrFail(ctx, () => issueTokenPair(ctx.db, ctx, playerId));
  return { player_id: playerId, ...pair, username: found.username, guest: true };
}

async function createGuest(ctx: Ctx, device: GuestDevice): Promise<GuestSignIn> {
  const deny = (reason: string, fields: Record<string, unknown> = {}) =>
    ctx.log.warn('guest_create_denied', { reason, ...fields });
  try {
    assertRegistrationAllowed(ctx, 'guest');
  } catch (err) {
    deny('registration_closed');
    throw err;
  }
  const decision = ctx.limits.take('guest_global', 'node');
  if (!decision.ok) {
    deny('rate_limited');
    throw rateLimited(decision.retryAfterMs, 'guest.rate_limited');
  }
  await ctx.seams?.guestAfterLookup?.(device.device_id);

  const verifier = await newVerifier(ctx, device.device_secret);
  const username = `guest_${bytesToHex(randomBytes(8))}`;
  const cap = ctx.settings.guest_unlinked_cap;
  try {
    const signIn = await ctx.db.transaction().execute(async (trx) => {
      if (cap !== 'infinity') {
        let count: number;
        try {
          await CREATE_LOCK.execute(trx);
          await ctx.seams?.guestBeforeCount?.();
          count = await countUnclaimedGuests(trx);
        } catch (err) {
          throw new CreateDenied('count_failed', { error: err instanceof Error ? err.message : String(err) });
        }
        if (count >= cap) throw new CreateDenied('cap_reached', { count, cap });
      }
      const playerId = await insertPlayer(trx, ctx, { username, displayName: username, hashedPassword: null });
      await trx
        .insertInto('player_identities')
        .values({
          id: ctx.ids.uuid(),
          player_id: playerId,
          provider: GUEST_PROVIDER,
          provider_uid: device.device_id,
          provider_metadata: jsonb(verifier),
          updated_at: new Date(ctx.clock.now()),
        })
        .execute();
      const pair = await issueOrFail(ctx, () => issueTokenPair(trx, ctx, playerId));
      return { player_id: playerId, ...pair, username };
    });
    ctx.log.info('player_created', { player_id: signIn.player_id, via: GUEST_PROVIDER });
    return { ...signIn, guest: true, created: true };
  } catch (err) {
    if (err instanceof CreateDenied) {
      deny(err.reason, err.fields);
      if (err.reason === 'cap_reached') throw new ApiError('guest.capacity_reached', 'No more guest accounts can be created right now.');
      throw new ApiError('guest.unavailable', 'Guest accounts cannot be created right now.');
    }
    if (isIdentityConflict(err)) {
      deny('device_already_registered');
      throw new ApiError('guest.device_already_registered', 'This device was registered by a concurrent request; retry to resume.');
    }
    if (err instanceof ApiError) throw err;
    deny('create_failed', { error: err instanceof Error ? err.message : String(err) });
    throw new ApiError('guest.create_failed', 'The guest account could not be created.');
  }
}

/**
 * `POST /auth/guest/upgrade`: the unclaimed guest behind the caller's own
 * session becomes a password account. Every token it held dies (all
 * families), the device verifier is deleted (the identity row stays, so the
 * device answers `guest.already_upgraded`), and id and progress are kept.
 */
export async function upgradeGuest(ctx: Ctx, playerId: string, { username, password }: NewCredentials): Promise<GuestUpgraded> {
  const state = await guestState(ctx.db, playerId);
  if (!state) throw new ApiError('player.not_found', 'No such player.');
  if (!state.is_unclaimed) throw new ApiError('guest.not_unclaimed', 'Only an unclaimed guest account can be upgraded.');

  const hashed = await ctx.passwords.hash(password);
  let pair;
  try {
    pair = await ctx.db.transaction().execute(async (trx) => {
      await trx.selectFrom('players').select('id').where('id', '=', playerId).forUpdate().executeTakeFirst();
      const current = await guestState(trx, playerId);
      if (!current) throw new ApiError('player.not_found', 'No such player.');
      if (!current.is_unclaimed) throw new ApiError('guest.not_unclaimed', 'Only an unclaimed guest account can be upgraded.');
      const now = new Date(ctx.clock.now());
      await trx
        .updateTable('players')
        .set({
          username,
          hashed_password: hashed,
          // The generated name was only ever a placeholder; a chosen one stays.
          ...(current.display_name === current.username ? { display_name: username } : {}),
          updated_at: now,
        })
        .where('id', '=', playerId)
        .execute();
      await trx
        .updateTable('player_identities')
        .set({ provider_metadata: jsonb({ upgraded: true }), updated_at: now })
        .where('player_id', '=', playerId)
        .where('provider', '=', GUEST_PROVIDER)
        .execute();
      await revokePlayerTokens(trx, playerId);
      return issueOrFail(ctx, () => issueTokenPair(trx, ctx, playerId));
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new ApiError('auth.username_taken', 'That username is taken.', { field: 'username' });
    throw err;
  }
  await afterCommit(ctx, { kind: 'player_tokens_replaced', playerId }, { kind: 'profile_changed', playerId });
  ctx.log.info('guest_upgraded', { player_id: playerId });
  return { player_id: playerId, ...pair, username, upgraded: true };
}

async function guestState(db: Db | Transaction<Database>, playerId: string) {
  return db
    .selectFrom('players as p')
    .select(['p.username', 'p.display_name'])
    .select(unclaimed('p').as('is_unclaimed'))
    .where('p.id', '=', playerId)
    .executeTakeFirst();
}

/**
 * Unclaimed guests not seen since `cutoff`, least recently seen first (reaper,
 * ops purge). A null cutoff selects every unclaimed guest: the purge's `0`
 * must not miss one seen in the very millisecond the call reads the clock.
 */
export async function findInactiveGuests(db: Db, cutoff: Date | null, limit: number): Promise<string[]> {
  let query = db.selectFrom('players as p').select('p.id').where(unclaimed('p'));
  if (cutoff) query = query.where(lastSeen('p'), '<', cutoff);
  const rows = await query.orderBy(lastSeen('p')).orderBy('p.id').limit(limit).execute();
  return rows.map((r) => r.id);
}

/** How many guests `findInactiveGuests` would select without a limit. */
export async function countInactiveGuests(db: Db, cutoff: Date | null): Promise<number> {
  let query = db.selectFrom('players as p').select(sql<number>`count(*)::int`.as('n')).where(unclaimed('p'));
  if (cutoff) query = query.where(lastSeen('p'), '<', cutoff);
  const row = await query.executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Erases one inactive guest in its own transaction, re-checking under the
 * row lock that it is still unclaimed and (cutoff given) still unseen since `cutoff`
 * (`skipped` otherwise: it upgraded or resumed meanwhile). Cached tokens and
 * live sockets go right after commit.
 */
export async function eraseInactiveGuest(ctx: Ctx, playerId: string, cutoff: Date | null): Promise<'deleted' | 'skipped'> {
  const outcome = await ctx.db.transaction().execute(async (trx) => {
    const row = await trx
      .selectFrom('players as p')
      .select([unclaimed('p').as('is_unclaimed'), lastSeen('p').as('last_seen')])
      .where('p.id', '=', playerId)
      .forUpdate()
      .executeTakeFirst();
    if (!row || !row.is_unclaimed || row.last_seen === null || (cutoff !== null && new Date(row.last_seen).getTime() >= cutoff.getTime())) {
      return 'skipped' as const;
    }
    await erasePlayer(trx, playerId, ctx.extensions);
    return 'deleted' as const;
  });
  if (outcome === 'deleted') await afterCommit(ctx, { kind: 'player_sessions_ended', playerId }, { kind: 'player_erased', playerId });
  return outcome;
}
