import { z } from 'zod';
import type { Ctx } from '../../../runtime/contracts/context';
import { ApiError } from '../../../runtime/contracts/errors';
import { isPlainObject } from '../../../runtime/contracts/frame-envelope';
import { ExtensionError, type ActionMethod, type ExtensionAction } from '../../../runtime/extensions/extension';
import type { InstalledExtensions } from '../../../runtime/extensions/installed';
import type { AuditActor } from '../../../runtime/changes/audit';
import { auditCommitted } from '../../../runtime/ops/audit';
import { Answer, route, type Route } from '../../contract';

/**
 * `GET|POST|PUT|DELETE /api/v1/ops/ext/:extension/:action`: one concrete
 * route per declared action, so the pipeline's caller step enforces the
 * action's own capability class like any other ops route, and an unknown
 * extension, action or method falls through to the plane's one 403 (never
 * a 404 that would tell a prober which extensions exist). Readiness answers
 * 503 `not_ready` before any of them, as for every route.
 */
export function extensionActionRoutes(extensions: InstalledExtensions | undefined): Route[] {
  const routes: Route[] = [];
  for (const ext of extensions?.list ?? []) {
    for (const [name, action] of Object.entries(ext.actions ?? {})) routes.push(actionRoute(ext.name, name, action));
  }
  return routes;
}

const AnyObject = z.record(z.string(), z.unknown());
const QueryMap = z.record(z.string(), z.string());

function actionRoute(extension: string, name: string, action: ExtensionAction): Route {
  const common = {
    method: action.method,
    path: `/api/v1/ops/ext/${extension}/${name}`,
    summary: `Extension ${extension}: ${name}`,
    tag: 'ops',
    auth: 'operator' as const,
    capability: action.capability,
    rate: 'api' as const,
    // No envelope: the body is the handler's object, or the error object of a declared code.
    response: AnyObject,
    errors: ['internal' as const],
  };
  if (action.method === 'GET') {
    return route({ ...common, query: QueryMap, handle: async ({ ctx, query, operator }) => run(ctx, extension, name, action, query, operator.actor) });
  }
  return route({ ...common, body: AnyObject, handle: async ({ ctx, body, operator }) => run(ctx, extension, name, action, body, operator.actor) });
}

type Outcome = { ok: true; body: Record<string, unknown> } | { ok: false; error: ExtensionError; status: number } | { ok: false; error: null };

async function run(ctx: Ctx, extension: string, name: string, action: ExtensionAction, input: Record<string, unknown>, actor: AuditActor): Promise<Answer<Record<string, unknown>>> {
  const outcome = await invoke(ctx, extension, name, action, input, actor);
  if (action.method !== 'GET') await audit(ctx, extension, name, action.method, actor, outcome);
  if (outcome.ok) return new Answer(outcome.body);
  if (!outcome.error) throw new ApiError('internal');
  const { code, message, details } = outcome.error;
  return new Answer({ error: { code, message, details } }, outcome.status);
}

async function invoke(ctx: Ctx, extension: string, name: string, action: ExtensionAction, input: Record<string, unknown>, actor: AuditActor): Promise<Outcome> {
  const log = { extension, action: name };
  let result: unknown;
  try {
    result = await action.handle(input, { operator: { id: actor.id, display: actor.display, source: actor.source, attested: actor.attested ?? false } });
  } catch (err) {
    const declared = declaredFailure(action, err);
    if (declared) return declared;
    // An undeclared code is a defect of the extension: the caller learns only `internal`, the log the rest.
    ctx.log.error('ops_extension_action_failed', { ...log, code: codeOf(err), error: err });
    return { ok: false, error: null };
  }
  if (!isPlainObject(result)) {
    ctx.log.error('ops_extension_result_not_object', log);
    return { ok: false, error: null };
  }
  try {
    return { ok: true, body: JSON.parse(JSON.stringify(result)) as Record<string, unknown> };
  } catch (err) {
    ctx.log.error('ops_extension_result_not_encodable', { ...log, error: err });
    return { ok: false, error: null };
  }
}

/**
 * Recognised by shape, not class: an extension built on its own carries its
 * own copy of `ExtensionError`, or throws a plain `Error` with a `code`.
 */
function declaredFailure(action: ExtensionAction, err: unknown): Outcome | null {
  const code = codeOf(err);
  if (code === null || !action.errors || !Object.hasOwn(action.errors, code)) return null;
  const { message, details } = err as { message: unknown; details?: unknown };
  const error = new ExtensionError(code, typeof message === 'string' && message !== '' ? message : code, isPlainObject(details) ? details : {});
  return { ok: false, error, status: action.errors[code]! };
}

function codeOf(err: unknown): string | null {
  const code = err instanceof Error ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' ? code : null;
}

/**
 * Every call that may change something is on the trail, success or not. The
 * handler's own details stay out of the row: they may carry personal data,
 * and the trail outlives players. The change has happened by now, so a
 * failed insert is logged and the answer stands.
 */
async function audit(ctx: Ctx, extension: string, name: string, method: ActionMethod, actor: AuditActor, outcome: Outcome): Promise<void> {
  await auditCommitted(ctx, {
    actor,
    action: `ext.${extension}.${name}`,
    targetType: 'extension',
    targetId: extension,
    outcome: outcome.ok ? 'ok' : 'error',
    succeeded: outcome.ok ? 1 : 0,
    failed: outcome.ok ? 0 : 1,
    details: outcome.ok ? { method } : { method, code: outcome.error?.code ?? 'internal' },
  });
}
