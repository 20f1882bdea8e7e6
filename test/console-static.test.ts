import { createServer, request, type Server } from 'node:http';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StaticSite } from '../host/http/static-site';
import { startTestServer, type TestServer } from './support/server';

/**
 * The host's static site server (host/http/static-site.ts) over real HTTP,
 * with raw request targets: fetch would normalise the traversal attempts
 * before they left the client. The test server says every request arrived
 * over TLS when the target carries `?tls`, as the host's adapter would
 * decide for a trusted proxy.
 */

let dir: string;
let server: Server;
let base: { host: string; port: number };

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function raw(method: string, target: string, headers: Record<string, string> = {}): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = request({ ...base, method, path: target, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'site-'));
  const built = path.join(dir, 'built');
  mkdirSync(path.join(built, 'fonts'), { recursive: true });
  writeFileSync(path.join(built, 'index.html'), '<!doctype html><title>app</title><script type="module" src="/app/main-ABCD2345.js"></script>');
  writeFileSync(path.join(built, 'main-ABCD2345.js'), 'console.log(1)');
  writeFileSync(path.join(built, 'main-ABCD2345.css'), 'body{}');
  writeFileSync(path.join(built, 'fonts', 'face-QWERTY77.woff2'), 'font');
  writeFileSync(path.join(built, 'robots.txt'), 'User-agent: *');
  const sites = [
    new StaticSite({ prefix: '/app', dir: built, passThrough: ['/app/session'], codes: { notFound: 'console.not_found', notBuilt: 'console.not_built' } }),
    new StaticSite({ prefix: '/unbuilt', dir: path.join(dir, 'nothing-here'), codes: { notBuilt: 'console.not_built' } }),
  ];
  server = createServer((req, res) => {
    const secure = /[?&]tls(&|$)/.test(req.url ?? '');
    for (const site of sites) if (site.serve(req, res, secure)) return;
    res.writeHead(418);
    res.end('api');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = { host: '127.0.0.1', port: (server.address() as AddressInfo).port };
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

describe('StaticSite', () => {
  it('serves the index for the prefix and for every app route under it, never cached', async () => {
    for (const target of ['/app', '/app/', '/app/players', '/app/players/123?q=x', '/app/leaderboards/board?id=a%3Ab']) {
      const res = await raw('GET', target);
      expect(res.status, target).toBe(200);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(res.headers['cache-control']).toBe('no-cache');
      expect(res.body).toContain('<title>app</title>');
    }
  });

  it('serves hashed files immutable with their types, other files revalidated', async () => {
    const js = await raw('GET', '/app/main-ABCD2345.js');
    expect(js.body).toBe('console.log(1)');
    expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(js.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect((await raw('GET', '/app/main-ABCD2345.css')).headers['content-type']).toBe('text/css; charset=utf-8');
    const font = await raw('GET', '/app/fonts/face-QWERTY77.woff2');
    expect(font.headers['content-type']).toBe('font/woff2');
    expect(font.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const robots = await raw('GET', '/app/robots.txt');
    expect(robots.headers['cache-control']).toBe('no-cache');
  });

  it('sends the security headers, a self-only CSP without inline script, and answers revalidation with 304', async () => {
    const res = await raw('GET', '/app/main-ABCD2345.js');
    expect(res.headers).toMatchObject({ 'x-content-type-options': 'nosniff', 'x-frame-options': 'DENY', 'referrer-policy': 'no-referrer', 'cross-origin-resource-policy': 'same-origin' });
    const csp = String(res.headers['content-security-policy']);
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self';");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("frame-ancestors 'none'");
    expect(res.headers['strict-transport-security']).toBeUndefined();
    const again = await raw('GET', '/app/main-ABCD2345.js', { 'if-none-match': String(res.headers.etag) });
    expect(again.status).toBe(304);
    expect(again.body).toBe('');
  });

  it('answers HEAD without a body and leaves other methods to the API', async () => {
    const head = await raw('HEAD', '/app/main-ABCD2345.js');
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBe(String('console.log(1)'.length));
    expect(head.body).toBe('');
    for (const method of ['POST', 'PUT', 'DELETE', 'OPTIONS']) expect((await raw(method, '/app/players')).status, method).toBe(418);
  });

  it('leaves paths outside its prefix and its pass-through paths to the API', async () => {
    for (const target of ['/application', '/ap', '/', '/api/v1/health', '/app/session', '/app/session?x=1']) {
      expect((await raw('GET', target)).status, target).toBe(418);
    }
  });

  it('refuses traversal, encoded tricks and missing files with its 404 error object', async () => {
    const attempts = [
      '/app/../package.json',
      '/app/./index.html',
      '/app/%2e%2e/package.json',
      '/app/%2E%2E%2Fpackage.json',
      '/app/..%2fpackage.json',
      '/app/fonts/..%5c..%5cpackage.json',
      '/app/%00',
      '/app//etc/passwd',
      '/app/fonts\\..\\..\\package.json',
      '/app/main.js',
      '/app/fonts/missing-AAAAAAAA.woff2',
    ];
    for (const target of attempts) {
      const res = await raw('GET', target);
      expect(res.status, target).toBe(404);
      expect(JSON.parse(res.body).error.code, target).toBe('console.not_found');
      expect(res.headers['cache-control']).toBe('no-store');
    }
  });

  it('answers its not-built code while its directory holds no build', async () => {
    for (const target of ['/unbuilt', '/unbuilt/anything', '/unbuilt/main-ABCD2345.js']) {
      const res = await raw('GET', target);
      expect(res.status, target).toBe(503);
      expect(JSON.parse(res.body).error.code).toBe('console.not_built');
    }
  });

  it('sends the API’s HSTS header on files, app routes and refusals when the request was secure, and only then', async () => {
    for (const target of ['/app/main-ABCD2345.js', '/app/players', '/app/main.js', '/unbuilt']) {
      expect((await raw('GET', `${target}?tls`)).headers['strict-transport-security'], target).toBe('max-age=31536000; includeSubDomains');
      expect((await raw('GET', target)).headers['strict-transport-security'], target).toBeUndefined();
    }
  });

  it('refuses with the API’s error headers', async () => {
    const res = await raw('GET', '/app/main.js');
    expect(res.headers).toMatchObject({
      'content-type': 'application/json; charset=utf-8',
      'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
      'x-content-type-options': 'nosniff',
      'x-frame-options': 'DENY',
      'cache-control': 'no-store',
    });
    expect(res.headers['content-length']).toBe(String(Buffer.byteLength(res.body)));
    expect((await raw('HEAD', '/app/main.js')).body).toBe('');
  });

  it('refuses a prefix that is not a plain path', () => {
    for (const prefix of ['app', '/app/', '/a b', '/../x', '/']) expect(() => new StaticSite({ prefix, dir })).toThrow(/prefix/);
  });
});

/**
 * Behind a TLS-terminating proxy the node sees plain HTTP: the console must
 * take the proxy's word exactly when the API does, from the same setting.
 */
describe('the console behind a proxy', () => {
  let trusting: TestServer;
  let wary: TestServer;
  beforeAll(async () => {
    [trusting, wary] = await Promise.all([
      startTestServer({ console: true, trusted_proxies: ['127.0.0.0/8', '::1'] }),
      startTestServer({ console: true, trusted_proxies: ['10.0.0.0/8'] }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([trusting?.close(), wary?.close()]);
  });

  const viaProxy = { headers: { 'x-forwarded-proto': 'https' } };

  it('sends the API’s Strict-Transport-Security when a trusted proxy reports https', async () => {
    const api = await trusting.call('GET', '/api/v1/health', viaProxy);
    const hsts = api.headers.get('strict-transport-security');
    expect(hsts).toBeTruthy();
    // The console may be built or not: its index and its not-built refusal both carry it.
    for (const target of ['/console', '/console/players', '/console/missing.js']) {
      const res = await trusting.call('GET', target, viaProxy);
      expect([200, 404, 503], target).toContain(res.status);
      expect(res.headers.get('strict-transport-security'), target).toBe(hsts);
    }
  });

  it('sends none when the header comes from an address it does not trust', async () => {
    expect((await wary.call('GET', '/api/v1/health', viaProxy)).headers.get('strict-transport-security')).toBeNull();
    for (const target of ['/console', '/console/players', '/console/missing.js']) {
      expect((await wary.call('GET', target, viaProxy)).headers.get('strict-transport-security'), target).toBeNull();
    }
  });
});
