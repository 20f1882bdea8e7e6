import { sql, type SelectQueryBuilder } from 'kysely';
import { isUuid } from './ids';

/**
 * One page of a public list (rest-payloads 0.4 and the pagination decision):
 * at most `limit` rows, and for lists that grow without bound only rows older
 * than the `before` cursor. How a request spells these is the handlers'
 * business (handlers/pagination.ts); this is the database side.
 */
export interface Page {
  limit: number;
  /** Only rows older than this id (ids are time-ordered UUIDv7s, runtime/ids.ts). */
  before?: string;
}

// Every paged table keys on `id` and no paged query joins, so the bare column is unambiguous.
const id = sql.ref<string>('id');

/**
 * Newest first, from the `before` cursor on, `limit` rows. An ordering the
 * caller already set stays the leading one (id breaks its ties). A `before`
 * that is not a UUID is ignored rather than refused, like a malformed `limit`.
 */
export function newestFirst<DB, TB extends keyof DB, O>(query: SelectQueryBuilder<DB, TB, O>, page: Page): SelectQueryBuilder<DB, TB, O> {
  const from = page.before !== undefined && isUuid(page.before) ? query.where(id, '<', page.before) : query;
  return from.orderBy(id, 'desc').limit(page.limit);
}
