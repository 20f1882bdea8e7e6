import { sql } from 'kysely';
import { json, type Route } from './http';

/**
 * Liveness and readiness probes for orchestrators. `/health` touches nothing;
 * `/health/ready` proves the database answers (the pipeline already answers
 * 503 `not_ready` while migrations run).
 */
export const healthRoutes: Route[] = [
  { method: 'GET', path: '/api/v1/health', handler: async () => json({ status: 'ok' }) },
  {
    method: 'GET',
    path: '/api/v1/health/ready',
    handler: async (_req, ctx) => {
      await sql`select 1`.execute(ctx.db);
      return json({ status: 'ok', database: 'ok' });
    },
  },
];
