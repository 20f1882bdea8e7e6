import { countInactiveGuests, eraseInactiveGuest, findInactiveGuests } from '../accounts/guests';
import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { AuditActor } from '../changes/audit';
import { PURGE_LIMIT_DEFAULT, PURGE_LIMIT_MAX, type GuestPurgeRequest, type GuestPurgeResult } from '../schemas/ops';
import { auditCommitted } from './audit';

/**
 * `POST /ops/players/guests/purge`: erases unclaimed guests unseen for a
 * while, in batches. The caller states how many it expects to erase
 * (`confirm_count`, read off a dry run), so a cutoff typed wrong — a zero too
 * many, seconds for hours — is refused before anything goes. Each guest goes
 * in its own transaction through the reaper's erasure, which re-checks it is
 * still an unclaimed guest; one bad row costs one player, not the batch.
 */

export async function purgeGuests(ctx: Ctx, actor: AuditActor, request: GuestPurgeRequest): Promise<GuestPurgeResult> {
  const dryRun = request.dry_run === true;
  if (!dryRun && request.confirm_count === undefined) {
    throw new ApiError('ops.confirmation_required', 'A purge that deletes needs confirm_count: the number a dry run matched.');
  }
  const limit = Math.min(PURGE_LIMIT_MAX, Math.max(1, request.limit ?? PURGE_LIMIT_DEFAULT));
  // Past the epoch nobody was seen anyway; clamping keeps a huge value a valid date.
  const cutoff = request.inactive_for_seconds === 0 ? null : new Date(Math.max(0, ctx.clock.now() - request.inactive_for_seconds * 1000));

  const matched = await countInactiveGuests(ctx.db, cutoff);
  if (dryRun) return { matched, deleted: 0, skipped: 0, failed: 0, remaining: matched, dry_run: true };
  if (request.confirm_count !== matched) {
    throw new ApiError('ops.purge_count_mismatch', 'confirm_count differs from the guests the cutoff selects now; nothing was deleted.', {
      confirm_count: request.confirm_count,
      matched,
    });
  }

  const candidates = await findInactiveGuests(ctx.db, cutoff, limit);
  const erased: string[] = [];
  const notErased: Record<string, string> = {};
  let skipped = 0;
  let failed = 0;
  for (const playerId of candidates) {
    try {
      if ((await eraseInactiveGuest(ctx, playerId, cutoff)) === 'deleted') {
        erased.push(playerId);
      } else {
        skipped++;
        notErased[playerId] = 'skipped: claimed or seen since the cutoff';
      }
    } catch (err) {
      failed++;
      notErased[playerId] = 'failed: the erasure did not commit';
      ctx.log.error('guest_purge_erase_failed', { player_id: playerId, actor_id: actor.id, error: err instanceof Error ? err.message : String(err) });
    }
  }
  const remaining = await countInactiveGuests(ctx.db, cutoff);
  const result: GuestPurgeResult = { matched, deleted: erased.length, skipped, failed, remaining, dry_run: false };

  await auditCommitted(ctx, {
    actor,
    action: 'player.guest_purge',
    targetType: 'guest_batch',
    outcome: failed === 0 ? 'ok' : erased.length > 0 ? 'partial' : 'error',
    succeeded: erased.length,
    failed,
    details: { inactive_for_seconds: request.inactive_for_seconds, limit, matched, skipped, remaining, erased, not_erased: notErased },
  });
  ctx.log.info('guests_purged', { actor_id: actor.id, deleted: result.deleted, skipped, failed, remaining });
  return result;
}
