import { sql, type Kysely } from 'kysely';

// Finished-match records: the audit trail behind
// `GET /matches`. `players` holds bare ids (no foreign key) so a record
// outlives the accounts it mentions.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('match_records')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('mode', 'varchar(255)')
    .addColumn('status', 'varchar(64)', (c) => c.notNull())
    .addColumn('players', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('result', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('started_at', 'timestamptz')
    .addColumn('finished_at', 'timestamptz')
    .addColumn('inserted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('match_records_mode').on('match_records').column('mode').execute();
  await db.schema.createIndex('match_records_status').on('match_records').column('status').execute();
  await db.schema.createIndex('match_records_inserted_at').on('match_records').column('inserted_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('match_records').execute();
}
