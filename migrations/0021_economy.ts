import { sql, type Kysely } from 'kysely';

// The economy: currencies, wallets and their ledger, item definitions, store
// listings and player inventories. Currencies, item definitions and listings
// come from the game's catalogue (runtime/economy/catalogue.ts) and are never
// deleted, because wallets, ledger rows and inventories point at them. The
// CHECK constraints back the services' own rules: a balance that would go
// negative or an empty stack is a bug that must fail the transaction, not a
// row. Foreign keys to players never cascade (runtime/platform/erasure.ts).
export async function up(db: Kysely<unknown>): Promise<void> {
  // Ours: the API carries currencies as bare strings on wallets and listings;
  // a table lets the database refuse a wallet in a currency the game never declared.
  await db.schema
    .createTable('currencies')
    .addColumn('code', 'varchar(32)', (c) => c.primaryKey())
    .addColumn('name', 'varchar(64)', (c) => c.notNull())
    .addColumn('active', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('inserted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('wallets')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('player_id', 'uuid', (c) => c.notNull().references('players.id'))
    .addColumn('currency', 'varchar(32)', (c) => c.notNull().references('currencies.code'))
    .addColumn('balance', 'integer', (c) => c.notNull().defaultTo(0).check(sql`balance >= 0`))
    .addColumn('inserted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('wallets_player_currency', ['player_id', 'currency'])
    .execute();
  await db.schema.createIndex('wallets_currency').on('wallets').column('currency').execute();

  // The ledger: one row per balance change, written in the change's transaction.
  await db.schema
    .createTable('transactions')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('wallet_id', 'uuid', (c) => c.notNull().references('wallets.id'))
    .addColumn('amount', 'integer', (c) => c.notNull())
    .addColumn('balance_after', 'integer', (c) => c.notNull())
    .addColumn('reason', 'varchar(64)', (c) => c.notNull())
    .addColumn('reference_type', 'varchar(64)')
    .addColumn('reference_id', 'varchar(255)')
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('inserted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('transactions_wallet').on('transactions').columns(['wallet_id', 'id']).execute();

  await db.schema
    .createTable('item_defs')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('slug', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('name', 'varchar(128)', (c) => c.notNull())
    .addColumn('category', 'varchar(64)', (c) => c.notNull())
    .addColumn('rarity', 'varchar(16)', (c) => c.notNull().defaultTo('common'))
    .addColumn('stackable', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('inserted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  // `slug` is ours: the catalogue's name for a listing, so its id stays the
  // same across edits and restarts (clients and scripts hold listing ids).
  await db.schema
    .createTable('store_listings')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('slug', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('item_def_id', 'uuid', (c) => c.notNull().references('item_defs.id'))
    .addColumn('currency', 'varchar(32)', (c) => c.notNull().references('currencies.code'))
    .addColumn('price', 'integer', (c) => c.notNull().check(sql`price > 0`))
    .addColumn('active', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('valid_from', 'timestamptz')
    .addColumn('valid_until', 'timestamptz')
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .execute();
  await db.schema.createIndex('store_listings_item_def').on('store_listings').column('item_def_id').execute();
  await db.schema.createIndex('store_listings_currency').on('store_listings').column('currency').execute();

  await db.schema
    .createTable('player_items')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('item_def_id', 'uuid', (c) => c.notNull().references('item_defs.id'))
    .addColumn('player_id', 'uuid', (c) => c.notNull().references('players.id'))
    .addColumn('quantity', 'integer', (c) => c.notNull().defaultTo(1).check(sql`quantity > 0`))
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('acquired_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('player_items_player').on('player_items').columns(['player_id', 'id']).execute();
  await db.schema.createIndex('player_items_item_def').on('player_items').column('item_def_id').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['player_items', 'store_listings', 'item_defs', 'transactions', 'wallets', 'currencies']) {
    await db.schema.dropTable(table).execute();
  }
}
