import { ConnectionError, RestClient, ServiceError, type Method, type paths, type Success } from '../client';

/**
 * The console's one way to the server: the typed client's REST wrapper, on
 * the ops plane under `/api/v1/ops` and the console's own session routes.
 * The session travels as the HttpOnly cookie; every request repeats the
 * readable CSRF cookie in `x-csrf-token`, which a page on another site cannot
 * read and so cannot forge.
 */

/** What a call can fail with: the service's error object, or no answer at all. */
export type Failed = ServiceError | ConnectionError;

/** A thrown value as a `Failed`; anything else (a bug in the page) reads as a failed request. */
export function failed(err: unknown): Failed {
  if (err instanceof ServiceError || err instanceof ConnectionError) return err;
  return new ConnectionError('network', err instanceof Error ? err.message : String(err));
}

/** The success body of `method` on `path`, as the OpenAPI document declares it. */
export type Answer<P extends keyof paths, M extends Method = 'get'> = Success<NonNullable<paths[P][M]>>;
/** The `data` of that body: a lookup's record, or a list's rows. */
export type Data<P extends keyof paths, M extends Method = 'get'> = Answer<P, M> extends { data: infer D } ? D : never;
/** One row of a list. */
export type Row<P extends keyof paths> = Data<P> extends (infer R)[] ? R : never;

/** The ops reads that answer a page of rows (`{data: [...], page}`). */
export type ListPath = {
  [P in keyof paths]: P extends `/api/v1/ops/${string}` ? (Answer<P> extends { data: unknown[]; page: unknown } ? P : never) : never;
}[keyof paths];

export type ConsoleSession = Data<'/console/session'>;

/** Told when the server no longer knows this browser (expired, signed out elsewhere, node restarted). */
let onSignedOut: () => void = () => {};
export function whenSignedOut(listener: () => void): void {
  onSignedOut = listener;
}

function csrfToken(): string {
  const match = /(?:^|;\s*)svc_console_csrf=([^;]*)/.exec(document.cookie);
  return match ? decodeURIComponent(match[1]!) : '';
}

/**
 * What a cookie session adds to the client's requests. The token is read per
 * request, since signing in again replaces it. An ops call refused while the
 * session is gone sends the console back to its sign-in form.
 */
async function sessionFetch(input: RequestInfo | URL, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set('x-csrf-token', csrfToken());
  const res = await fetch(input, { ...init, headers, credentials: 'same-origin' });
  if (res.status === 403 && new URL(String(input), window.location.origin).pathname.startsWith('/api/v1/ops/') && !(await sessionAlive())) onSignedOut();
  return res;
}

export const api = new RestClient({ baseUrl: window.location.origin, fetch: sessionFetch });

async function sessionAlive(): Promise<boolean> {
  try {
    await readSession();
    return true;
  } catch {
    return false;
  }
}

export async function readSession(): Promise<ConsoleSession> {
  return (await api.get('/console/session')).data;
}

export async function openSession(secret: string, label: string): Promise<void> {
  await api.post('/console/session', { body: label ? { secret, label } : { secret } });
}

export async function endSession(): Promise<void> {
  await api.delete('/console/session');
}

/** The set values only: an empty field in a form or the address means "not given". */
export function given(values: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ''));
}
