import type { ApiResponse, PipelineRequest } from '../http';

/** Strict-Transport-Security for an answer to a secure request; the Node host's static sites send it too. */
export const HSTS = 'max-age=31536000; includeSubDomains';

/**
 * Every answer carries the request id, and over TLS the HSTS header. (The
 * fixed security headers are part of every body `json()` builds.)
 */
export function securityHeaders(response: ApiResponse, request: PipelineRequest): ApiResponse {
  if (request.call.secure) response.headers['strict-transport-security'] = HSTS;
  response.headers['x-request-id'] = request.call.requestId;
  return response;
}
