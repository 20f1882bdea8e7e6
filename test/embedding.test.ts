import { readFileSync } from 'node:fs';
import path from 'node:path';
import { CompiledQuery } from 'kysely';
import { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase } from './support/database';

const root = path.resolve(__dirname, '..');
let mf: Miniflare;
let database: Awaited<ReturnType<typeof freshDatabase>>;
let statements = 0;

beforeAll(async () => {
  database = await freshDatabase();
  mf = new Miniflare({
    compatibilityDate: '2025-01-01',
    modules: [
      { type: 'ESModule', path: 'worker.mjs', contents: readFileSync(path.join(root, 'test/fixtures/embedding-worker.mjs'), 'utf8') },
      { type: 'ESModule', path: 'handlers.mjs', contents: readFileSync(path.join(root, 'dist/handlers.mjs'), 'utf8') },
    ],
    serviceBindings: {
      // The embedding host's database: statements arrive over the binding.
      DB: async (request: Request) => {
        const { sql, params } = (await request.json()) as { sql: string; params: unknown[] };
        statements++;
        try {
          const r = await database.db.executeQuery(CompiledQuery.raw(sql, params));
          return Response.json({ rows: r.rows, affectedRows: r.numAffectedRows === undefined ? undefined : Number(r.numAffectedRows) });
        } catch (err) {
          return Response.json({ error: { message: (err as Error).message, code: (err as { code?: string }).code } });
        }
      },
    },
  });
}, 60_000);

afterAll(async () => {
  await mf?.dispose();
  await database?.close();
});

describe('the handler library embedded in workerd', () => {
  it('has no node: import in its bundle', () => {
    // Comment lines are skipped: bundled JSDoc mentions node: in examples.
    const code = readFileSync(path.join(root, 'dist/handlers.mjs'), 'utf8')
      .split('\n')
      .filter((line) => !/^\s*(\*|\/\/|\/\*)/.test(line));
    expect(code.length).toBeGreaterThan(100);
    expect(code.filter((line) => /(from\s*|import\s*\(\s*|require\s*\(\s*)["']node:/.test(line))).toEqual([]);
  });

  it('answers an unknown route with the error contract', async () => {
    const res = await mf.dispatchFetch('http://svc.example/api/v1/nowhere');
    expect(res.status).toBe(404);
    const body = (await res.json()) as { error: { code: string; details: object } };
    expect(body.error.code).toBe('not_found');
    expect(body.error.details).toEqual({});
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('reaches the database through the Ctx the embedding host supplies', async () => {
    const before = statements;
    const res = await mf.dispatchFetch('http://svc.example/api/v1/health/ready');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok', database: 'ok' });
    expect(statements).toBeGreaterThan(before);
  });

  it('reads request bodies under the same rules as the Node host', async () => {
    const chunked = await mf.dispatchFetch('http://svc.example/api/v1/auth/login', { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    expect(chunked.status).toBe(411);
    expect(((await chunked.json()) as { error: { code: string } }).error.code).toBe('length_required');
    const bad = await mf.dispatchFetch('http://svc.example/api/v1/auth/login', {
      method: 'POST',
      body: '{"username":',
      headers: { 'content-type': 'application/json', 'content-length': '12' },
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('invalid_json');
    const missing = await mf.dispatchFetch('http://svc.example/api/v1/auth/login', {
      method: 'POST',
      body: '{}',
      headers: { 'content-type': 'application/json', 'content-length': '2' },
    });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { error: { code: string; details: { field: string } } }).error).toMatchObject({ code: 'missing_field', details: { field: 'username' } });
  });

  it('registers, signs in and serves an authenticated read, all inside workerd', async () => {
    const post = (path: string, body: unknown) => {
      const text = JSON.stringify(body);
      return mf.dispatchFetch(`http://svc.example${path}`, {
        method: 'POST',
        body: text,
        headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) },
      });
    };
    const reg = await post('/api/v1/auth/register', { username: 'embedded_1', password: 'correct horse' });
    expect(reg.status).toBe(200);
    const pair = (await reg.json()) as { player_id: string; access_token: string };
    const login = await post('/api/v1/auth/login', { username: 'embedded_1', password: 'correct horse' });
    expect(login.status).toBe(200);
    const wrong = await post('/api/v1/auth/login', { username: 'embedded_1', password: 'wrong horse!' });
    expect(wrong.status).toBe(401);
    const me = await mf.dispatchFetch(`http://svc.example/api/v1/players/${pair.player_id}`, { headers: { authorization: `Bearer ${pair.access_token}` } });
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({ id: pair.player_id, username: 'embedded_1' });
    const anonymous = await mf.dispatchFetch(`http://svc.example/api/v1/players/${pair.player_id}`);
    expect(anonymous.status).toBe(401);
    // Every member of the Ctx is the host's: receipts with no store configured answer 422 iap.verification_failed naming the missing setting.
    const text = JSON.stringify({ signed_transaction: 'a.b.c' });
    const receipt = await mf.dispatchFetch('http://svc.example/api/v1/iap/apple', {
      method: 'POST',
      body: text,
      headers: { authorization: `Bearer ${pair.access_token}`, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) },
    });
    expect(receipt.status).toBe(422);
    expect(((await receipt.json()) as { error: { code: string; details: { reason: string } } }).error).toMatchObject({ code: 'iap.verification_failed', details: { reason: 'apple_root_cert_not_configured' } });
  });
});
