import type { Transaction } from 'kysely';
import type { Ctx } from '../contracts/context';
import { jsonb, type Db } from '../platform/database';
import type { Database } from '../contracts/tables';

/**
 * The operator audit trail. Rows are
 * append-only: this module only ever inserts, and nothing else writes the
 * table. Rows hold no foreign keys, so they outlive erased players.
 */
export interface AuditActor {
  id: string;
  display: string;
  /** Where the actor came from: `player`, `ops_secret`, `console`, `system`, ... */
  source: string;
  /** Whether `display` was proven rather than self-asserted. */
  attested?: boolean;
}

export interface AuditRecord {
  actor: AuditActor;
  action: string;
  targetType?: string;
  targetId?: string;
  outcome: 'ok' | 'partial' | 'error';
  succeeded?: number;
  failed?: number;
  details?: Record<string, unknown>;
}

/**
 * Inserts one row with `executor`: pass the transaction whose change the row
 * records when the row must commit or roll back with it (erasure).
 */
export async function writeAudit(
  executor: Db | Transaction<Database>,
  ctx: Pick<Ctx, 'ids' | 'clock'>,
  record: AuditRecord,
): Promise<void> {
  await executor
    .insertInto('ops_audit_entries')
    .values({
      id: ctx.ids.uuid(),
      actor_id: record.actor.id,
      actor_display: record.actor.display,
      actor_source: record.actor.source,
      actor_attested: record.actor.attested ?? false,
      action: record.action,
      target_type: record.targetType ?? null,
      target_id: record.targetId ?? null,
      outcome: record.outcome,
      succeeded_count: record.succeeded ?? 0,
      failed_count: record.failed ?? 0,
      details: jsonb(record.details ?? {}),
      occurred_at: new Date(ctx.clock.now()),
    })
    .execute();
}
