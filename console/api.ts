/**
 * The console's one way to the server: the ops plane under `/api/v1/ops`
 * and its own session routes. The session travels as the HttpOnly cookie;
 * every request repeats the readable CSRF cookie in `x-csrf-token`, which a
 * page on another site cannot read and so cannot forge.
 */

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export interface ConsoleSession {
  display: string;
  source: string;
  caps: string[];
  attested: boolean;
}

export interface Page<Row> {
  data: Row[];
  page: { limit: number; offset: number; total: number };
}

/** Told when the server no longer knows this browser (expired, signed out elsewhere, node restarted). */
let onSignedOut: () => void = () => {};
export function whenSignedOut(listener: () => void): void {
  onSignedOut = listener;
}

function csrfToken(): string {
  const match = /(?:^|;\s*)svc_console_csrf=([^;]*)/.exec(document.cookie);
  return match ? decodeURIComponent(match[1]!) : '';
}

async function send(method: string, url: string, body?: unknown): Promise<unknown> {
  const headers: Record<string, string> = { 'x-csrf-token': csrfToken(), accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(url, { method, headers, credentials: 'same-origin', ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    throw new ApiFailure(res.status, 'internal', `The server answered ${res.status} with something that is not JSON.`);
  }
  if (res.ok) return parsed;
  const error = (parsed as { error?: { code?: string; message?: string; details?: Record<string, unknown> } } | null)?.error;
  return Promise.reject(new ApiFailure(res.status, error?.code ?? 'internal', error?.message ?? `HTTP ${res.status}`, error?.details ?? {}));
}

/** A call on the ops plane; a refusal sends the console back to its sign-in form when the session is gone. */
export async function ops<T>(path: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
  try {
    return (await send(init.method ?? 'GET', `/api/v1/ops${path}`, init.body)) as T;
  } catch (err) {
    if (err instanceof ApiFailure && err.status === 403 && !(await sessionAlive())) onSignedOut();
    throw err;
  }
}

async function sessionAlive(): Promise<boolean> {
  try {
    await readSession();
    return true;
  } catch {
    return false;
  }
}

export async function readSession(): Promise<ConsoleSession> {
  return ((await send('GET', '/console/session')) as { data: ConsoleSession }).data;
}

export async function openSession(secret: string, label: string): Promise<void> {
  await send('POST', '/console/session', label ? { secret, label } : { secret });
}

export async function endSession(): Promise<void> {
  await send('DELETE', '/console/session');
}

/** A query string from the set values only. */
export function queryString(values: Record<string, string | number | boolean | undefined | null>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) if (value !== undefined && value !== null && value !== '') params.set(key, String(value));
  const text = params.toString();
  return text ? `?${text}` : '';
}
