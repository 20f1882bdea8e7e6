import type { Selectable, Transaction } from 'kysely';
import { writeAudit, type AuditActor } from '../changes/audit';
import type { Ctx } from '../contracts/context';
import { isoSeconds, jsonb } from '../platform/database';
import { erasePlayer } from '../changes/erasure';
import { ApiError, missingField } from '../contracts/errors';
import type { Database, PlayersTable } from '../contracts/tables';
import { afterCommit } from '../changes/effects';
import type { EraseConfirmation, Player, ProfileUpdate } from '../schemas/players';

/** Player profiles and self-erasure. */

/** The public projection never carries credentials, ban state, identities or stats. */
export const PUBLIC_COLUMNS = ['id', 'username', 'display_name', 'avatar_url', 'metadata', 'inserted_at', 'updated_at'] as const;

/** Usernames are stored in at most this many characters, so a longer one names nobody. */
const USERNAME_COLUMN_MAX = 255;

export function profileView(row: Pick<Selectable<PlayersTable>, (typeof PUBLIC_COLUMNS)[number]>): Player {
  return {
    id: row.id,
    username: row.username,
    display_name: row.display_name,
    avatar_url: row.avatar_url,
    metadata: row.metadata ?? {},
    inserted_at: isoSeconds(row.inserted_at),
    updated_at: isoSeconds(row.updated_at),
  };
}

export function getPlayer(ctx: Pick<Ctx, 'db' | 'profiles'>, id: string): Player | Promise<Player> {
  return ctx.profiles.read(id, async () => {
    const row = await ctx.db.selectFrom('players').select(PUBLIC_COLUMNS).where('id', '=', id).executeTakeFirst();
    if (!row) throw new ApiError('player.not_found', 'No such player.');
    return profileView(row);
  });
}

/**
 * Exact-username lookup, so a client can find a friend without passing ids
 * around by hand (decision 0015). A list, empty when nobody has that name, so
 * the shape can grow into a search without breaking clients.
 */
export async function findPlayersByUsername(ctx: Pick<Ctx, 'db'>, username: string): Promise<{ players: Player[] }> {
  if (username.length > USERNAME_COLUMN_MAX) return { players: [] };
  const rows = await ctx.db.selectFrom('players').select(PUBLIC_COLUMNS).where('username', '=', username).limit(1).execute();
  return { players: rows.map(profileView) };
}

/** Applies a profile update; omitted keys stay as they are. */
export async function updatePlayer(ctx: Pick<Ctx, 'db' | 'clock' | 'auth' | 'live' | 'profiles' | 'leaderboards'>, id: string, update: ProfileUpdate): Promise<Player> {
  const { metadata, ...text } = update;
  const changes = { ...text, ...(metadata !== undefined ? { metadata: jsonb(metadata) } : {}) };
  const row = await ctx.db
    .updateTable('players')
    .set({ ...changes, updated_at: new Date(ctx.clock.now()) })
    .where('id', '=', id)
    .returning(PUBLIC_COLUMNS)
    .executeTakeFirst();
  if (!row) throw new ApiError('player.not_found', 'No such player.');
  await afterCommit(ctx, { kind: 'profile_changed', playerId: id });
  return profileView(row);
}

/**
 * Self-erase. The password is checked outside the transaction
 * (the hash is slow); the transaction then re-reads the hash under a row lock
 * and erases only if it is the one that was checked, so a password changed in
 * between answers 409 and deletes nothing. The audit row commits with the
 * erasure, and the player's cached tokens are dropped right after commit.
 */
export async function eraseSelf(ctx: Ctx, playerId: string, { password }: EraseConfirmation): Promise<void> {
  const player = await ctx.db
    .selectFrom('players')
    .select(['id', 'hashed_password'])
    .where('id', '=', playerId)
    .executeTakeFirst();
  if (!player) throw new ApiError('unauthenticated');
  if (player.hashed_password !== null) {
    if (password === undefined) throw missingField('password');
    const ok = await ctx.passwords.verify(password, player.hashed_password);
    if (!ok) throw new ApiError('player.confirmation_failed', 'The password does not match; nothing was deleted.');
  }
  await ctx.seams?.eraseAfterCheck?.(playerId);

  let outcome: 'erased' | 'gone' | 'changed';
  try {
    outcome = await ctx.db.transaction().execute(async (trx) => {
      const current = await trx
        .selectFrom('players')
        .select('hashed_password')
        .where('id', '=', playerId)
        .forUpdate()
        .executeTakeFirst();
      if (!current) return 'gone' as const;
      if (current.hashed_password !== player.hashed_password) return 'changed' as const;
      await eraseAudited(trx, ctx, playerId, { id: playerId, display: playerId, source: 'player' }, 'self');
      return 'erased' as const;
    });
  } catch (err) {
    ctx.log.error('player_erase_failed', { player_id: playerId, error: err instanceof Error ? err.message : String(err) });
    throw new ApiError('player.erase_failed', 'The erasure failed and was rolled back; nothing was deleted.');
  }
  if (outcome === 'gone') {
    await afterCommit(ctx, { kind: 'player_sessions_ended', playerId });
    throw new ApiError('unauthenticated');
  }
  if (outcome === 'changed') {
    throw new ApiError('player.credentials_changed', 'The password changed during the request; nothing was deleted. Retry.');
  }
  // The erased player's live sockets go with the tokens.
  await afterCommit(ctx, { kind: 'player_sessions_ended', playerId }, { kind: 'player_erased', playerId });
  ctx.log.info('player_erased', { player_id: playerId, via: 'self' });
}

/**
 * Erases a player and writes its audit row in the caller's transaction, so a
 * failed audit write rolls the erasure back (self-erase and operator erase).
 * The username is not kept: the trail outlives the player, and it would be
 * personal data left behind.
 */
export async function eraseAudited(trx: Transaction<Database>, ctx: Ctx, playerId: string, actor: AuditActor, via: 'self' | 'ops'): Promise<void> {
  const rows = await erasePlayer(trx, playerId, ctx.extensions);
  await writeAudit(trx, ctx, { actor, action: 'player.erase', targetType: 'player', targetId: playerId, outcome: 'ok', succeeded: 1, details: { via, rows } });
}
