import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frameTypes, restTypes } from '../tools/client-codegen';
import { startTestServer, type TestServer } from './support/server';

/**
 * The client's committed types are what the service's own documents produce
 * today: a route or frame changed without `npm run client:types` fails here.
 */
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.close();
});

const committed = (file: string) => readFileSync(new URL(`../client/generated/${file}`, import.meta.url), 'utf8');

describe('generated client types', () => {
  it('match the REST types generated from the served OpenAPI document', async () => {
    const doc = await s.call('GET', '/api/v1/openapi.json');
    expect(doc.status).toBe(200);
    const fresh = await restTypes(doc.body);
    expect(fresh).toContain('"/api/v1/auth/login"');
    expect(fresh === committed('openapi.ts'), 'client/generated/openapi.ts is stale: run npm run client:types').toBe(true);
    // The comparison can fail: one route more is a different file.
    doc.body.paths['/api/v1/nowhere'] = doc.body.paths['/api/v1/auth/login'];
    expect(await restTypes(doc.body)).not.toBe(committed('openapi.ts'));
  });

  it('match the frame types generated from the served AsyncAPI document', async () => {
    const doc = await s.call('GET', '/api/v1/asyncapi.json');
    expect(doc.status).toBe(200);
    const fresh = await frameTypes(doc.body);
    expect(fresh).toContain('"matchmaker.add": {');
    expect(fresh === committed('frames.ts'), 'client/generated/frames.ts is stale: run npm run client:types').toBe(true);
    delete doc.body.operations['push.match.matched'];
    expect(await frameTypes(doc.body)).not.toBe(committed('frames.ts'));
  });
});
