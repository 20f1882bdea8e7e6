import { sql, type SelectQueryBuilder } from 'kysely';
import { ApiError } from '../contracts/errors';
import { isUuid } from '../platform/ids';
import { isStorableText } from '../platform/text';
import { DEPTH_MAX, FILTER_MAX_CHARS, LIMIT_DEFAULT, LIMIT_MAX, PAGE_MAX, type FilterKind, type ListRules, type Order } from '../schemas/ops';

/**
 * The list rules every ops list shares, in one place. A route declares its
 * rules as data (`ListRules`: sort fields, the unique field every order ends
 * on, its default order, filters, the fields `q` searches); this module turns
 * the query string into a `ListRequest` under those rules and runs it either
 * as SQL or over rows already in memory (the node-local lists), with the same
 * meaning both ways.
 */

/** The query string of a list, read leniently: each value is text or absent. */
export type ListQuery = Record<string, string | undefined>;

export interface ListRequest {
  limit: number;
  offset: number;
  sort: string;
  order: Order;
  q: string | null;
  filters: Record<string, string | boolean>;
}

export interface ListPage<Row> {
  data: Row[];
  page: { limit: number; offset: number; total: number };
}

/** A whole number written plainly, or null (malformed means "use the default"). */
function integer(raw: string | undefined): number | null {
  const t = raw?.trim() ?? '';
  if (!/^-?\d{1,15}$/.test(t)) return null;
  return Number(t);
}

const clamp = (n: number, min: number, max: number) => Math.min(max, Math.max(min, n));

/** Text a filter may compare with; empty, overlong or unstorable text is no filter at all. */
function usableText(raw: string | undefined): string | null {
  if (raw === undefined || raw === '' || raw.length > FILTER_MAX_CHARS || !isStorableText(raw)) return null;
  return raw;
}

/**
 * The request under the route's rules, or the error it answers: a sort field
 * the route does not offer or an order other than `asc`/`desc` is 400
 * `ops.invalid_sort` naming it (`field` or `order`); an id filter that is not
 * a UUID is 400 `ops.invalid_filter`. Everything else falls back: a malformed
 * number to its default, a bad text or boolean filter to none.
 */
export function listRequest(rules: ListRules, query: ListQuery): ListRequest {
  const limit = clamp(integer(query.limit) ?? LIMIT_DEFAULT, 1, LIMIT_MAX);
  // The deepest window ends at DEPTH_MAX: the last offset a full page of `limit` fits under it.
  const deepest = Math.floor(DEPTH_MAX / limit) * limit - limit;
  const page = integer(query.page);
  const asked = page !== null ? (clamp(page, 1, PAGE_MAX) - 1) * limit : clamp(integer(query.offset) ?? 0, 0, DEPTH_MAX);
  const offset = Math.min(Math.floor(asked / limit) * limit, deepest);

  const sortRaw = query.sort === '' ? undefined : query.sort;
  if (sortRaw !== undefined && !rules.sorts.includes(sortRaw)) {
    throw new ApiError('ops.invalid_sort', `sort must be one of: ${rules.sorts.join(', ')}.`, { field: sortRaw });
  }
  const orderRaw = query.order === '' ? undefined : query.order;
  const order = orderRaw?.toLowerCase();
  if (order !== undefined && order !== 'asc' && order !== 'desc') {
    throw new ApiError('ops.invalid_sort', 'order must be asc or desc.', { order: orderRaw });
  }
  const sort = sortRaw ?? rules.default.sort;
  const resolvedOrder: Order = (order as Order | undefined) ?? (sortRaw === undefined ? rules.default.order : 'asc');

  const filters: Record<string, string | boolean> = {};
  for (const [name, kind] of Object.entries(rules.filters ?? {}) as [string, FilterKind][]) {
    const raw = query[name];
    if (raw === undefined) continue;
    if (kind === 'id') {
      const id = raw.toLowerCase();
      if (!isUuid(id)) throw new ApiError('ops.invalid_filter', `${name} must be a UUID.`, { filter: name });
      filters[name] = id;
    } else if (kind === 'boolean') {
      if (raw === 'true' || raw === 'false') filters[name] = raw === 'true';
    } else {
      const text = usableText(raw);
      if (text !== null) filters[name] = text;
    }
  }
  const q = rules.q && rules.q.length > 0 ? usableText(query.q) : null;
  return { limit, offset, sort, order: resolvedOrder, q, filters };
}

/** `%`, `_` and the escape character itself match only themselves. */
function likePattern(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * Runs a list over a query of one table (or a subquery aliased as one): the
 * filters, the search, the count of every match, then the ordered window.
 * Field names are the query's column names unless `columns` maps them.
 */
export async function sqlPage<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  rules: ListRules,
  request: ListRequest,
  columns: Record<string, string> = {},
): Promise<ListPage<O>> {
  const ref = (field: string) => sql.ref(columns[field] ?? field);
  let filtered = query;
  for (const [name, value] of Object.entries(request.filters)) filtered = filtered.where(sql<boolean>`${ref(name)} = ${value}`);
  if (request.q !== null && rules.q && rules.q.length > 0) {
    const pattern = likePattern(request.q);
    const any = sql.join(
      rules.q.map((field) => sql`${ref(field)} ilike ${pattern} escape '\\'`),
      sql` or `,
    );
    filtered = filtered.where(sql<boolean>`(${any})`);
  }
  const counted = await filtered
    .clearSelect()
    .select(sql<string>`count(*)`.as('total'))
    .executeTakeFirst();
  let ordered = filtered.orderBy(ref(request.sort), request.order);
  if (request.sort !== rules.unique) ordered = ordered.orderBy(ref(rules.unique), request.order);
  const rows = await ordered.limit(request.limit).offset(request.offset).execute();
  const total = Number((counted as { total?: string | number } | undefined)?.total ?? 0);
  return { data: rows, page: { limit: request.limit, offset: request.offset, total } };
}

/** Orders values as the database does: numbers by value, text by code unit, false before true, nulls last going up. */
function compare(a: unknown, b: unknown): number {
  const aNull = a === null || a === undefined;
  const bNull = b === null || b === undefined;
  if (aNull || bNull) return aNull === bNull ? 0 : aNull ? 1 : -1;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  const x = String(a);
  const y = String(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The same list over rows this node holds in memory (matchmaker modes, chat channels, boards). */
export function memoryPage<Row extends object>(rows: readonly Row[], rules: ListRules, request: ListRequest): ListPage<Row> {
  const field = (row: Row, name: string) => (row as Record<string, unknown>)[name];
  const needle = request.q?.toLowerCase() ?? null;
  const matching = rows.filter((row) => {
    for (const [name, value] of Object.entries(request.filters)) if (field(row, name) !== value) return false;
    if (needle === null || !rules.q) return true;
    return rules.q.some((name) => {
      const v = field(row, name);
      return v !== null && v !== undefined && String(v).toLowerCase().includes(needle);
    });
  });
  const sign = request.order === 'asc' ? 1 : -1;
  matching.sort((a, b) => sign * (compare(field(a, request.sort), field(b, request.sort)) || compare(field(a, rules.unique), field(b, rules.unique))));
  return {
    data: matching.slice(request.offset, request.offset + request.limit),
    page: { limit: request.limit, offset: request.offset, total: matching.length },
  };
}
