import { sql, type Kysely } from 'kysely';

// Leaderboard entries (one row per board and player). Boards live in each node's memory
// (runtime/leaderboards/); this table is what a node writes them to on its
// flush interval and reloads them from at boot. `sub_score` is stored and
// breaks ties (decision 0032). The foreign key to players never cascades
// (runtime/platform/erasure.ts).
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('leaderboard_entries')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('leaderboard_id', 'varchar(255)', (c) => c.notNull())
    .addColumn('player_id', 'uuid', (c) => c.notNull().references('players.id'))
    .addColumn('score', 'bigint', (c) => c.notNull())
    .addColumn('sub_score', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .addUniqueConstraint('leaderboard_entries_board_player', ['leaderboard_id', 'player_id'])
    .execute();
  await db.schema.createIndex('leaderboard_entries_board_score').on('leaderboard_entries').columns(['leaderboard_id', 'score']).execute();
  // Ours: erasure deletes by player across every board.
  await db.schema.createIndex('leaderboard_entries_player').on('leaderboard_entries').column('player_id').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('leaderboard_entries').execute();
}
