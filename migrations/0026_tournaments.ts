import { sql, type Kysely } from 'kysely';

// Tournaments the game declares (runtime/tournaments/declarations.ts), who
// entered them (ours: asobi kept entrants in memory and lost them on a
// restart, decision 0034) and the standings frozen when one finishes.
// Foreign keys to players never cascade (runtime/platform/erasure.ts).
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('tournaments')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    // Ours: the name a declaration gives it in the game's catalogue.
    .addColumn('slug', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('name', 'varchar(128)', (c) => c.notNull())
    .addColumn('leaderboard_id', 'varchar(255)', (c) => c.notNull())
    .addColumn('max_entries', 'integer')
    .addColumn('entry_fee', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('rewards', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('status', 'varchar(16)', (c) => c.notNull().defaultTo('pending'))
    .addColumn('start_at', 'timestamptz', (c) => c.notNull())
    .addColumn('end_at', 'timestamptz', (c) => c.notNull())
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('finished_at', 'timestamptz')
    .addColumn('inserted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('tournaments_status').on('tournaments').column('status').execute();
  await db.schema.createIndex('tournaments_start_at').on('tournaments').column('start_at').execute();

  await db.schema
    .createTable('tournament_entrants')
    .addColumn('tournament_id', 'uuid', (c) => c.notNull().references('tournaments.id'))
    .addColumn('player_id', 'uuid', (c) => c.notNull().references('players.id'))
    // What the entrant paid, so a cancellation refunds exactly that.
    .addColumn('fee_currency', 'varchar(32)')
    .addColumn('fee_amount', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('joined_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('tournament_entrants_pk', ['tournament_id', 'player_id'])
    .execute();
  await db.schema.createIndex('tournament_entrants_player').on('tournament_entrants').column('player_id').execute();

  await db.schema
    .createTable('tournament_standings')
    .addColumn('tournament_id', 'uuid', (c) => c.notNull().references('tournaments.id'))
    .addColumn('rank', 'integer', (c) => c.notNull())
    .addColumn('player_id', 'uuid', (c) => c.notNull().references('players.id'))
    .addColumn('score', 'bigint', (c) => c.notNull())
    .addColumn('sub_score', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('reward', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addPrimaryKeyConstraint('tournament_standings_pk', ['tournament_id', 'rank'])
    .execute();
  await db.schema.createIndex('tournament_standings_player').on('tournament_standings').column('player_id').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('tournament_standings').execute();
  await db.schema.dropTable('tournament_entrants').execute();
  await db.schema.dropTable('tournaments').execute();
}
