import type { IRequest } from 'itty-router';
import type { Ctx, Principal } from '../runtime/context';
import { ApiError, validationFailed } from '../runtime/errors';
import { isStorableText, UNSTORABLE_TEXT } from '../runtime/text';

/** What the pipeline knows about one request beyond the request itself. */
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

/** The header access handlers use; fetch's `Headers` has it. */
export interface HeaderReader {
  get(name: string): string | null;
  has(name: string): boolean;
  forEach(callback: (value: string, name: string) => void): void;
}

/**
 * A request as handlers see it: the part of fetch's `Request` they use, so a
 * fetch `Request` is one, and the Node host can pass a plain object without
 * paying for an undici Request (its AbortSignal and body stream dominate the
 * cost of a cheap route; see bench/http.ts and docs/decisions/0001).
 */
export interface RequestLike {
  readonly method: string;
  readonly url: string;
  readonly headers: HeaderReader;
  readonly body: ReadableStream<Uint8Array> | null;
  /** A host that already buffered the body under the body rules hands it over here. */
  readonly bufferedBody?: Uint8Array | null;
}

export type ApiRequest = IRequest & RequestLike;

/** A response before it is written: the Node host writes it directly, fetch hosts get a `Response`. */
export interface ApiResponse {
  status: number;
  headers: Record<string, string | string[]>;
  body: string;
}

export type Handler = (request: ApiRequest, ctx: Ctx, call: Call) => Promise<ApiResponse>;

/** What a domain module registers: method, path (itty pattern) and handler. */
export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
  path: string;
  handler: Handler;
}

/** On every response. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
};

/** The one way a handler answers. */
export function json(body: unknown, status = 200, headers: Record<string, string | string[]> = {}): ApiResponse {
  return {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...SECURITY_HEADERS, ...headers },
    body: JSON.stringify(body),
  };
}

export function errorResponse(err: ApiError): ApiResponse {
  return json(err.body(), err.status, err.headers);
}

/** The fetch `Response` for hosts that speak fetch. */
export function toFetchResponse(reply: ApiResponse): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(reply.headers)) {
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else headers.set(name, value);
  }
  return new Response(reply.body, { status: reply.status, headers });
}

/** The caller's player id, or 401 `unauthenticated`. */
export function requirePlayer(call: Call): Principal {
  if (!call.principal) throw new ApiError('unauthenticated');
  return call.principal;
}

export function bearerOf(request: RequestLike): string | null {
  const header = request.headers.get('authorization');
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}

/**
 * A path parameter, percent-decoded. itty leaves parameters encoded, and an
 * encoded URL path is ASCII, so only a decoded parameter can carry text the
 * database cannot store: every handler that decodes one does it here. A
 * malformed escape (`%E0%A4%A`) or such text is 422 `validation_failed`
 * naming the parameter.
 */
export function decodedParam(request: ApiRequest, name: string): string {
  let value: string;
  try {
    value = decodeURIComponent(request.params[name] ?? '');
  } catch {
    throw validationFailed('errors', { [name]: ['must be valid percent-encoded UTF-8'] });
  }
  if (!isStorableText(value)) throw validationFailed('errors', { [name]: [UNSTORABLE_TEXT] });
  return value;
}
