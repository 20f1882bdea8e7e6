import { Migrator, sql, type MigrationResultSet } from 'kysely';
import { migrations } from '../migrations/index';
import type { Db } from './database';

/**
 * Brings the schema up to the newest migration, one step at a time so a long
 * upgrade reports progress (`onStep` after each). Throws, naming the step, on
 * failure; the steps before it stay applied.
 */
export async function migrateToLatest(db: Db, onStep?: (step: { name: string; ms: number }) => void): Promise<string[]> {
  // Pin kysely's bookkeeping tables to the schema we run in: its existence
  // check looks across all schemas and would otherwise be fooled by another
  // schema's tables on a shared server.
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    migrationTableSchema: rows[0]!.schema,
  });
  const applied: string[] = [];
  for (;;) {
    const started = Date.now();
    const result: MigrationResultSet = await migrator.migrateUp();
    if (result.error) {
      const failed = result.results?.find((r) => r.status === 'Error')?.migrationName ?? '(bookkeeping)';
      const reason = result.error instanceof Error ? result.error.message : String(result.error);
      throw new Error(`migration ${failed} failed: ${reason}`, { cause: result.error });
    }
    const done = (result.results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
    if (done.length === 0) return applied;
    applied.push(...done);
    for (const name of done) onStep?.({ name, ms: Date.now() - started });
  }
}
