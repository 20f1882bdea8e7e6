import { sql } from 'kysely';
import type { Db } from '../../runtime/platform/database';

/** Wallets whose ledger does not sum to their balance (the invariant: none, ever). */
export async function ledgerMismatches(db: Db): Promise<{ id: string; balance: number; ledger: number }[]> {
  const rows = await sql<{ id: string; balance: number; ledger: number }>`
    select w.id, w.balance, coalesce(sum(t.amount), 0)::int as ledger
    from wallets w left join transactions t on t.wallet_id = w.id
    group by w.id, w.balance
    having w.balance <> coalesce(sum(t.amount), 0)`.execute(db);
  return rows.rows;
}
