import { Parser } from '@asyncapi/parser';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allRoutes } from '../handlers/routes';
import type { LiveHost } from '../host/realtime/live';
import { frameTable, type FrameServices } from '../host/realtime/frame-table';
import { clientFrames, serverPushes } from '../runtime/schemas/wire';
import { startTestServer, type TestServer } from './support/server';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.close();
});

describe('API documents', () => {
  it('serves an OpenAPI 3.1 document that a validator accepts and that lists every route', async () => {
    const res = await s.call('GET', '/api/v1/openapi.json');
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc.openapi).toBe('3.1.0');
    const verdict = await new Validator().validate(doc);
    expect(verdict.errors ?? []).toEqual([]);
    expect(verdict.valid).toBe(true);

    const listed = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    const registered = allRoutes().map((r) => `${r.method} ${r.path.replace(/:(\w+)/g, '{$1}')}`);
    expect(listed.sort()).toEqual(registered.sort());
    // The drift check can fail: a route the document leaves out is a route it does not know.
    expect(listed).not.toContain('GET /api/v1/nowhere');

    const join = doc.paths['/api/v1/dm']?.post;
    expect(join.security).toEqual([{ bearer: [] }]);
    expect(Object.keys(join.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '403', '413', '429', '503']));
    expect(join.requestBody.content['application/json'].schema.required).toEqual(expect.arrayContaining(['recipient_id', 'content']));
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
  });

  it('serves an AsyncAPI 3 document that the AsyncAPI parser accepts, covering exactly the routed frames', async () => {
    const res = await s.call('GET', '/api/v1/asyncapi.json');
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc.asyncapi).toBe('3.0.0');
    const diagnostics = await new Parser().validate(doc);
    const errors = diagnostics.filter((d) => d.severity === 0).map((d) => `${d.path.join('.')}: ${d.message}`);
    expect(errors).toEqual([]);

    const routed = (s.ctx.live as LiveHost).gateway.frameTypes();
    expect([...routed].sort()).toEqual(clientFrames.map((f) => f.type).sort());
    const names = Object.values(doc.channels.socket.messages as Record<string, { name: string }>).map((m) => m.name);
    for (const type of routed) expect(names).toContain(type);
    for (const push of serverPushes) expect(names).toContain(push.type);
  });

  it('declares one frame table listing every client frame contract exactly once', () => {
    // Any service will do: the table is read, not served.
    const anyHandler = new Proxy({}, { get: () => () => null });
    const table = frameTable(new Proxy({}, { get: () => anyHandler }) as FrameServices);
    const types = table.map((r) => r.contract.type);
    expect(new Set(types).size).toBe(types.length);
    expect([...types].sort()).toEqual(clientFrames.map((f) => f.type).sort());
    // The declared contracts themselves, not look-alikes with the same type.
    for (const route of table) expect(clientFrames).toContain(route.contract);
  });
});
