import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { ConnectionError, createClient, ServiceError, type GameClient, type GameSocket, type StatusChange, type Tokens } from '../client';
import { gameDir, matchScript } from './support/game-dir';
import { newDevice, PEPPER_V1 } from './support/guests';
import { startTestServer, type TestServer } from './support/server';
import { TcpProxy } from '../tools/faults/tcp-proxy';
import type { LiveHost } from '../host/realtime/live';
import { SharedFrame } from '../host/realtime/sessions';
import { encodeWorldTick, type WorldTickFrame } from '../runtime/worlds/binary-wire';
import { TestSocket } from './support/ws-client';

/** `duo` pairs two players; every input is broadcast to the match as `match.moved`. */
const game = gameDir({
  'config.lua': 'return { duo = "duo.lua" }',
  'rpc.lua': 'rpc = {}\nfunction rpc.echo(player_id, params) return { you = player_id, said = params.word } end\n',
  'duo.lua': matchScript(
    'match_size = 2',
    `function handle_input(player_id, input, state)
       game.broadcast("moved", { player_id = player_id, n = input.n })
       return state
     end`,
  ),
});

let s: TestServer;
/** Every socket of this file reaches the server through this relay, so a test can cut the network. */
let proxy: TcpProxy;
let base: string;
const opened: GameSocket[] = [];

beforeAll(async () => {
  s = await startTestServer(
    { guest_auth: true, guest_verifier_pepper: PEPPER_V1, matchmaker_tick_ms: 50, ws_idle_timeout_ms: 2_500 },
    { gameDir: game.dir },
  );
  proxy = await TcpProxy.start({ host: '127.0.0.1', port: s.port });
  base = `http://127.0.0.1:${proxy.port}`;
});
afterEach(() => {
  for (const socket of opened.splice(0)) socket.close();
});
afterAll(async () => {
  await proxy.close();
  await s.close();
  game.remove();
});

let counter = 0;
const username = () => `cl_${process.pid}_${++counter}_${Math.random().toString(36).slice(2, 6)}`;
const PASSWORD = 'correct-horse-battery';

function client(tokens?: Tokens | null, onTokens?: (t: Tokens | null) => void): GameClient {
  return createClient({ baseUrl: base, WebSocket: WebSocket as never, tokens: tokens ?? null, ...(onTokens ? { onTokens } : {}) });
}

async function signedUp(): Promise<GameClient> {
  const c = client();
  await c.register({ username: username(), password: PASSWORD });
  return c;
}

function track(socket: GameSocket): GameSocket {
  opened.push(socket);
  return socket;
}

/** Resolves with the first status change that matches. */
function statusOf(socket: GameSocket, match: (c: StatusChange) => boolean): Promise<StatusChange> {
  return new Promise((resolve) => {
    const off = socket.onStatus((change) => {
      if (match(change)) {
        off();
        resolve(change);
      }
    });
  });
}

describe('REST', () => {
  it('registers, signs in and reads and updates the profile through typed calls', async () => {
    const name = username();
    const seen: (Tokens | null)[] = [];
    const c = client(null, (t) => seen.push(t));
    const registered = await c.register({ username: name, password: PASSWORD });
    expect(registered.username).toBe(name);
    expect(c.playerId).toBe(registered.player_id);
    expect(seen).toEqual([{ access_token: registered.access_token, refresh_token: registered.refresh_token }]);

    const me = await c.rest.get('/api/v1/players/me');
    expect(me).toMatchObject({ id: registered.player_id, username: name });
    const updated = await c.rest.put('/api/v1/players/{id}', { path: { id: registered.player_id }, body: { display_name: 'Ada' } });
    expect(updated.display_name).toBe('Ada');
    const found = await c.rest.get('/api/v1/players', { query: { username: name } });
    expect(JSON.stringify(found)).toContain(registered.player_id);

    const again = client();
    const login = await again.login({ username: name, password: PASSWORD });
    expect(login.player_id).toBe(registered.player_id);
    expect((await again.rest.get('/api/v1/players/{id}', { path: { id: registered.player_id } })).display_name).toBe('Ada');
  });

  it("surfaces the service's error object as a ServiceError with its code, status and details", async () => {
    const c = client();
    const wrong = await c.login({ username: username(), password: 'not the password' }).catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(ServiceError);
    expect(wrong).toMatchObject({ code: 'auth.invalid_credentials', status: 401 });
    expect(c.signedIn).toBe(false);

    const a = await signedUp();
    const missing = await a.rest.get('/api/v1/matchmaker/{ticket_id}', { path: { ticket_id: '0190c1f3-0000-7000-8000-00000000a001' } }).catch((e: unknown) => e);
    expect(missing).toMatchObject({ name: 'ServiceError', code: 'matchmaker.ticket_not_found', status: 404 });
    const bad = await a.rest.post('/api/v1/matchmaker', { body: { mode: 'no-such-mode' } }).catch((e: unknown) => e);
    expect(bad).toMatchObject({ code: 'matchmaker.unknown_mode', status: 400 });
    expect((bad as ServiceError).details).toBeTypeOf('object');
    // The compiler knows the document's paths: one it does not list does not compile (and answers 404).
    // @ts-expect-error not a path of the OpenAPI document
    const nowhere = await a.rest.get('/api/v1/nowhere').catch((e: unknown) => e);
    expect(nowhere).toMatchObject({ code: 'not_found', status: 404 });
  });

  it('refreshes once on 401 and repeats the call, with one rotation shared by concurrent calls', async () => {
    const a = await signedUp();
    const good = a.rest.tokens!;
    const seen: (Tokens | null)[] = [];
    // The access token went bad (expired, revoked); the refresh token still holds.
    const c = client({ access_token: 'not-a-token', refresh_token: good.refresh_token }, (t) => seen.push(t));
    const answers = await Promise.all([1, 2, 3, 4, 5].map(() => c.rest.get('/api/v1/players/me')));
    for (const me of answers) expect(me.id).toBe(a.playerId);
    // One rotation: reusing the old refresh token would have revoked the family.
    expect(seen).toHaveLength(1);
    expect(seen[0]!.refresh_token).not.toBe(good.refresh_token);
    expect(await c.rest.refresh()).toBe(true);
    expect((await c.rest.get('/api/v1/players/me')).id).toBe(a.playerId);
  });

  it('ends the session when the refresh token is refused: the 401 surfaces and the tokens are cleared', async () => {
    const a = await signedUp();
    const held = a.rest.tokens!;
    await a.logout();
    expect(a.signedIn).toBe(false);
    const seen: (Tokens | null)[] = [];
    const c = client({ access_token: 'not-a-token', refresh_token: held.refresh_token }, (t) => seen.push(t));
    const refused = await c.rest.get('/api/v1/players/me').catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'unauthenticated', status: 401 });
    expect(seen).toEqual([null]);
    expect(c.signedIn).toBe(false);
  });

  it('signs in as a guest on a device and upgrades the guest to a password account', async () => {
    const device = newDevice();
    const c = client();
    const guest = await c.guest(device);
    expect(guest).toMatchObject({ guest: true, created: true });
    const back = await client().guest(device);
    expect(back.player_id).toBe(guest.player_id);
    const name = username();
    const upgraded = await c.upgradeGuest({ username: name, password: PASSWORD });
    expect(upgraded).toMatchObject({ player_id: guest.player_id, username: name, upgraded: true });
    expect((await c.rest.get('/api/v1/players/me')).username).toBe(name);
  });

  it('queues, reads and withdraws a matchmaker ticket', async () => {
    const a = await signedUp();
    const queued = await a.rest.post('/api/v1/matchmaker', { body: { mode: 'duo', properties: { skill: 3 } } });
    expect(queued).toMatchObject({ status: 'pending', players_needed: 2, already_queued: false });
    const ticket = await a.rest.get('/api/v1/matchmaker/{ticket_id}', { path: { ticket_id: queued.ticket_id } });
    expect(ticket).toMatchObject({ id: queued.ticket_id, mode: 'duo', properties: { skill: 3 } });
    expect(await a.rest.delete('/api/v1/matchmaker/{ticket_id}', { path: { ticket_id: queued.ticket_id } })).toEqual({ success: true });
    const gone = await a.rest.get('/api/v1/matchmaker/{ticket_id}', { path: { ticket_id: queued.ticket_id } }).catch((e: unknown) => e);
    expect(gone).toMatchObject({ code: 'matchmaker.ticket_not_found' });
  });
});

describe('WebSocket', () => {
  it('connects with the token, pairs concurrent requests with their replies, and turns error frames into ServiceErrors', async () => {
    const a = await signedUp();
    const socket = track(a.socket());
    const statuses: string[] = [];
    socket.onStatus((c) => statuses.push(c.status));
    // A second connect while the first is under way waits for it instead of opening another socket.
    const [connected, again] = await Promise.all([socket.connect(), socket.connect()]);
    expect(connected).toEqual({ player_id: a.playerId, wire: 'json' });
    expect(again).toEqual(connected);
    expect(socket.status).toBe('connected');
    expect(statuses).toEqual(['connecting', 'connected']);

    const everything: string[] = [];
    socket.on('*', (_, frame) => everything.push(frame.type));
    // Fired together: each reply resolves its own request, whatever order they come back in.
    const [presence, list, beat, failed] = await Promise.all([
      socket.request('presence.update', { status: 'lobby' }),
      socket.request('match.list', {}),
      socket.request('session.heartbeat', {}),
      socket.request('matchmaker.add', { mode: 'nope' }).catch((e: unknown) => e),
    ]);
    expect(presence).toMatchObject({ status: 'lobby' });
    expect(list).toEqual({ matches: [] });
    expect(beat.ts).toBeTypeOf('number');
    expect(failed).toBeInstanceOf(ServiceError);
    expect(failed).toMatchObject({ code: 'matchmaker.unknown_mode', reason: 'unknown_mode', status: null });
    // Correlated replies are not also handed to listeners.
    expect(everything).toEqual([]);
    // Only client frames can be requests; a push type does not compile (and the service does not know it).
    // @ts-expect-error match.state is a push, not a client frame
    const notAFrame = await socket.request('match.state', {}).catch((e: unknown) => e);
    expect(notAFrame).toMatchObject({ code: 'unknown_type', reason: 'unknown_type' });
    socket.close();
    expect(socket.status).toBe('closed');
  });

  it('queues two players, delivers typed pushes and script broadcasts, and sends silent frames', async () => {
    const [a, b] = await Promise.all([signedUp(), signedUp()]);
    const sa = track(a.socket());
    const sb = track(b.socket());
    await Promise.all([sa.connect(), sb.connect()]);
    const matchedA = sa.once('match.matched');
    const matchedB = sb.once('match.matched');
    const queued = await sa.request('matchmaker.add', { mode: 'duo' });
    expect(queued).toMatchObject({ status: 'pending', players_needed: 2, already_queued: false });
    await sb.request('matchmaker.add', { mode: 'duo' });
    const [ma, mb] = await Promise.all([matchedA, matchedB]);
    expect(ma.match_id).toBe(mb.match_id);
    expect([...ma.players].sort()).toEqual([a.playerId, b.playerId].sort());

    const state = await sb.once('match.state');
    expect(state.tick).toBeTypeOf('number');

    // A script broadcast is an open `match.<event>` push.
    const moved = new Promise<Record<string, unknown>>((resolve) => {
      const off = sb.on('match.moved', (payload) => {
        if (payload.n === 7) {
          off();
          resolve(payload);
        }
      });
    });
    expect(sa.send('match.input', { n: 7 })).toBe(true);
    expect(await moved).toEqual({ player_id: a.playerId, n: 7 });

    // A silent frame's failure reaches the error listeners.
    const errored = sa.once('error');
    sa.send('chat.send', { channel_id: 'global:nowhere', content: 'hello' });
    expect((await errored).error.code).toBe('forbidden');
  });

  it('calls RPC methods over the socket and over REST, and surfaces rpc.error as a ServiceError', async () => {
    const a = await signedUp();
    const socket = track(a.socket());
    await socket.connect();
    const ok = await socket.request('rpc.call', { protocol: 1, method: 'game.echo', params: { word: 'hi' } });
    expect(ok).toEqual({ result: { you: a.playerId, said: 'hi' } });
    const unknown = await socket.request('rpc.call', { protocol: 1, method: 'game.nope', params: {} }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(ServiceError);
    // rpc.error carries no flat reason, only the error object.
    expect(unknown).toMatchObject({ code: 'rpc.unknown_method', reason: null });
    const rest = await a.rest.post('/api/v1/rpc/{method}', { path: { method: 'game.echo' }, body: { params: { word: 'there' } } });
    expect(rest).toEqual({ type: 'rpc.ok', payload: { result: { you: a.playerId, said: 'there' } } });
  });

  it('refreshes a refused access token once and connects', async () => {
    const a = await signedUp();
    const c = client({ access_token: 'not-a-token', refresh_token: a.rest.tokens!.refresh_token });
    const socket = track(c.socket());
    expect((await socket.connect()).player_id).toBe(a.playerId);
    expect(c.rest.tokens!.access_token).not.toBe('not-a-token');
    expect(c.playerId).toBe(a.playerId);
  });

  it('fails the first connect when no token works, and then stays closed', async () => {
    const socket = track(client({ access_token: 'bad', refresh_token: 'bad' }).socket());
    const refused = await socket.connect().catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'unauthenticated', reason: 'invalid_token' });
    expect(socket.status).toBe('closed');
  });

  it('reconnects with backoff after the network drops the socket, as the same player', async () => {
    const a = await signedUp();
    const socket = track(a.socket({ reconnect: { initialMs: 20, maxMs: 100 } }));
    await socket.connect();
    const pending = socket.request('session.heartbeat', {});
    const changes: StatusChange[] = [];
    socket.onStatus((c) => changes.push(c));
    const retrying = statusOf(socket, (c) => c.status === 'reconnecting' && (c.attempt ?? 0) >= 3);
    // Every connection is cut and new ones refused until the relay passes again.
    proxy.reset();
    const lost = await pending.catch((e: unknown) => e);
    expect(lost).toBeInstanceOf(ConnectionError);
    expect((lost as ConnectionError).kind).toBe('closed');
    await retrying;
    const back = statusOf(socket, (c) => c.status === 'connected');
    proxy.restore();
    expect(await back).toEqual({ status: 'connected', reconnected: true });
    expect(socket.playerId).toBe(a.playerId);
    expect((await socket.request('presence.update', { status: 'back' })).status).toBe('back');
    const waits = changes.filter((c) => c.status === 'reconnecting').map((c) => c.attempt);
    expect(waits.slice(0, 3)).toEqual([1, 2, 3]);
  });

  it('times a request out when no reply comes, and a missed heartbeat reconnects', async () => {
    const a = await signedUp();
    // One socket that never heartbeats (its request times out) and one that does (it notices the dead link).
    const quiet = track(a.socket({ heartbeatMs: 3_600_000, requestTimeoutMs: 300 }));
    const beating = track(a.socket({ heartbeatMs: 100, requestTimeoutMs: 300, reconnect: { initialMs: 20, maxMs: 100 } }));
    await Promise.all([quiet.connect(), beating.connect()]);
    const dropped = statusOf(beating, (c) => c.status === 'reconnecting');
    // The network goes silent: nothing is refused, nothing arrives.
    proxy.blackhole();
    const timedOut = await quiet.request('match.list', {}).catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(ConnectionError);
    expect((timedOut as ConnectionError).kind).toBe('timeout');
    // One late reply is no reason to drop a connection.
    expect(quiet.status).toBe('connected');
    expect((await dropped).reason).toBe('heartbeat_timeout');
    const back = statusOf(beating, (c) => c.status === 'connected');
    proxy.restore();
    expect((await back).reconnected).toBe(true);
    expect((await beating.request('match.list', {})).matches).toEqual([]);
    expect((await quiet.request('match.list', {})).matches).toEqual([]);
  });

  it('heartbeats keep a quiet socket open past the idle timeout that closes a silent one', async () => {
    const a = await signedUp();
    const socket = track(a.socket({ heartbeatMs: 200 }));
    await socket.connect();
    const drops: StatusChange[] = [];
    socket.onStatus((c) => drops.push(c));
    // A raw socket that says nothing after connecting is closed by the server's idle timeout (2.5 s here).
    const silent = await TestSocket.open(s);
    expect((await silent.request('session.connect', { token: a.rest.tokens!.access_token })).type).toBe('session.connected');
    expect((await silent.closed).code).toBe(1000);
    expect(drops).toEqual([]);
    expect(socket.status).toBe('connected');
    expect((await socket.request('presence.update', { status: 'still here' })).status).toBe('still here');
  });

  it('reconnects when the server closes the socket, and stops when the session was ended elsewhere', async () => {
    const a = await signedUp();
    // Never heartbeats: the server's idle timeout (2.5 s here) closes it.
    const socket = track(a.socket({ heartbeatMs: 3_600_000, reconnect: { initialMs: 20, maxMs: 100 } }));
    await socket.connect();
    const dropped = statusOf(socket, (c) => c.status === 'reconnecting');
    const back = statusOf(socket, (c) => c.status === 'connected');
    expect((await dropped).reason).toBe('idle_timeout');
    expect(await back).toEqual({ status: 'connected', reconnected: true });

    // Signing out on another client with the same tokens revokes them: the server closes the socket and a reconnect cannot succeed.
    const closed = statusOf(socket, (c) => c.status === 'closed');
    await client(a.rest.tokens).logout();
    expect(await closed).toEqual({ status: 'closed', reason: 'unauthenticated' });
    expect(a.signedIn).toBe(false);
  });

  it('the built bundle (dist/client.mjs) works in Node as the sources do', async () => {
    // Self-contained: nothing left to import, so it loads in a browser as it does in Node.
    const text = readFileSync(new URL('../dist/client.mjs', import.meta.url), 'utf8');
    expect(text).not.toMatch(/^\s*import\b|\bimport\s*\(|\brequire\s*\(|['"]node:/m);
    const built = (await import('../dist/client.mjs' as string)) as typeof import('../client');
    const c = built.createClient({ baseUrl: base, WebSocket: WebSocket as never });
    const name = username();
    await c.register({ username: name, password: PASSWORD });
    const socket = track(c.socket());
    expect((await socket.connect()).player_id).toBe(c.playerId);
    const failed = await socket.request('matchmaker.add', { mode: 'nope' }).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(built.ServiceError);
    expect((await c.rest.get('/api/v1/players/me')).username).toBe(name);
  });

  it('asks for the binary wire and hands binary world.tick frames to listeners as the payloads the text wire sends', async () => {
    const a = await signedUp();
    const binary = track(a.socket({ wire: 'binary' }));
    const text = track(a.socket());
    expect(await binary.connect()).toEqual({ player_id: a.playerId, wire: 'binary' });
    expect(await text.connect()).toEqual({ player_id: a.playerId, wire: 'json' });
    expect([binary.wire, text.wire]).toEqual(['binary', 'json']);
    const seen = { binary: [] as unknown[], text: [] as unknown[], any: [] as string[] };
    binary.on('world.tick', (payload) => seen.binary.push(payload));
    binary.on('*', (_, frame) => seen.any.push(frame.type));
    text.on('world.tick', (payload) => seen.text.push(payload));

    // One zone's keyframe, a delta naming its entities by slot, a frame that has no binary form (sent as text to
    // both), and the removals of the zone once unwatched; then a keyframe of another zone reusing slot 0.
    const frames: [unknown, WorldTickFrame | null][] = [
      [
        { zone: [1, 2], frame_seq: 3, kf: true, tick: 0, updates: [{ op: 'a', id: 'e1', x: 1.5, hp: 10, name: 'ann', alive: true }, { op: 'a', id: 'e2', x: 2 }] },
        { kind: 'sequenced', zone: [1, 2], frame_seq: 3, kf: true, tick: 0, records: [{ op: 'add', slot: 0, gen: 0, id: 'e1', fields: { x: 1.5, hp: 10, name: 'ann', alive: true } }, { op: 'add', slot: 1, gen: 0, id: 'e2', fields: { x: 2 } }] },
      ],
      [
        { zone: [1, 2], frame_seq: 4, kf: false, tick: 30, updates: [{ op: 'u', id: 'e1', x: 2.5, target: null }, { op: 'r', id: 'e2' }] },
        { kind: 'sequenced', zone: [1, 2], frame_seq: 4, kf: false, tick: 30, records: [{ op: 'update', slot: 0, gen: 0, fields: { x: 2.5, target: null } }, { op: 'remove', slot: 1, gen: 0 }] },
      ],
      [{ zone: [1, 2], frame_seq: 5, kf: false, tick: 33, updates: [{ op: 'u', id: 'e1', bag: { gold: 1 } }] }, null],
      [{ zone: [1, 2], tick: 0, updates: [{ op: 'r', id: 'e1' }] }, { kind: 'ungated', zone: [1, 2], frame_seq: 0, kf: false, tick: 0, records: [{ op: 'remove', slot: 0, gen: 0 }] }],
      [
        { zone: [1, 3], frame_seq: 9, kf: true, tick: 0, updates: [{ op: 'a', id: 'e9', x: -4 }] },
        { kind: 'sequenced', zone: [1, 3], frame_seq: 9, kf: true, tick: 0, records: [{ op: 'add', slot: 0, gen: 3, id: 'e9', fields: { x: -4 } }] },
      ],
    ];
    const sessions = (s.ctx.live as LiveHost).gateway.sessions;
    for (const [payload, binaryFrame] of frames) {
      const frameText = JSON.stringify({ type: 'world.tick', payload });
      const bytes = binaryFrame && encodeWorldTick(binaryFrame);
      if (binaryFrame) expect(bytes).not.toBeNull();
      sessions.pushShared(a.playerId!, new SharedFrame(frameText, bytes ?? null), sessions.metrics.frameOutOf(frameText));
    }
    for (let i = 0; i < 100 && (seen.binary.length < frames.length || seen.text.length < frames.length); i++) await new Promise((r) => setTimeout(r, 10));
    expect(seen.text).toEqual(frames.map(([payload]) => payload));
    expect(seen.binary).toEqual(seen.text);
    expect(seen.any).toEqual(frames.map(() => 'world.tick'));
  });

  it('stays on text when the service does not grant the binary wire', async () => {
    const own = await startTestServer({ binary_wire: false });
    const c = createClient({ baseUrl: own.url, WebSocket: WebSocket as never });
    await c.register({ username: username(), password: PASSWORD });
    const socket = track(c.socket({ wire: 'binary' }));
    expect(await socket.connect()).toEqual({ player_id: c.playerId, wire: 'json' });
    expect(socket.wire).toBe('json');
    socket.close();
    await own.close();
  });

  it('close() stops for good: pending requests reject and no reconnect follows', async () => {
    const a = await signedUp();
    const socket = track(a.socket({ reconnect: { initialMs: 10 } }));
    await socket.connect();
    const pending = socket.request('match.list', {});
    socket.close();
    expect(await pending.catch((e: unknown) => e)).toMatchObject({ name: 'ConnectionError', kind: 'closed' });
    expect(socket.status).toBe('closed');
    expect(await socket.request('match.list', {}).catch((e: unknown) => e)).toMatchObject({ kind: 'closed' });
    expect(socket.send('match.input', {})).toBe(false);
  });
});
