import { sql, type SelectQueryBuilder } from 'kysely';
import { isUuid } from './ids';

/**
 * One page of a public list:
 * at most `limit` rows, and for lists that grow without bound only rows older
 * than the `before` cursor. How a request spells these is the handlers'
 * business (`pageQuery` in runtime/schemas/common.ts); this is the database side.
 */
export interface Page {
  limit: number;
  /** Only rows older than this id (ids are time-ordered UUIDv7s, runtime/platform/ids.ts). */
  before?: string;
}

// Every paged table keys on `id` and no paged query joins, so the bare column is unambiguous.
const id = sql.ref<string>('id');

/** A list sorted on a column other than its id: the cursor row's value of it leads. */
export interface SortKey {
  table: string;
  column: string;
}

/**
 * Newest first, from the `before` cursor on, `limit` rows. The order is the
 * id's (ids are time-ordered), or `sortKey` with the id breaking ties; the
 * cursor always compares on the same key as the order, so no row is skipped
 * or repeated across pages. A `before` that is not a UUID is ignored rather
 * than refused, like a malformed `limit`; one that names no row (deleted
 * meanwhile) ends the list for the sorted variant.
 */
export function newestFirst<DB, TB extends keyof DB, O>(query: SelectQueryBuilder<DB, TB, O>, page: Page, sortKey?: SortKey): SelectQueryBuilder<DB, TB, O> {
  const cursor = page.before !== undefined && isUuid(page.before) ? page.before : undefined;
  if (!sortKey) {
    const from = cursor !== undefined ? query.where(id, '<', cursor) : query;
    return from.orderBy(id, 'desc').limit(page.limit);
  }
  const key = sql.ref(sortKey.column);
  const from =
    cursor !== undefined
      ? query.where(
          sql<boolean>`(${key}, ${id}) < (select ${sql.ref(`${sortKey.table}.${sortKey.column}`)}, ${sql.ref(`${sortKey.table}.id`)} from ${sql.table(sortKey.table)} where ${sql.ref(`${sortKey.table}.id`)} = ${cursor})`,
        )
      : query;
  return from.orderBy(key, 'desc').orderBy(id, 'desc').limit(page.limit);
}
