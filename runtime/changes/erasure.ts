import { sql, type Transaction } from 'kysely';
import type { Database } from '../contracts/tables';
import type { ExtensionSet } from '../contracts/services';

/**
 * Erasing a player (self-erase, operator erase, guest reaping) is
 * this one function. Each domain registers, next to its own SQL, every column
 * of its tables that holds a player id, and whether an erasure deletes those
 * rows or keeps them with the reference set to null (receipts, group
 * creator). Foreign keys to `players` never cascade, so a table someone
 * forgot to register makes the final delete fail and the erasure roll back
 * rather than leave rows behind; test/erasure.test.ts also checks the
 * registry against the live schema.
 */
export interface ErasableColumn {
  table: string;
  /** The column holding the player id, or (with `via`) the parent row's id. */
  column: string;
  mode: 'delete' | 'nullify';
  /**
   * For rows that reach the player through a parent (ledger rows through
   * their wallet): `column` references `via.table.id`, and `via.column` holds
   * the player id. These go before the parent's rows.
   */
  via?: { table: string; column: string };
}

const registry: ErasableColumn[] = [];

export function registerErasable(...columns: ErasableColumn[]): void {
  for (const entry of columns) {
    const known = registry.find((e) => e.table === entry.table && e.column === entry.column);
    if (known) {
      if (known.mode !== entry.mode || known.via?.table !== entry.via?.table) {
        throw new Error(`erasure of ${entry.table}.${entry.column} registered twice with different rules`);
      }
      continue;
    }
    registry.push(entry);
  }
}

export function erasableColumns(): readonly ErasableColumn[] {
  return registry;
}

/** Rows touched per `table.column`, plus `players`. */
export type ErasureCounts = Record<string, number>;

/**
 * Removes the player and everything registered as theirs, inside the
 * caller's transaction (the caller writes its audit row in the same one and
 * evicts cached tokens after commit). A player already gone yields
 * `players: 0`. Installed extensions erase first, so one refusing (it
 * throws) rolls the erasure back before any core row is touched; the
 * parameter is required so no path can erase without asking them.
 */
export async function erasePlayer(trx: Transaction<Database>, playerId: string, extensions: ExtensionSet | undefined): Promise<ErasureCounts> {
  await extensions?.eraseAll(trx, playerId);
  const counts: ErasureCounts = {};
  const ordered = [
    ...registry.filter((e) => e.via),
    ...registry.filter((e) => !e.via && e.mode === 'nullify'),
    ...registry.filter((e) => !e.via && e.mode === 'delete'),
  ];
  for (const e of ordered) {
    const table = sql.table(e.table);
    const column = sql.ref(e.column);
    const match = e.via
      ? sql`${column} in (select id from ${sql.table(e.via.table)} where ${sql.ref(e.via.column)} = ${playerId})`
      : sql`${column} = ${playerId}`;
    const result =
      e.mode === 'delete'
        ? await sql`delete from ${table} where ${match}`.execute(trx)
        : await sql`update ${table} set ${column} = null where ${match}`.execute(trx);
    counts[`${e.table}.${e.column}`] = Number(result.numAffectedRows ?? 0);
  }
  const gone = await trx.deleteFrom('players').where('id', '=', playerId).executeTakeFirst();
  counts.players = Number(gone.numDeletedRows);
  return counts;
}
