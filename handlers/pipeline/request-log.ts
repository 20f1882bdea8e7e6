import type { Ctx } from '../../runtime/contracts/context';
import type { ApiResponse, PipelineRequest } from '../http';
import { isProbePath } from '../routes/health';

/** One `http_request` line per request; never the token or the body. */
export function requestLog(ctx: Ctx) {
  return (response: ApiResponse, request: PipelineRequest): ApiResponse => {
    // Orchestrators probe every few seconds; at `info` those lines would drown the log.
    const level = isProbePath(request.path) && response.status < 500 ? 'debug' : 'info';
    ctx.log[level]('http_request', {
      request_id: request.call.requestId,
      method: request.method,
      route: request.route ?? '(none)',
      status: response.status,
      duration_ms: ctx.clock.now() - request.started,
      ip: request.call.ip,
      player_id: request.call.principal?.playerId,
    });
    return response;
  };
}
