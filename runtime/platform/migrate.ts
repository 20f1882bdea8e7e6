import { Migrator, sql, type MigrationResultSet } from 'kysely';
import { migrations } from '../../migrations/index';
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
  const schema = rows[0]!.schema;
  const migrator = new Migrator({
    db: withOwnSchemaIntrospection(db, schema),
    provider: { getMigrations: async () => migrations },
    migrationTableSchema: schema,
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

/**
 * `db` whose introspection sees only `schema`. Kysely's own reads every
 * schema's columns and calls `has_schema_privilege` by name on each, which
 * fails with "schema does not exist" when another schema on the same server
 * is dropped meanwhile (parallel test files, another application's
 * deployment): a migration must not depend on its neighbours. The migrator
 * only asks which schemas and tables exist.
 */
function withOwnSchemaIntrospection(db: Db, schema: string): Db {
  const introspection = {
    async getSchemas() {
      const { rows } = await sql<{ name: string }>`select nspname as name from pg_catalog.pg_namespace where nspname = ${schema}`.execute(db);
      return rows.map((r) => ({ name: r.name }));
    },
    async getTables() {
      const { rows } = await sql<{ name: string; kind: string }>`
        select c.relname as name, c.relkind as kind
        from pg_catalog.pg_class c join pg_catalog.pg_namespace ns on ns.oid = c.relnamespace
        where ns.nspname = ${schema} and c.relkind in ('r', 'v', 'p')`.execute(db);
      return rows.map((r) => ({ name: r.name, schema, isView: r.kind === 'v', columns: [] }));
    },
    async getMetadata() {
      return { tables: await this.getTables() };
    },
  };
  return new Proxy(db, {
    get(target, prop, receiver) {
      if (prop === 'introspection') return introspection;
      const value = Reflect.get(target, prop, target);
      // Kysely's methods use private fields: they must run on the real instance.
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
