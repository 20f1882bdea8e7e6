import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './support/server';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
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

/** Raw HTTP, for bodies fetch will not send (lying lengths, chunked). */
function raw(method: string, path: string, headers: Record<string, string | number>, body?: Buffer | string, chunked = false) {
  return new Promise<{ status: number; body: any; headers: Record<string, unknown> }>((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: s.port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null, headers: res.headers });
      });
    });
    req.on('error', reject);
    if (body !== undefined) {
      if (chunked) {
        req.write(body);
      } else {
        req.end(body);
        return;
      }
    }
    req.end();
  });
}

describe('error contract', () => {
  it('answers an unknown path with the error object', async () => {
    const res = await s.call('GET', '/api/v1/no/such/route');
    expectError(res, 404, 'not_found');
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('answers an unknown method on a known path with the error object', async () => {
    const res = await s.call('DELETE', '/api/v1/health');
    expectError(res, 404, 'not_found');
  });

  it('puts security headers on every response, errors included', async () => {
    for (const path of ['/api/v1/health', '/nowhere']) {
      const res = await s.call('GET', path);
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
      expect(res.headers.get('cache-control')).toBe('no-store');
    }
  });

  it('reaches the database through the readiness probe', async () => {
    const res = await s.call('GET', '/api/v1/health/ready');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok', database: 'ok' });
  });
});

describe('body rules', () => {
  it('refuses a body without Content-Length with 411 length_required', async () => {
    const res = await raw('POST', '/api/v1/health', { 'transfer-encoding': 'chunked', 'content-type': 'application/json' }, '{"a":1}', true);
    expectError(res, 411, 'length_required');
  });
});
