import type { paths } from './generated/openapi';
import { ConnectionError, ServiceError } from './service-error';

/** The pair every sign-in answers; the client keeps the latest one. */
export interface Tokens {
  access_token: string;
  refresh_token: string;
}

export type Method = 'get' | 'put' | 'post' | 'delete' | 'patch';

/** The paths that declare an operation for `M`. */
export type PathsWith<M extends Method> = {
  [P in keyof paths]-?: [NonNullable<paths[P][M]>] extends [never] ? never : P;
}[keyof paths];

type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;

type PathParams<O> = O extends { parameters: { path: infer X } } ? X : never;
type QueryParams<O> = O extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;
type RequestBody<O> = O extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;

/** What a call of operation `O` takes: path and query parameters, a JSON body, and transport extras. */
export type CallInit<O> = ([PathParams<O>] extends [never] ? unknown : { path: PathParams<O> }) &
  ([QueryParams<O>] extends [never] ? unknown : {} extends QueryParams<O> ? { query?: QueryParams<O> } : { query: QueryParams<O> }) &
  ([RequestBody<O>] extends [never] ? unknown : {} extends RequestBody<O> ? { body?: RequestBody<O> } : { body: RequestBody<O> }) & {
    headers?: Record<string, string>;
    signal?: AbortSignal;
  };

/** The body of the operation's success answer (the first 2xx it declares). */
export type Success<O> = O extends { responses: infer R }
  ? R extends { 200: { content: { 'application/json': infer B } } }
    ? B
    : R extends { 201: { content: { 'application/json': infer B } } }
      ? B
      : R extends { 202: { content: { 'application/json': infer B } } }
        ? B
        : void
  : never;

/** An init that may be left out when nothing in it is required. */
type InitArgs<O> = {} extends CallInit<O> ? [init?: CallInit<O>] : [init: CallInit<O>];

export interface RestOptions {
  /** The service's origin, e.g. `https://game.example.com` (the `/api/v1` paths are appended). */
  baseUrl: string;
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
  /** Tokens to start with (a session restored from storage). */
  tokens?: Tokens | null;
  /** Told of every new token pair (and of `null` when the session ends), to persist it. */
  onTokens?: (tokens: Tokens | null) => void;
}

const REFRESH_PATH = '/api/v1/auth/refresh';

/**
 * A thin fetch wrapper typed from the OpenAPI document. It adds the bearer
 * the client holds, and when the service answers 401 `unauthenticated` it
 * rotates the refresh token once and repeats the call once. Refresh tokens
 * are single-use and a reused one revokes its whole family, so concurrent
 * calls that all hit an expired access token share one rotation.
 */
export class RestClient {
  readonly baseUrl: string;
  readonly #fetch: typeof fetch;
  readonly #onTokens: ((tokens: Tokens | null) => void) | undefined;
  #tokens: Tokens | null;
  #refreshing: Promise<boolean> | null = null;

  constructor(options: RestOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    // Bound, so a browser's fetch is not called with the client as `this`.
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#tokens = options.tokens ?? null;
    this.#onTokens = options.onTokens;
  }

  get tokens(): Tokens | null {
    return this.#tokens;
  }

  setTokens(tokens: Tokens | null): void {
    this.#tokens = tokens ? { access_token: tokens.access_token, refresh_token: tokens.refresh_token } : null;
    this.#onTokens?.(this.#tokens);
  }

  get<P extends PathsWith<'get'>>(path: P, ...init: InitArgs<Operation<P, 'get'>>): Promise<Success<Operation<P, 'get'>>> {
    return this.call('GET', path, init[0] as RawInit);
  }

  post<P extends PathsWith<'post'>>(path: P, ...init: InitArgs<Operation<P, 'post'>>): Promise<Success<Operation<P, 'post'>>> {
    return this.call('POST', path, init[0] as RawInit);
  }

  put<P extends PathsWith<'put'>>(path: P, ...init: InitArgs<Operation<P, 'put'>>): Promise<Success<Operation<P, 'put'>>> {
    return this.call('PUT', path, init[0] as RawInit);
  }

  delete<P extends PathsWith<'delete'>>(path: P, ...init: InitArgs<Operation<P, 'delete'>>): Promise<Success<Operation<P, 'delete'>>> {
    return this.call('DELETE', path, init[0] as RawInit);
  }

  /**
   * Rotates the refresh token; false when there is none or the service
   * refused it (the session is over: tokens are cleared).
   */
  refresh(): Promise<boolean> {
    this.#refreshing ??= this.#rotate().finally(() => {
      this.#refreshing = null;
    });
    return this.#refreshing;
  }

  async #rotate(): Promise<boolean> {
    const held = this.#tokens;
    if (!held) return false;
    const answer = await this.#send('POST', REFRESH_PATH, { body: { refresh_token: held.refresh_token } }, null);
    // A sign-in that replaced the tokens meanwhile wins over this rotation.
    if (this.#tokens !== held) return this.#tokens !== null;
    if (answer.ok) {
      this.setTokens(answer.body as Tokens);
      return true;
    }
    if (answer.status === 401) this.setTokens(null);
    return false;
  }

  /** Untyped: for routes this client's document does not list (a deployment's extension actions). */
  async call(method: string, path: string, init: RawInit = {}): Promise<any> {
    const bearer = this.#tokens?.access_token ?? null;
    let answer = await this.#send(method, path, init, bearer);
    if (!answer.ok && answer.status === 401 && bearer !== null && path !== REFRESH_PATH && isUnauthenticated(answer.body)) {
      // Another call may have rotated already: then simply use the new token.
      const rotated = this.#tokens && this.#tokens.access_token !== bearer ? true : await this.refresh();
      if (rotated && this.#tokens) answer = await this.#send(method, path, init, this.#tokens.access_token);
    }
    if (!answer.ok) throw ServiceError.fromResponse(answer.status, answer.body);
    return answer.body;
  }

  async #send(method: string, path: string, init: RawInit, bearer: string | null): Promise<{ ok: boolean; status: number; body: unknown }> {
    const url = this.baseUrl + expandPath(path, init.path) + queryString(init.query);
    const headers: Record<string, string> = { accept: 'application/json', ...init.headers };
    if (bearer !== null) headers.authorization = `Bearer ${bearer}`;
    let body: string | undefined;
    if (init.body !== undefined) {
      body = JSON.stringify(init.body);
      headers['content-type'] = 'application/json';
    } else if (method !== 'GET' && method !== 'HEAD') {
      // The service wants a length on every request that may carry a body.
      body = '';
    }
    let response: Response;
    try {
      response = await this.#fetch(url, { method, headers, ...(body !== undefined ? { body } : {}), ...(init.signal ? { signal: init.signal } : {}) });
    } catch (err) {
      if ((err as Error).name === 'AbortError') throw err;
      throw new ConnectionError('network', `${method} ${path}: ${(err as Error).message}`);
    }
    const text = await response.text();
    let parsed: unknown = undefined;
    if (text !== '') {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = null;
      }
    }
    return { ok: response.ok, status: response.status, body: parsed };
  }
}

export interface RawInit {
  path?: Record<string, string | number>;
  query?: Record<string, string | number | boolean | undefined | null>;
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

function isUnauthenticated(body: unknown): boolean {
  return (body as { error?: { code?: unknown } } | null)?.error?.code === 'unauthenticated';
}

/** `/players/{id}` with `{id}` filled in, each value encoded as one path segment. */
function expandPath(template: string, params: RawInit['path']): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params?.[name];
    if (value === undefined) throw new TypeError(`path parameter ${name} missing for ${template}`);
    return encodeURIComponent(String(value));
  });
}

function queryString(query: RawInit['query']): string {
  if (!query) return '';
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value !== undefined && value !== null) search.append(key, String(value));
  const text = search.toString();
  return text === '' ? '' : `?${text}`;
}
