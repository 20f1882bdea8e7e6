import type { Selectable } from 'kysely';
import { displayNameProblems } from './accounts';
import { writeAudit } from './audit';
import type { Ctx } from './context';
import { isoSeconds, jsonb } from './database';
import { erasePlayer } from './erasure';
import { ApiError, missingField, validationFailed } from './errors';
import { isUuid } from './ids';
import type { PlayersTable } from './schema';

/** Player profiles and self-erasure. */

/** The public projection; identical for every viewer. Never credentials, ban state, identities or stats. */
export interface PlayerView {
  id: string;
  username: string;
  display_name: string | null;
  avatar_url: string | null;
  metadata: Record<string, unknown>;
  inserted_at: string | null;
  updated_at: string | null;
}

export const METADATA_MAX_BYTES = 16_384;
const PUBLIC_COLUMNS = ['id', 'username', 'display_name', 'avatar_url', 'metadata', 'inserted_at', 'updated_at'] as const;

function view(row: Pick<Selectable<PlayersTable>, (typeof PUBLIC_COLUMNS)[number]>): PlayerView {
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

export async function getPlayer(ctx: Pick<Ctx, 'db'>, id: string): Promise<PlayerView> {
  if (!isUuid(id)) throw new ApiError('player.not_found', 'No such player.');
  const row = await ctx.db.selectFrom('players').select(PUBLIC_COLUMNS).where('id', '=', id).executeTakeFirst();
  if (!row) throw new ApiError('player.not_found', 'No such player.');
  return view(row);
}

/**
 * Exact-username lookup, so a client can find a friend without passing ids
 * around by hand (decision 0015). A list, empty when nobody has that name, so
 * the shape can grow into a search without breaking clients.
 */
export async function findPlayersByUsername(ctx: Pick<Ctx, 'db'>, username: string): Promise<{ players: PlayerView[] }> {
  const rows = await ctx.db.selectFrom('players').select(PUBLIC_COLUMNS).where('username', '=', username).limit(1).execute();
  return { players: rows.map(view) };
}

/**
 * Applies the recognised keys of a profile update (`display_name`,
 * `avatar_url`, `metadata`); other keys are ignored and omitted ones stay.
 * Any invalid value fails the whole update (422 with the `errors` key).
 */
export async function updatePlayer(ctx: Pick<Ctx, 'db' | 'clock'>, id: string, body: Record<string, unknown>): Promise<PlayerView> {
  const problems: Record<string, string[]> = {};
  const changes: { display_name?: string; avatar_url?: string; metadata?: unknown } = {};
  if (body.display_name !== undefined) {
    const p = displayNameProblems(body.display_name);
    if (p.length) problems.display_name = p;
    else changes.display_name = body.display_name as string;
  }
  if (body.avatar_url !== undefined) {
    if (typeof body.avatar_url !== 'string') problems.avatar_url = ['must be a string'];
    else changes.avatar_url = body.avatar_url;
  }
  if (body.metadata !== undefined) {
    const m = body.metadata;
    if (m === null || typeof m !== 'object' || Array.isArray(m)) problems.metadata = ['must be a JSON object'];
    else if (new TextEncoder().encode(JSON.stringify(m)).byteLength > METADATA_MAX_BYTES) problems.metadata = ['must be 16 KB or less'];
    else changes.metadata = jsonb(m);
  }
  if (Object.keys(problems).length) throw validationFailed('errors', problems);

  const row = await ctx.db
    .updateTable('players')
    .set({ ...changes, updated_at: new Date(ctx.clock.now()) })
    .where('id', '=', id)
    .returning(PUBLIC_COLUMNS)
    .executeTakeFirst();
  if (!row) throw new ApiError('player.not_found', 'No such player.');
  return view(row);
}

/**
 * Self-erase. The password is checked outside the transaction
 * (the hash is slow); the transaction then re-reads the hash under a row lock
 * and erases only if it is the one that was checked, so a password changed in
 * between answers 409 and deletes nothing. The audit row commits with the
 * erasure, and the player's cached tokens are dropped right after commit.
 */
export async function eraseSelf(ctx: Ctx, playerId: string, body: Record<string, unknown>): Promise<void> {
  const player = await ctx.db
    .selectFrom('players')
    .select(['id', 'hashed_password'])
    .where('id', '=', playerId)
    .executeTakeFirst();
  if (!player) throw new ApiError('unauthenticated');
  if (player.hashed_password !== null) {
    if (typeof body.password !== 'string') throw missingField('password');
    const ok = await ctx.passwords.verify(body.password, player.hashed_password);
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
      const rows = await erasePlayer(trx, playerId);
      await writeAudit(trx, ctx, {
        actor: { id: playerId, display: playerId, source: 'player' },
        action: 'player.erase',
        targetType: 'player',
        targetId: playerId,
        outcome: 'ok',
        succeeded: 1,
        details: { via: 'self', rows },
      });
      return 'erased' as const;
    });
  } catch (err) {
    ctx.log.error('player_erase_failed', { player_id: playerId, error: err instanceof Error ? err.message : String(err) });
    throw new ApiError('player.erase_failed', 'The erasure failed and was rolled back; nothing was deleted.');
  }
  if (outcome === 'gone') {
    ctx.auth.evictPlayer(playerId);
    ctx.live.disconnect(playerId);
    throw new ApiError('unauthenticated');
  }
  if (outcome === 'changed') {
    throw new ApiError('player.credentials_changed', 'The password changed during the request; nothing was deleted. Retry.');
  }
  // The erased player's live sockets go with the tokens.
  ctx.auth.evictPlayer(playerId);
  ctx.live.disconnect(playerId);
  ctx.log.info('player_erased', { player_id: playerId, via: 'self' });
}
