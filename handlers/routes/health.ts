import { sql } from 'kysely';
import { DatabaseDeadlineError, databaseFault, databaseFaultError, type DatabaseFault, type Db } from '../../runtime/platform/database';
import { z } from 'zod';
import { route, type Route } from '../contract';

/**
 * Liveness and readiness probes for orchestrators. Liveness touches nothing.
 * Readiness answers from the host's last known view of the database (kept by
 * a bounded background probe), so it never waits on a stuck query; the
 * pipeline already answers 503 `not_ready` while migrations run. Each is
 * served under `/api/v1` and at the root (`/health`, `/ready`), where the
 * asobi family's deployment recipes and its CLI probe.
 */
const LIVENESS_PATHS = ['/api/v1/health', '/health'] as const;
const READINESS_PATHS = ['/api/v1/health/ready', '/ready'] as const;

/** Liveness answers even while the node is not ready: an orchestrator must not restart a node only waiting for its database. */
export function isLivenessPath(path: string): boolean {
  return (LIVENESS_PATHS as readonly string[]).includes(path);
}

/** Probe paths, whose routine answers are logged at debug level. */
export function isProbePath(path: string): boolean {
  return isLivenessPath(path) || (READINESS_PATHS as readonly string[]).includes(path);
}

export const healthRoutes: Route[] = [
  ...LIVENESS_PATHS.map((path) =>
    route({
      method: 'GET',
      path,
      summary: 'Liveness: answers whenever the process can',
      tag: 'health',
      auth: 'none',
      rate: 'api',
      response: z.object({ status: z.literal('ok') }),
      errors: [],
      handle: async () => ({ status: 'ok' as const }),
    }),
  ),
  ...READINESS_PATHS.map((path) =>
    route({
      method: 'GET',
      path,
      summary: 'Readiness: migrations done and the database answering',
      tag: 'health',
      auth: 'none',
      rate: 'api',
      response: z.object({ status: z.literal('ok'), database: z.literal('ok') }),
      errors: [],
      handle: async ({ ctx }) => {
        const fault = ctx.readiness.databaseFault ? ctx.readiness.databaseFault() : await probe(ctx.db);
        if (fault) throw databaseFaultError(fault);
        return { status: 'ok' as const, database: 'ok' as const };
      },
    }),
  ),
];

/** A readiness probe may take this long when the host keeps no view of its own. */
const PROBE_DEADLINE_MS = 1000;

async function probe(db: Db): Promise<DatabaseFault | null> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DatabaseDeadlineError(PROBE_DEADLINE_MS)), PROBE_DEADLINE_MS);
  });
  try {
    await Promise.race([sql`select 1`.execute(db), deadline]);
    return null;
  } catch (err) {
    const fault = databaseFault(err);
    if (fault) return fault;
    throw err;
  } finally {
    clearTimeout(timer);
  }
}
