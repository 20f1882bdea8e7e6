import type { z } from 'zod';
import type { Ctx } from '../../../runtime/contracts/context';
import type { ErrorCode } from '../../../runtime/contracts/errors';
import { listRequest, type ListPage, type ListQuery, type ListRequest } from '../../../runtime/ops/lists';
import { listOf, listQuery, oneOf, OpsIdPath, type ListRules } from '../../../runtime/schemas/ops';
import { route, type Route } from '../../contract';

/**
 * The two shapes of ops read route. A list is declared by its rules (data,
 * runtime/ops/lists.ts) and one service call; the query it documents, the
 * envelope it answers and the codes it can fail with follow from them, so no
 * list re-codes a rule. A lookup reads one row of the list's own projection.
 */

interface ListDeclaration<R extends z.ZodType> {
  path: string;
  summary: string;
  tag: string;
  rules: ListRules;
  row: R;
  /** A path parameter of its own (a channel's messages), already checked by `params`. */
  params?: z.ZodObject;
  list(ctx: Ctx, request: ListRequest, params: Record<string, string>): Promise<ListPage<z.input<R>>>;
  errors?: readonly ErrorCode[];
}

export function opsList<R extends z.ZodType>(d: ListDeclaration<R>): Route {
  const hasIdFilter = Object.values(d.rules.filters ?? {}).includes('id');
  return route({
    method: 'GET',
    path: d.path,
    summary: d.summary,
    tag: d.tag,
    auth: 'operator',
    capability: 'read',
    rate: 'api',
    ...(d.params ? { params: d.params } : {}),
    query: listQuery(d.rules),
    response: listOf(d.row),
    errors: ['ops.invalid_sort', ...(hasIdFilter ? (['ops.invalid_filter'] as const) : []), ...(d.errors ?? [])],
    handle: async ({ ctx, query, params }) => d.list(ctx, listRequest(d.rules, query as ListQuery), params as Record<string, string>),
  });
}

interface LookupDeclaration<R extends z.ZodType> {
  path: string;
  summary: string;
  tag: string;
  row: R;
  /** Throws 404 `ops.not_found` for a well-formed id that names nothing. */
  get(ctx: Ctx, id: string): Promise<z.input<R>>;
}

export function opsLookup<R extends z.ZodType>(d: LookupDeclaration<R>): Route {
  return route({
    method: 'GET',
    path: d.path,
    summary: d.summary,
    tag: d.tag,
    auth: 'operator',
    capability: 'read',
    rate: 'api',
    params: OpsIdPath,
    response: oneOf(d.row),
    errors: ['ops.invalid_id', 'ops.not_found'],
    handle: async ({ ctx, params }) => ({ data: await d.get(ctx, params.id) }),
  });
}
