import { sql, type Kysely } from 'kysely';

// Store receipts, recorded once per (provider, transaction id): the unique
// pair is what settles two players submitting one receipt at the same time.
// `player_id` is nullable because an erased player's receipts stay, severed
// (runtime/receipts/receipts.ts registers that with the erasure registry).
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('iap_transactions')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('player_id', 'uuid', (c) => c.references('players.id'))
    .addColumn('provider', 'varchar(16)', (c) => c.notNull())
    .addColumn('transaction_id', 'varchar(255)', (c) => c.notNull())
    .addColumn('original_transaction_id', 'varchar(255)')
    .addColumn('product_id', 'varchar(255)')
    .addColumn('inserted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('iap_transactions_provider_transaction', ['provider', 'transaction_id'])
    .execute();
  await db.schema.createIndex('iap_transactions_player_id').on('iap_transactions').column('player_id').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('iap_transactions').execute();
}
