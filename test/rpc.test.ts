import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LiveHost } from '../host/realtime/live';
import { ApiError } from '../runtime/contracts/errors';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, TestSocket } from './support/ws-client';

let s: TestServer;
let sock: TestSocket;
let playerId: string;

beforeAll(async () => {
  s = await startTestServer();
  // An extension registers its methods at boot.
  const rpc = (s.ctx.live as LiveHost).rpc;
  rpc.register('crafting.start', (params, call) => ({ job: `job-${String(params.recipe)}`, caller: call.playerId, method: call.method }));
  rpc.register('crafting.nothing', () => undefined);
  rpc.register('crafting.slow', async (params) => {
    await new Promise((r) => setTimeout(r, 30));
    return { echoed: params };
  });
  rpc.register('crafting.broke', () => {
    throw new Error('boom');
  });
  rpc.register('crafting.poor', () => {
    throw new ApiError('economy.insufficient_funds', 'Not enough gold.', { need: 5 });
  }, { codes: ['economy.insufficient_funds'] });
  // An extension bundled apart throws its own copy of ApiError: the same shape, another class.
  rpc.register('crafting.bundled', () => {
    throw Object.assign(new Error('Not enough gold.'), { name: 'ApiError', code: 'economy.insufficient_funds', details: { need: 7 } });
  }, { codes: ['economy.insufficient_funds'] });
  rpc.register('crafting.undeclared', () => {
    throw new ApiError('storage.not_found');
  }, { codes: ['economy.insufficient_funds'] });
  rpc.register('crafting.scalar', () => 42);
  rpc.register('crafting.cyclic', () => {
    const o: Record<string, unknown> = {};
    o.self = o;
    return o;
  });
  const p = await connectPlayer(s);
  sock = p.socket;
  playerId = p.playerId;
});
afterAll(async () => {
  sock.close();
  await s.close();
});

function call(method: unknown, params: unknown = {}, extra: Record<string, unknown> = {}) {
  return sock.request('rpc.call', { protocol: 1, method, params, ...extra });
}

describe('rpc.call', () => {
  it('answers rpc.ok with the result, handing the handler the caller and method', async () => {
    const f = await call('crafting.start', { recipe: 'iron_sword' });
    expect(f.type).toBe('rpc.ok');
    expect(f.payload).toEqual({ result: { job: 'job-iron_sword', caller: playerId, method: 'crafting.start' } });
  });

  it('answers an empty result as {} and correlates async replies by cid', async () => {
    sock.send({ type: 'rpc.call', cid: 'slow', payload: { protocol: 1, method: 'crafting.slow', params: { n: 1 } } });
    sock.send({ type: 'rpc.call', cid: 'none', payload: { protocol: 1, method: 'crafting.nothing', params: {} } });
    const slow = await sock.next((f) => f.cid === 'slow');
    const none = await sock.next((f) => f.cid === 'none');
    expect(slow.payload.result).toEqual({ echoed: { n: 1 } });
    expect(none.payload).toEqual({ result: {} });
  });

  it('rejects a bad cid with rpc.invalid_cid and no cid key', async () => {
    for (const cid of [undefined, 5, '', 'x'.repeat(65), 'tab\there', 'é']) {
      const frame: Record<string, unknown> = { type: 'rpc.call', payload: { protocol: 1, method: 'crafting.start', params: {} } };
      if (cid !== undefined) frame.cid = cid;
      sock.send(frame);
      const f = await sock.next('rpc.error');
      expect(f.payload.error.code).toBe('rpc.invalid_cid');
      expect('cid' in f).toBe(false);
      expect('reason' in f.payload).toBe(false);
    }
  });

  it('runs the checks in protocol order, each as rpc.error', async () => {
    const cases: [Record<string, unknown> | string | undefined, string][] = [
      ['not an object', 'invalid_payload'],
      [{ method: 'crafting.start', params: {} }, 'rpc.unsupported_protocol'],
      [{ protocol: 2, method: 'crafting.start', params: {} }, 'rpc.unsupported_protocol'],
      [{ protocol: 1, params: {} }, 'rpc.unknown_method'],
      [{ protocol: 1, method: 7, params: {} }, 'rpc.unknown_method'],
      [{ protocol: 1, method: 'crafting.start' }, 'rpc.invalid_params'],
      [{ protocol: 1, method: 'crafting.start', params: [1] }, 'rpc.invalid_params'],
      [{ protocol: 1, method: 'nobody.serves', params: {} }, 'rpc.unknown_method'],
    ];
    for (const [payload, code] of cases) {
      const f = await sock.request('rpc.call', payload);
      expect(f.type).toBe('rpc.error');
      expect(f.payload.error.code).toBe(code);
      expect(f.payload.error.details).toBeTypeOf('object');
    }
    const proto = await sock.request('rpc.call', { protocol: 2, method: 'crafting.start', params: {} });
    expect(proto.payload.error.details).toEqual({ supported: [1] });
    // An absent payload counts as {} and fails the protocol check.
    expect((await sock.request('rpc.call')).payload.error.code).toBe('rpc.unsupported_protocol');
  });

  it('passes a declared domain code with its details; crashes, undeclared codes and bad results are internal', async () => {
    const poor = await call('crafting.poor');
    expect(poor.payload.error).toEqual({ code: 'economy.insufficient_funds', message: 'Not enough gold.', details: { need: 5 } });
    const bundled = await call('crafting.bundled');
    expect(bundled.payload.error).toEqual({ code: 'economy.insufficient_funds', message: 'Not enough gold.', details: { need: 7 } });
    for (const m of ['crafting.broke', 'crafting.undeclared', 'crafting.scalar', 'crafting.cyclic']) {
      const f = await call(m);
      expect(f.type).toBe('rpc.error');
      expect(f.payload.error.code).toBe('internal');
    }
    expect(JSON.stringify(s.logs)).not.toContain('"code":"storage.not_found"');
  });

  it('answers the datagram methods datagram_unavailable', async () => {
    const f = await call('asobi.datagram.open');
    expect(f.payload.error.code).toBe('datagram_unavailable');
  });
});

describe('rpc over HTTP', () => {
  it('serves the same dispatcher at POST /api/v1/rpc/<method> in the {type, payload} envelope', async () => {
    const p = await connectPlayer(s);
    const ok = await s.call('POST', '/api/v1/rpc/crafting.start', { token: p.token, body: { params: { recipe: 'axe' } } });
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ type: 'rpc.ok', payload: { result: { job: 'job-axe', caller: p.playerId, method: 'crafting.start' } } });
    const poor = await s.call('POST', '/api/v1/rpc/crafting.poor', { token: p.token, body: { params: {} } });
    expect(poor.status).toBe(402);
    expect(poor.body.type).toBe('rpc.error');
    expect(poor.body.payload.error).toEqual({ code: 'economy.insufficient_funds', message: 'Not enough gold.', details: { need: 5 } });
    expect(poor.body.error.code).toBe('economy.insufficient_funds');
    const unknown = await s.call('POST', '/api/v1/rpc/nobody.serves', { token: p.token, body: { params: {} } });
    expect(unknown.status).toBe(404);
    expect(unknown.body.payload.error.code).toBe('rpc.unknown_method');
    const noParams = await s.call('POST', '/api/v1/rpc/crafting.start', { token: p.token, body: {} });
    expect(noParams.body.payload.error.code).toBe('rpc.invalid_params');
    expect((await s.call('POST', '/api/v1/rpc/crafting.start', { body: { params: {} } })).status).toBe(401);
    p.socket.close();
  });
});
