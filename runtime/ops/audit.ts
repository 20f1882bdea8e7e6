import type { Ctx } from '../contracts/context';
import { writeAudit, type AuditRecord } from '../changes/audit';
import { isoSeconds } from '../platform/database';
import type { AuditEntry, ListRules } from '../schemas/ops';
import { sqlPage, type ListPage, type ListRequest } from './lists';

/** `GET /ops/audit` (decision 0037): the append-only trail, listed under the shared list rules. */

export const AUDIT_LIST: ListRules = {
  sorts: ['id', 'occurred_at', 'action', 'actor_id', 'outcome'],
  unique: 'id',
  // Newest first: what an operator opens the trail to see.
  default: { sort: 'occurred_at', order: 'desc' },
  filters: { action: 'text', actor_id: 'text', actor_source: 'text', target_type: 'text', target_id: 'text', outcome: 'text' },
  q: ['action', 'actor_display', 'target_id'],
};

const COLUMNS = [
  'id',
  'actor_id',
  'actor_display',
  'actor_source',
  'actor_attested',
  'action',
  'target_type',
  'target_id',
  'outcome',
  'succeeded_count',
  'failed_count',
  'details',
  'occurred_at',
] as const;

export async function listAudit(ctx: Pick<Ctx, 'db'>, request: ListRequest): Promise<ListPage<AuditEntry>> {
  const page = await sqlPage(ctx.db.selectFrom('ops_audit_entries').select(COLUMNS), AUDIT_LIST, request);
  return {
    ...page,
    data: page.data.map((row) => ({
      ...row,
      actor_attested: Boolean(row.actor_attested),
      succeeded_count: Number(row.succeeded_count),
      failed_count: Number(row.failed_count),
      details: row.details ?? {},
      occurred_at: isoSeconds(row.occurred_at)!,
    })),
  };
}

/**
 * The row of an operator change that has already committed on its own (a
 * purge batch, an extension action): a lost row cannot undo the change, so
 * the row goes to the error log in full instead and the caller's answer
 * stands. A change that must not happen unrecorded writes its row in its own
 * transaction instead (the operator erasure).
 */
export async function auditCommitted(ctx: Pick<Ctx, 'db' | 'ids' | 'clock' | 'log'>, record: AuditRecord): Promise<void> {
  try {
    await writeAudit(ctx.db, ctx, record);
  } catch (err) {
    ctx.log.error('ops_audit_write_failed', {
      action: record.action,
      actor_id: record.actor.id,
      outcome: record.outcome,
      details: record.details,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}
