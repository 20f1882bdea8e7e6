import http, { type IncomingHttpHeaders } from 'node:http';

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

/**
 * One request on a connection of its own (no keep-alive), so a balancer in
 * front routes each one anew; `localAddress` picks the loopback address it
 * comes from. The body is parsed as JSON when there is one.
 */
export function callOnce(url: string, method: string, opts: Omit<CallOptions, 'headers'> & { localAddress?: string } = {}): Promise<{ status: number; body: any; headers: IncomingHttpHeaders }> {
  const payload = opts.body === undefined ? undefined : typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method,
        agent: false,
        ...(opts.localAddress ? { localAddress: opts.localAddress } : {}),
        headers: {
          connection: 'close',
          ...(payload !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}),
          ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null, headers: res.headers });
        });
      },
    );
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}
