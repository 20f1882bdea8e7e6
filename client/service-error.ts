import type { components } from './generated/openapi';

/** The closed set of error codes, as the OpenAPI document declares it. */
export type ErrorCode = components['schemas']['Error']['error']['code'];

/** The service's error object (REST bodies, and `error.*` inside socket error frames). */
export type ErrorBody = components['schemas']['Error'];

/**
 * A failure the service answered with its error object: a REST status with
 * the body, an `error` frame (which also carries the older `reason`) or an
 * `rpc.error` frame. Clients branch on `code`; `message` is prose for people.
 */
export class ServiceError extends Error {
  override readonly name = 'ServiceError';

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown>,
    /** The HTTP status (REST only). */
    readonly status: number | null = null,
    /** The flat reason of a socket `error` frame. */
    readonly reason: string | null = null,
  ) {
    super(message);
  }

  /** From a REST answer; a body that is not the error object (a proxy's HTML page) reads as `internal`. */
  static fromResponse(status: number, body: unknown): ServiceError {
    const error = (body as Partial<ErrorBody> | null)?.error;
    if (error && typeof error.code === 'string' && typeof error.message === 'string') {
      return new ServiceError(error.code, error.message, error.details ?? {}, status);
    }
    return new ServiceError('internal', `HTTP ${status} without the service's error object`, {}, status);
  }

  /** From the payload of an `error` or `rpc.error` frame. */
  static fromFrame(payload: { reason?: string; error: ErrorBody['error'] }): ServiceError {
    const { code, message, details } = payload.error;
    return new ServiceError(code, message, details ?? {}, null, payload.reason ?? null);
  }
}

/**
 * A request that got no answer from the service: the connection failed or
 * closed before the reply (`closed`), or no reply came in time (`timeout`).
 */
export class ConnectionError extends Error {
  override readonly name = 'ConnectionError';

  constructor(
    readonly kind: 'closed' | 'timeout' | 'network',
    message: string,
  ) {
    super(message);
  }
}
