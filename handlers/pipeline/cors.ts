import { ApiError } from '../../runtime/contracts/errors';
import { json, type ApiResponse, type PipelineRequest } from '../http';

/**
 * CORS for the configured origins only (setting `cors_origins`); any other
 * origin gets no CORS headers, and its preflight is 404.
 */
export function preflight(origins: ReadonlySet<string>) {
  return (request: PipelineRequest): ApiResponse | undefined => {
    if (request.method !== 'OPTIONS') return undefined;
    const origin = request.headers.get('origin');
    if (!origin || !origins.has(origin)) throw new ApiError('not_found', 'No route for OPTIONS from this origin.');
    return json({}, 200, {
      'access-control-allow-methods': 'GET, POST, PUT, DELETE, PATCH, OPTIONS',
      'access-control-allow-headers': 'authorization, content-type, x-csrf-token, x-svc-operator',
      'access-control-max-age': '600',
    });
  };
}

export function cors(origins: ReadonlySet<string>) {
  return (response: ApiResponse, request: PipelineRequest): ApiResponse => {
    // With no origin configured (the default) no request gets CORS headers, so its Origin is not read.
    if (origins.size === 0) return response;
    const origin = request.headers.get('origin');
    if (origin && origins.has(origin)) {
      const h = response.headers;
      h['access-control-allow-origin'] = origin;
      h['access-control-allow-credentials'] = 'true';
      h['access-control-expose-headers'] = 'x-request-id, retry-after';
      h['vary'] = 'Origin';
    }
    return response;
  };
}
