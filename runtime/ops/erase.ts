import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { AuditActor } from '../changes/audit';
import { afterCommit } from '../changes/effects';
import { eraseAudited } from '../players/players';
import type { OperatorEraseConfirmation, OperatorErased } from '../schemas/ops';

/**
 * `POST /ops/players/:id/erase`. The operator proves they mean this player by
 * echoing its username; the erasure is the one every other path uses
 * (runtime/platform/erasure.ts), and its audit row commits with it or not at
 * all: an erasure nobody can account for must not happen.
 */

export async function eraseByOperator(ctx: Ctx, actor: AuditActor, playerId: string, { username }: OperatorEraseConfirmation): Promise<OperatorErased> {
  let outcome: 'erased' | 'missing' | 'mismatch';
  try {
    outcome = await ctx.db.transaction().execute(async (trx) => {
      // The echo is checked under the row lock, so a rename racing the erasure cannot slip past it.
      const player = await trx.selectFrom('players').select('username').where('id', '=', playerId).forUpdate().executeTakeFirst();
      if (!player) return 'missing' as const;
      if (player.username !== username) return 'mismatch' as const;
      await eraseAudited(trx, ctx, playerId, actor, 'ops');
      return 'erased' as const;
    });
  } catch (err) {
    ctx.log.error('player_erase_failed', { player_id: playerId, via: 'ops', actor_id: actor.id, error: err instanceof Error ? err.message : String(err) });
    throw new ApiError('player.erase_failed', 'The erasure failed and was rolled back; nothing was deleted.');
  }
  if (outcome === 'missing') throw new ApiError('ops.not_found', 'No such player.');
  if (outcome === 'mismatch') throw new ApiError('ops.confirmation_mismatch', "The username does not match the player's; nothing was deleted.");
  await afterCommit(ctx, { kind: 'player_sessions_ended', playerId }, { kind: 'player_erased', playerId });
  ctx.log.info('player_erased', { player_id: playerId, via: 'ops', actor_id: actor.id });
  return { player_id: playerId, erased: true };
}
