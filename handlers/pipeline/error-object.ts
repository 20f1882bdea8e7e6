import type { Ctx } from '../../runtime/contracts/context';
import { databaseFault, databaseFaultError } from '../../runtime/platform/database';
import { ApiError } from '../../runtime/contracts/errors';
import { errorResponse, type ApiResponse, type PipelineRequest } from '../http';

/**
 * Every failure becomes the error object with its code's status. An
 * `ApiError` is an answer; a database fault is 503 with its reason; anything
 * else is a defect: logged with its stack, answered 500 `internal` with the
 * request id so an operator can find the line.
 */
export function errorObject(ctx: Ctx) {
  return (err: unknown, request: PipelineRequest): ApiResponse => {
    if (err instanceof ApiError) return errorResponse(err);
    const fault = databaseFault(err);
    if (fault) {
      ctx.log.warn('database_fault', { request_id: request.call.requestId, reason: fault, error: err instanceof Error ? err.message : String(err) });
      return errorResponse(databaseFaultError(fault));
    }
    ctx.log.error('unhandled_exception', {
      request_id: request.call.requestId,
      method: request.method,
      path: request.path,
      error: err instanceof Error ? { name: err.name, message: err.message, stack: err.stack } : String(err),
    });
    return errorResponse(new ApiError('internal', undefined, { request_id: request.call.requestId }));
  };
}
