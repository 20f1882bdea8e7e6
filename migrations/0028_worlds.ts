import { sql, type Kysely } from 'kysely';

// Persistent worlds. `zone_snapshots` holds what each zone of a persistent
// world last saved (entities keep bare ids: erasure leaves them, and they no
// longer resolve to anybody). `persistent_worlds` is ours: the reference's
// snapshots name a world but not its mode or seed, which a restarted node
// needs to bring the world back.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('persistent_worlds')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('mode', 'varchar(255)', (c) => c.notNull())
    .addColumn('seed', 'bigint', (c) => c.notNull())
    .addColumn('inserted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createTable('zone_snapshots')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('world_id', 'uuid', (c) => c.notNull())
    .addColumn('zone_x', 'integer', (c) => c.notNull())
    .addColumn('zone_y', 'integer', (c) => c.notNull())
    .addColumn('entities', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('zone_state', 'jsonb', (c) => c.defaultTo(sql`'{}'::jsonb`))
    .addColumn('entity_timers', 'jsonb', (c) => c.defaultTo(sql`'{}'::jsonb`))
    .addColumn('spawner_state', 'jsonb', (c) => c.defaultTo(sql`'{}'::jsonb`))
    .addColumn('tick', 'bigint', (c) => c.defaultTo(0))
    .addColumn('snapshot_at', 'timestamptz', (c) => c.notNull())
    .addUniqueConstraint('zone_snapshots_world_zone', ['world_id', 'zone_x', 'zone_y'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('zone_snapshots').execute();
  await db.schema.dropTable('persistent_worlds').execute();
}
