import { Agent, request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createApp } from '../handlers/app';
import { route, type Route } from '../handlers/contract';
import { SECURITY_HEADERS } from '../handlers/http';
import { startTestServer, type TestServer } from './support/server';

const MiB = 1024 * 1024;

/** Test-only probes mounted beside the real routes. */
const probe = { tag: 'test', auth: 'none', rate: 'api', errors: [] } as const;
const probes: Route[] = [
  route({
    ...probe,
    method: 'POST',
    path: '/api/v1/test/echo',
    summary: 'counts the body keys',
    body: z.record(z.string(), z.unknown()),
    response: z.object({ keys: z.number() }),
    handle: async ({ body }) => ({ keys: Object.keys(body).length }),
  }),
  route({
    ...probe,
    method: 'GET',
    path: '/api/v1/test/boom',
    summary: 'fails',
    response: z.object({}),
    handle: async () => {
      throw new Error('kaboom');
    },
  }),
  route({
    ...probe,
    method: 'GET',
    path: '/api/v1/test/boom-now',
    summary: 'fails before any promise',
    response: z.object({}),
    handle: () => {
      throw new Error('kaboom at once');
    },
  }),
  route({
    ...probe,
    method: 'GET',
    path: '/api/v1/test/:id/query',
    summary: 'echoes the id and the query parameter q, answering at once',
    params: z.object({ id: z.string() }),
    query: z.object({ q: z.string().optional() }),
    response: z.object({ id: z.string(), q: z.string().optional() }),
    handle: ({ params, query }) => ({ id: params.id, ...(query.q !== undefined ? { q: query.q } : {}) }),
  }),
  route({
    ...probe,
    method: 'GET',
    path: '/api/v1/test/:id',
    summary: 'echoes the id',
    params: z.object({ id: z.string() }),
    response: z.object({ id: z.string() }),
    handle: async ({ params }) => ({ id: params.id }),
  }),
];

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ cors_origins: ['https://game.example'] }, { extraRoutes: probes });
});
afterAll(async () => {
  await s.close();
});

function expectError(res: { status: number; body: any }, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.body.error.code).toBe(code);
  expect(typeof res.body.error.message).toBe('string');
  expect(res.body.error.details).toBeTypeOf('object');
  expect(res.body.error.details).not.toBeNull();
}

interface RawOptions {
  headers: Record<string, string | number>;
  body?: Buffer | string;
  /** Send the body as chunked transfer encoding (no Content-Length). */
  chunked?: boolean;
}

/** Raw HTTP, for bodies fetch will not send (lying lengths, chunked). */
function raw(method: string, path: string, o: RawOptions) {
  return new Promise<{ status: number; body: any; headers: Record<string, unknown> }>((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: s.port, method, path, headers: o.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null, headers: res.headers });
      });
    });
    // The server may answer and close before it has read what we send.
    req.on('error', (err) => ((err as NodeJS.ErrnoException).code === 'EPIPE' || (err as NodeJS.ErrnoException).code === 'ECONNRESET' ? undefined : reject(err)));
    if (o.body !== undefined) req.write(o.body);
    req.end();
  });
}

/** A JSON object whose encoding is exactly `size` bytes. */
function objectOfSize(size: number): string {
  const skeleton = '{"p":""}';
  return `{"p":"${'x'.repeat(size - skeleton.length)}"}`;
}

describe('error contract', () => {
  it('answers an unknown path with the error object', async () => {
    const res = await s.call('GET', '/api/v1/no/such/route');
    expectError(res, 404, 'not_found');
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('routes by pattern, and refuses to mount a route outside /api/v1/<literal>', async () => {
    expect((await s.call('GET', '/api/v1/test/7')).body).toEqual({ id: '7' });
    expect((await s.call('GET', '/api/v1/test/test-probe')).body).toEqual({ id: 'test-probe' });
    expectError(await s.call('GET', '/api/v1/health/elsewhere'), 404, 'not_found');
    // Routers are sharded by the first segment, so a pattern starting with a parameter could never match.
    const stray = route({ ...probe, method: 'GET', path: '/api/v1/:realm/x', summary: 'stray', response: z.object({}), handle: async () => ({}) });
    expect(() => createApp(s.ctx, [stray])).toThrow(/not under \/api\/v1\/<literal>/);
  });

  // The pipeline reads most targets without the URL parser (decision 0060); these read the same either way.
  it('routes a request target as the URL parser reads it, whether or not it needs parsing', async () => {
    const get = async (target: string) => (await raw('GET', target, { headers: {} })).body;
    expect(await get('/api/v1/test/a%20b/query?q=x+y%21')).toEqual({ id: 'a b', q: 'x y!' });
    expect(await get('/api/v1/test/7/query?q=&q=5')).toEqual({ id: '7', q: '5' });
    expect(await get('/api/v1/test/7/query?q=1&q=2')).toEqual({ id: '7', q: '1' });
    expect(await get('/api/v1/test/7/query?')).toEqual({ id: '7' });
    // Dot segments, encoded or not, are resolved before routing; the parser percent-encodes an apostrophe in a query and decodes it again.
    expect(await get('/api/v1/test/x/../8/query?q=%27a%27')).toEqual({ id: '8', q: "'a'" });
    expect(await get("/api/v1/test/9/./query?q='b'")).toEqual({ id: '9', q: "'b'" });
    expect((await get('/api/v1/test/%2e%2e/query')).error.code).toBe('not_found');
    expect((await get('/api/v1/test/x/%2E%2E/7')).id).toBe('7');
    // A second question mark belongs to the query: the key is `?q`, not `q`.
    expect(await get('/api/v1/test/7/query??q=1')).toEqual({ id: '7' });
    // A backslash reads as a slash in an http URL.
    expect(await get('/api/v1/test/x\\..\\11/query')).toEqual({ id: '11' });
  });

  it('answers a handler that throws before any promise as one that rejects', async () => {
    const res = await s.call('GET', '/api/v1/test/boom-now');
    expectError(res, 500, 'internal');
    expect(s.logs.filter((l) => l.event === 'unhandled_exception' && l.request_id === res.headers.get('x-request-id'))).toHaveLength(1);
  });

  it('answers a path outside the API with the error object', async () => {
    expectError(await s.call('GET', '/'), 404, 'not_found');
    expectError(await s.call('GET', '/favicon.ico'), 404, 'not_found');
  });

  it('answers an unknown method on a known path with the error object', async () => {
    expectError(await s.call('DELETE', '/api/v1/health'), 404, 'not_found');
    expectError(await s.call('PATCH', '/api/v1/health'), 404, 'not_found');
  });

  it('turns a thrown exception into 500 internal, logs its stack once, and names the request', async () => {
    const res = await s.call('GET', '/api/v1/test/boom');
    expectError(res, 500, 'internal');
    const requestId = res.headers.get('x-request-id');
    expect(res.body.error.details.request_id).toBe(requestId);
    expect(JSON.stringify(res.body)).not.toContain('kaboom');
    const lines = s.logs.filter((l) => l.event === 'unhandled_exception' && l.request_id === requestId);
    expect(lines).toHaveLength(1);
    expect(JSON.stringify(lines[0])).toContain('kaboom');
    expect(String((lines[0]!.error as { stack: string }).stack)).toContain('pipeline.test.ts');
  });

  it('puts security headers on every response, errors included', async () => {
    for (const path of ['/api/v1/health', '/nowhere', '/api/v1/test/boom']) {
      const res = await s.call('GET', path);
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('referrer-policy')).toBe('no-referrer');
      expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.headers.get('content-type')).toContain('application/json');
    }
  });

  it('reaches the database through the readiness probe', async () => {
    const res = await s.call('GET', '/api/v1/health/ready');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok', database: 'ok' });
  });
});

describe('body rules', () => {
  it('accepts a body of exactly 1 MiB', async () => {
    const body = objectOfSize(MiB);
    expect(Buffer.byteLength(body)).toBe(MiB);
    const res = await raw('POST', '/api/v1/test/echo', { headers: { 'content-type': 'application/json', 'content-length': MiB }, body });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ keys: 1 });
  });

  it('refuses a declared 1 MiB + 1 with 413 before reading it', async () => {
    const body = objectOfSize(MiB + 1);
    const res = await raw('POST', '/api/v1/test/echo', { headers: { 'content-type': 'application/json', 'content-length': MiB + 1 }, body });
    expectError(res, 413, 'payload_too_large');
    // The adapter answers it, not the app, with the same headers as any other error answer.
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) expect(res.headers[name]).toBe(value);
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('a keep-alive client that sent an oversized body gets its next request answered (on a new connection)', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const send = (headers: Record<string, string | number>, body: string) =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest({ host: '127.0.0.1', port: s.port, method: 'POST', path: '/api/v1/test/echo', agent, headers }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        });
        req.on('error', reject);
        req.end(body);
      });
    try {
      expect(await send({ 'content-type': 'application/json', 'content-length': MiB + 1 }, objectOfSize(MiB + 1))).toBe(413);
      expect(await send({ 'content-type': 'application/json' }, '{"a":1}')).toBe(200);
    } finally {
      agent.destroy();
    }
  });

  it('lets a client finish an oversized upload and read its 413, then closes gracefully', async () => {
    const size = 4 * MiB;
    const outcome = await new Promise<{ response: string; error: string | null; ended: boolean }>((resolve) => {
      const socket = connect(s.port, '127.0.0.1');
      let response = '';
      let error: string | null = null;
      let ended = false;
      socket.setEncoding('utf8');
      socket.on('data', (d: string) => (response += d));
      socket.on('end', () => (ended = true));
      socket.on('error', (err: NodeJS.ErrnoException) => (error = err.code ?? err.message));
      socket.on('close', () => resolve({ response, error, ended }));
      socket.on('connect', async () => {
        socket.write(`POST /api/v1/test/echo HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${size}\r\n\r\n`);
        const chunk = Buffer.alloc(64 * 1024, 0x20);
        for (let sent = 0; sent < size && !socket.destroyed; sent += chunk.byteLength) {
          if (!socket.write(chunk)) await new Promise((r) => socket.once('drain', r));
        }
      });
    });
    expect(outcome.error).toBeNull();
    expect(outcome.ended).toBe(true);
    expect(outcome.response.startsWith('HTTP/1.1 413')).toBe(true);
    // It says the connection closes, so a client does not send its next request on it.
    const head = outcome.response.slice(0, outcome.response.indexOf('\r\n\r\n')).toLowerCase();
    expect(head).toContain('\r\nconnection: close');
    expect(head).not.toContain('keep-alive');
    const body = JSON.parse(outcome.response.slice(outcome.response.indexOf('\r\n\r\n') + 4));
    expect(body.error.code).toBe('payload_too_large');
  });

  it('refuses a body that outgrows a lying Content-Length', async () => {
    // Declares 10 bytes, sends 2 MiB: the server must not buffer past its cap.
    const res = await raw('POST', '/api/v1/test/echo', {
      headers: { 'content-type': 'application/json', 'content-length': 10 },
      body: 'x'.repeat(2 * MiB),
    });
    expect([400, 413]).toContain(res.status);
    expect(res.body.error.details).toBeTypeOf('object');
  });

  it('refuses a body without Content-Length with 411 length_required', async () => {
    const res = await raw('POST', '/api/v1/test/echo', { headers: { 'transfer-encoding': 'chunked', 'content-type': 'application/json' }, body: '{"a":1}' });
    expectError(res, 411, 'length_required');
  });

  it('answers malformed JSON with 400 invalid_json', async () => {
    expectError(await s.call('POST', '/api/v1/test/echo', { body: '{"a":' }), 400, 'invalid_json');
  });

  it('answers a body that is not an object with 400 invalid_payload', async () => {
    for (const body of ['[1,2]', '"text"', '42', 'null', 'true']) {
      expectError(await s.call('POST', '/api/v1/test/echo', { body }), 400, 'invalid_payload');
    }
  });

  it('reads an absent body as an empty object', async () => {
    const res = await s.call('POST', '/api/v1/test/echo');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ keys: 0 });
  });
});

describe('CORS', () => {
  it('answers configured origins only', async () => {
    const allowed = await s.call('GET', '/api/v1/health', { headers: { origin: 'https://game.example' } });
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://game.example');
    const other = await s.call('GET', '/api/v1/health', { headers: { origin: 'https://evil.example' } });
    expect(other.status).toBe(200);
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('answers a preflight from a configured origin and refuses others', async () => {
    const ok = await s.call('OPTIONS', '/api/v1/health', {
      headers: { origin: 'https://game.example', 'access-control-request-method': 'POST' },
    });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('access-control-allow-methods')).toContain('POST');
    expect(ok.headers.get('access-control-allow-headers')).toContain('authorization');
    const no = await s.call('OPTIONS', '/api/v1/health', { headers: { origin: 'https://evil.example' } });
    expectError(no, 404, 'not_found');
    expect(no.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('request log', () => {
  it('writes one structured line per request without credentials', async () => {
    const secret = 'super-secret-bearer-value';
    const res = await s.call('GET', '/api/v1/health', { token: secret });
    const id = res.headers.get('x-request-id');
    const lines = s.logs.filter((l) => l.event === 'http_request' && l.request_id === id);
    expect(lines).toHaveLength(1);
    // Probes are frequent: their lines are `debug`, every other request's `info`.
    expect(lines[0]).toMatchObject({ method: 'GET', route: '/api/v1/health', status: 200, level: 'debug' });
    expect(typeof lines[0]!.duration_ms).toBe('number');
    expect(JSON.stringify(s.logs)).not.toContain(secret);
    const other = await s.call('GET', '/nowhere', { token: secret });
    const otherLine = s.logs.find((l) => l.event === 'http_request' && l.request_id === other.headers.get('x-request-id'));
    expect(otherLine).toMatchObject({ status: 404, level: 'info' });
    expect(JSON.stringify(s.logs)).not.toContain(secret);
  });
});
