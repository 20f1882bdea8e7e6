import { sql, type Kysely } from 'kysely';

// Closed votes of matches (and, later, worlds: `match_id` then holds the
// world's id, so it has no foreign key). A row is written once, when its
// vote closes; `votes_cast` keeps bare voter ids, which outlive erasure as
// match records do. `visibility` and `status` decide whether a read shows
// `votes_cast` (docs/decisions/0033-votes.md).
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('votes')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('match_id', 'uuid', (c) => c.notNull())
    .addColumn('template', 'varchar(255)', (c) => c.notNull())
    .addColumn('method', 'varchar(16)', (c) => c.notNull())
    .addColumn('options', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('votes_cast', 'jsonb', (c) => c.defaultTo(sql`'{}'::jsonb`))
    .addColumn('result', 'jsonb', (c) => c.defaultTo(sql`'{}'::jsonb`))
    .addColumn('distribution', 'jsonb', (c) => c.defaultTo(sql`'{}'::jsonb`))
    .addColumn('turnout', 'double precision', (c) => c.defaultTo(0))
    .addColumn('eligible_count', 'integer', (c) => c.defaultTo(0))
    .addColumn('window_ms', 'integer', (c) => c.notNull())
    .addColumn('visibility', 'varchar(16)', (c) => c.notNull().defaultTo('live'))
    .addColumn('status', 'varchar(16)', (c) => c.notNull())
    .addColumn('opened_at', 'timestamptz')
    .addColumn('closed_at', 'timestamptz')
    .addColumn('inserted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('votes_match_id').on('votes').columns(['match_id', 'opened_at']).execute();
  await db.schema.createIndex('votes_template').on('votes').column('template').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('votes').execute();
}
