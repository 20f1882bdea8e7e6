import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNodePair } from './support/node-pair';
import { redisDown } from './support/redis';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, recordFrames, registerPlayer, TestSocket } from './support/ws-client';

/**
 * `module.event`: an extension pushes a named event `{module, event, data}`
 * to a player (ExtensionHost.pushEvent), here the example extension's
 * `greeter.wave`, which pushes `greeter.waved` to the player it names.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const GREETER = path.join(here, '../examples/extensions/greeter.ts');
const skipReason = await redisDown();

describe('module.event from the example extension', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ extensions: [GREETER] });
  });
  afterAll(async () => {
    await s.close();
  });

  it('reaches every socket of the player it names, as {module, event, data}, with no legacy twin', async () => {
    const alice = await connectPlayer(s, 'alice');
    const bob = await connectPlayer(s, 'bob');
    const bobsSecond = await TestSocket.open(s);
    await bobsSecond.request('session.connect', { token: bob.token });
    const seen = recordFrames(bob.socket);

    expect((await alice.socket.request('rpc.call', { protocol: 1, method: 'greeter.set', params: { text: 'ahoy' } })).type).toBe('rpc.ok');
    const ok = await alice.socket.request('rpc.call', { protocol: 1, method: 'greeter.wave', params: { player_id: bob.playerId } });
    expect(ok.payload).toEqual({ result: {} });
    const expected = { type: 'module.event', payload: { module: 'greeter', event: 'greeter.waved', data: { from: alice.playerId, text: 'ahoy' } } };
    expect(await bob.socket.next('module.event')).toEqual(expected);
    expect(await bobsSecond.next('module.event')).toEqual(expected);
    // Over REST as well; nothing else arrives beside the event (module.event has no game.* twin).
    const rest = await s.call('POST', '/api/v1/rpc/greeter.wave', { token: alice.token, body: { params: { player_id: bob.playerId } } });
    expect(rest.status).toBe(200);
    expect(await bob.socket.next('module.event')).toEqual(expected);
    await new Promise((r) => setTimeout(r, 100));
    expect(seen.map((f) => f.type)).toEqual(['module.event', 'module.event']);
    expect(alice.socket.frames.filter((f) => f.type === 'module.event')).toEqual([]);
    for (const sock of [alice.socket, bob.socket, bobsSecond]) sock.close();
  });

  it('waving at a player who is offline answers ok and pushes nothing; a bad player_id is rpc.invalid_params', async () => {
    const alice = await connectPlayer(s, 'alice');
    const offline = await registerPlayer(s, 'carol');
    const ok = await alice.socket.request('rpc.call', { protocol: 1, method: 'greeter.wave', params: { player_id: offline.playerId } });
    expect(ok.type).toBe('rpc.ok');
    const bad = await alice.socket.request('rpc.call', { protocol: 1, method: 'greeter.wave', params: { player_id: 'nobody' } });
    expect(bad.type).toBe('rpc.error');
    expect(bad.payload.error.code).toBe('rpc.invalid_params');
    alice.socket.close();
  });

  it('is published in the AsyncAPI document with its payload', async () => {
    const doc = await s.call('GET', '/api/v1/asyncapi.json');
    const message = doc.body.channels.socket.messages['server.module.event'];
    expect(message.name).toBe('module.event');
    expect(message.payload.properties.payload.required).toEqual(['module', 'event', 'data']);
    expect(doc.body.channels.socket.messages['server.game.event']).toBeUndefined();
  });
});

describe.skipIf(skipReason !== null)('module.event on a fleet', () => {
  let pair: Awaited<ReturnType<typeof startNodePair>>;
  beforeAll(async () => {
    pair = await startNodePair('ext-events', { extensions: [GREETER] });
  });
  afterAll(async () => {
    await pair?.close();
  });

  it('reaches the player on whichever node holds its sockets, once on each', async () => {
    const alice = await connectPlayer(pair.a, 'alice');
    const bob = await connectPlayer(pair.b, 'bob');
    const bobOnA = await TestSocket.open(pair.a);
    await bobOnA.request('session.connect', { token: bob.token });
    const onB = recordFrames(bob.socket);
    const onA = recordFrames(bobOnA);
    // Called on node a, for a player on node b as well as on node a.
    const ok = await alice.socket.request('rpc.call', { protocol: 1, method: 'greeter.wave', params: { player_id: bob.playerId } });
    expect(ok.type).toBe('rpc.ok');
    const expected = { type: 'module.event', payload: { module: 'greeter', event: 'greeter.waved', data: { from: alice.playerId, text: 'Hello!' } } };
    expect(await bob.socket.next('module.event')).toEqual(expected);
    expect(await bobOnA.next('module.event')).toEqual(expected);
    await new Promise((r) => setTimeout(r, 300));
    expect(onB.filter((f) => f.type === 'module.event')).toHaveLength(1);
    expect(onA.filter((f) => f.type === 'module.event')).toHaveLength(1);
    for (const sock of [alice.socket, bob.socket, bobOnA]) sock.close();
  });
});
