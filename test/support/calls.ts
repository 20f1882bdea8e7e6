/** What a test sends: a JSON body (or raw text), a bearer token, extra headers. */
export interface CallOptions {
  body?: unknown;
  token?: string;
  headers?: Record<string, string>;
}

export interface Answer {
  status: number;
  body: any;
  headers: Headers;
}

/**
 * The request a test call makes. `contentLength`: state it, for hosts that
 * take a Request as given (the in-process app); over a socket fetch does.
 */
export function requestInit(method: string, opts: CallOptions, contentLength = false): RequestInit {
  const headers = new Headers(opts.headers ?? {});
  if (opts.token) headers.set('authorization', `Bearer ${opts.token}`);
  if (opts.body === undefined) return { method, headers };
  const body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
  if (!headers.has('content-type')) headers.set('content-type', 'application/json');
  if (contentLength) headers.set('content-length', String(Buffer.byteLength(body)));
  return { method, headers, body };
}

/** The answer with its body parsed as JSON, or left as text when it is not JSON. */
export async function answerOf(res: Response): Promise<Answer> {
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    /* leave as text: a test will say so */
  }
  return { status: res.status, body: parsed, headers: res.headers };
}
