import type { ApiResponse, PipelineRequest } from '../http';

/**
 * Every answer carries the request id, and over TLS the HSTS header. (The
 * fixed security headers are part of every body `json()` builds.)
 */
export function securityHeaders(response: ApiResponse, request: PipelineRequest): ApiResponse {
  if (request.call.secure) response.headers['strict-transport-security'] = 'max-age=31536000; includeSubDomains';
  response.headers['x-request-id'] = request.call.requestId;
  return response;
}
