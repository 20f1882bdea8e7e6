import type { Ctx } from '../../runtime/contracts/context';
import { databaseFaultError } from '../../runtime/platform/database';
import { ApiError } from '../../runtime/contracts/errors';
import type { PipelineRequest } from '../http';
import { isLivenessPath } from '../routes/health';

/**
 * Until migrations finish (or while the database is away) every route but
 * liveness answers 503. Liveness answers whenever the process can: an
 * orchestrator must not restart a node that is only waiting for its database.
 */
export function readiness(ctx: Ctx) {
  return (request: PipelineRequest): undefined => {
    if (ctx.readiness.ready() || isLivenessPath(request.path)) return undefined;
    const fault = ctx.readiness.databaseFault?.();
    throw fault ? databaseFaultError(fault) : new ApiError('not_ready');
  };
}
