import type { Kysely } from 'kysely';

// Receipt redemption (decision 0035): a recorded receipt turns into currency
// once. `redeemed_at` is set in the transaction that credits the wallets, so
// a receipt with it set has been paid out and one without it has not;
// `redeemed_reason` is the ledger reason it was paid under, kept here because
// the receipt outlives the player's ledger (erasure deletes the ledger and
// only severs the receipt).
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('iap_transactions')
    .addColumn('redeemed_at', 'timestamptz')
    .addColumn('redeemed_reason', 'varchar(64)')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('iap_transactions').dropColumn('redeemed_reason').dropColumn('redeemed_at').execute();
}
