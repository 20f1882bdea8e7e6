import { sql, type Kysely } from 'kysely';

// Players, identities, tokens, stats and the operator audit trail.
// Foreign keys never cascade: erasure deletes
// explicitly so every table is accounted for.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('players')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('username', 'varchar(255)', (c) => c.notNull().unique())
    .addColumn('display_name', 'varchar(255)')
    .addColumn('avatar_url', 'text')
    .addColumn('hashed_password', 'varchar(255)')
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('banned_at', 'timestamptz')
    .addColumn('inserted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('player_identities')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('player_id', 'uuid', (c) => c.notNull().references('players.id'))
    .addColumn('provider', 'varchar(64)', (c) => c.notNull())
    .addColumn('provider_uid', 'varchar(512)', (c) => c.notNull())
    .addColumn('provider_email', 'varchar(512)')
    .addColumn('provider_display_name', 'varchar(512)')
    .addColumn('provider_metadata', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('inserted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('player_identities_provider_uid', ['provider', 'provider_uid'])
    .execute();
  await db.schema.createIndex('player_identities_player_id').on('player_identities').column('player_id').execute();

  await db.schema
    .createTable('player_tokens')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('user_id', 'uuid', (c) => c.notNull().references('players.id'))
    .addColumn('token', 'varchar(128)', (c) => c.notNull())
    .addColumn('context', 'varchar(16)', (c) => c.notNull())
    .addColumn('family_id', 'varchar(64)')
    .addColumn('used_at', 'timestamptz')
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('inserted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('player_tokens_token_context').unique().on('player_tokens').columns(['token', 'context']).execute();
  await db.schema.createIndex('player_tokens_user_id').on('player_tokens').column('user_id').execute();
  await db.schema.createIndex('player_tokens_family_id').on('player_tokens').column('family_id').execute();

  await db.schema
    .createTable('player_stats')
    .addColumn('player_id', 'uuid', (c) => c.primaryKey().references('players.id'))
    .addColumn('games_played', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('wins', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('losses', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('rating', 'double precision', (c) => c.notNull().defaultTo(1500))
    .addColumn('rating_deviation', 'double precision', (c) => c.notNull().defaultTo(350))
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('ops_audit_entries')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('actor_id', 'varchar(255)', (c) => c.notNull())
    .addColumn('actor_display', 'varchar(255)', (c) => c.notNull())
    .addColumn('actor_source', 'varchar(64)', (c) => c.notNull())
    .addColumn('actor_attested', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('action', 'varchar(128)', (c) => c.notNull())
    .addColumn('target_type', 'varchar(64)')
    .addColumn('target_id', 'varchar(255)')
    .addColumn('outcome', 'varchar(16)', (c) => c.notNull())
    .addColumn('succeeded_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('failed_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('details', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('occurred_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('ops_audit_actor').on('ops_audit_entries').columns(['actor_id', 'occurred_at']).execute();
  await db.schema.createIndex('ops_audit_action').on('ops_audit_entries').columns(['action', 'occurred_at']).execute();
  await db.schema.createIndex('ops_audit_target').on('ops_audit_entries').column('target_id').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['ops_audit_entries', 'player_stats', 'player_tokens', 'player_identities', 'players']) {
    await db.schema.dropTable(table).execute();
  }
}
