import { Migrator, sql, type MigrationResultSet } from 'kysely';
import { migrations } from '../migrations/index';
import type { Db } from './database';

/** Brings the schema up to the newest migration. Throws, naming the step, on failure. */
export async function migrateToLatest(db: Db): Promise<string[]> {
  // Pin kysely's bookkeeping tables to the schema we run in: its existence
  // check looks across all schemas and would otherwise be fooled by another
  // schema's tables on a shared server.
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    migrationTableSchema: rows[0]!.schema,
  });
  const result: MigrationResultSet = await migrator.migrateToLatest();
  if (result.error) {
    const failed = result.results?.find((r) => r.status === 'Error')?.migrationName ?? '(bookkeeping)';
    const reason = result.error instanceof Error ? result.error.message : String(result.error);
    throw new Error(`migration ${failed} failed: ${reason}`, { cause: result.error });
  }
  return (result.results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
