import { sql, type Kysely } from 'kysely';

// Cloud saves and storage objects. Names (slot, collection, key) are bounded
// at 255 characters so the unique indexes that settle concurrent writers stay
// within PostgreSQL's index-row limit. `storage.player_id` is null for the
// owner-less namespace only game scripts reach; the two partial unique
// indexes keep that namespace and the per-player rows apart, so a shared
// `scores/top` and a player's `scores/top` are distinct rows. Perms are
// checked here as well as in the service: anything else is a bug.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('cloud_saves')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('player_id', 'uuid', (c) => c.notNull().references('players.id'))
    .addColumn('slot', 'varchar(255)', (c) => c.notNull())
    .addColumn('data', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('version', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('cloud_saves_player_slot', ['player_id', 'slot'])
    .execute();

  await db.schema
    .createTable('storage')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('collection', 'varchar(255)', (c) => c.notNull())
    .addColumn('key', 'varchar(255)', (c) => c.notNull())
    .addColumn('player_id', 'uuid', (c) => c.references('players.id'))
    .addColumn('value', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('version', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('read_perm', 'varchar(8)', (c) => c.notNull().defaultTo('owner').check(sql`read_perm in ('public', 'owner')`))
    .addColumn('write_perm', 'varchar(8)', (c) => c.notNull().defaultTo('owner').check(sql`write_perm in ('public', 'owner')`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('storage_shared_key').on('storage').columns(['collection', 'key']).unique().where(sql.ref('player_id'), 'is', null).execute();
  // Leads with the owner: every player route lists or reads within one player's collection.
  await db.schema.createIndex('storage_player_key').on('storage').columns(['player_id', 'collection', 'key']).unique().where(sql.ref('player_id'), 'is not', null).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('storage').execute();
  await db.schema.dropTable('cloud_saves').execute();
}
