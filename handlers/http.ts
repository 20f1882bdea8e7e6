import type { Ctx, Principal } from '../runtime/contracts/context';
import type { ApiError } from '../runtime/contracts/errors';
import type { Operator } from '../runtime/ops/operators';
import { jsonText } from '../runtime/platform/answer-text';

/** What the pipeline knows about one request beyond the request itself. */
export interface Call {
  requestId: string;
  /** Peer address after the trusted-proxy rule. */
  ip: string;
  /** The Bearer string, if the request carried one. */
  bearer: string | null;
  /** The player the Bearer resolved to; null when absent or invalid. */
  principal: Principal | null;
  /** On ops routes only: the operator the credential stands for (the player token is never resolved there). */
  operator?: Operator | null;
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

/**
 * A request inside the pipeline: the plain object the host built, the path
 * and query the router parsed off it, and what the pipeline learns on the way.
 */
export interface PipelineRequest extends RequestLike {
  /** The URL's path, read once when the request enters. */
  readonly path: string;
  /** Set by the router: the matched pattern's raw (still percent-encoded) parameters. */
  params: Record<string, string>;
  /** Set by the router: a repeated key holds an array. */
  query: Record<string, string | string[] | undefined>;
  /** Set by the router: the matched pattern. */
  route?: string;
  readonly call: Call;
  /** When the request entered, on the ctx clock. */
  readonly started: number;
}

/** A response before it is written: the Node host writes it directly, fetch hosts get a `Response`. */
export interface ApiResponse {
  status: number;
  headers: Record<string, string | string[]>;
  body: string;
}

/**
 * The headers a JSON answer starts with: the content type and the security
 * headers every response carries. A literal, because V8 builds it from a
 * template: spreading shared constants into a new object cost four times as
 * much, and a plain copy (`{ ...X }`) sent the later steps' header writes
 * down V8's slow path.
 */
function jsonHeaders(): Record<string, string | string[]> {
  return {
    'content-type': 'application/json; charset=utf-8',
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
    'cross-origin-resource-policy': 'same-origin',
    'cache-control': 'no-store',
  };
}

/** On every response. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = (() => {
  const { 'content-type': _, ...security } = jsonHeaders() as Record<string, string>;
  return Object.freeze(security);
})();

/** The one way a handler answers. */
export function json(body: unknown, status = 200, headers?: Record<string, string | string[]>): ApiResponse {
  const all = jsonHeaders();
  if (headers) for (const name in headers) all[name] = headers[name]!;
  return { status, headers: all, body: jsonText(body) };
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

export function bearerOf(request: RequestLike): string | null {
  const header = request.headers.get('authorization');
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}

