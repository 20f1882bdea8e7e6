import { sql } from 'kysely';
import { DatabaseDeadlineError, databaseFault, databaseFaultError, type DatabaseFault, type Db } from '../../runtime/platform/database';
import { z } from 'zod';
import { route, type Route } from '../contract';

/**
 * Liveness and readiness probes for orchestrators. `/health` touches nothing.
 * `/health/ready` answers from the host's last known view of the database
 * (kept by a bounded background probe), so it never waits on a stuck query;
 * the pipeline already answers 503 `not_ready` while migrations run.
 */
export const healthRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/health',
    summary: 'Liveness: answers whenever the process can',
    tag: 'health',
    auth: 'none',
    rate: 'api',
    response: z.object({ status: z.literal('ok') }),
    errors: [],
    handle: async () => ({ status: 'ok' as const }),
  }),
  route({
    method: 'GET',
    path: '/api/v1/health/ready',
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
