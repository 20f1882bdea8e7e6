import type { IRequest } from 'itty-router';
import type { Ctx, Principal } from '../runtime/context';
import { ApiError } from '../runtime/errors';

/** What the pipeline knows about one request beyond the `Request` itself. */
export interface Call {
  requestId: string;
  /** Peer address after the trusted-proxy rule. */
  ip: string;
  /** The Bearer string, if the request carried one. */
  bearer: string | null;
  /** The player the Bearer resolved to; null when absent or invalid. */
  principal: Principal | null;
  /** Whether the request reached us over TLS (directly or via a trusted proxy). */
  secure: boolean;
}

export type ApiRequest = IRequest & Request;
export type Handler = (request: ApiRequest, ctx: Ctx, call: Call) => Promise<Response>;

/** What a domain module registers: method, path (itty pattern) and handler. */
export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
  path: string;
  handler: Handler;
}

/** On every response; `json()` bakes them in, the pipeline adds them to any other. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
};

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8', ...SECURITY_HEADERS };

/**
 * The serialised body of every response made by `json()`. Reading a fetch
 * Response's body back through its stream costs tens of microseconds; a host
 * that finds the text here writes it directly (measured in bench/http.ts).
 */
export const jsonBodies = new WeakMap<Response, string>();

/** The one way a handler answers success. */
export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  const text = JSON.stringify(body);
  const response = new Response(text, { status, headers: { ...JSON_HEADERS, ...headers } });
  jsonBodies.set(response, text);
  return response;
}

export function errorResponse(err: ApiError): Response {
  return json(err.body(), err.status, err.headers);
}

/** The caller's player id, or 401 `unauthenticated`. */
export function requirePlayer(call: Call): Principal {
  if (!call.principal) throw new ApiError('unauthenticated');
  return call.principal;
}

export function bearerOf(request: Request): string | null {
  const header = request.headers.get('authorization');
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}
