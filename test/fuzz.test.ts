import fc from 'fast-check';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allRoutes } from '../handlers/routes';
import { ERROR_STATUS, type ErrorCode } from '../runtime/contracts/errors';
import type { LiveHost } from '../host/realtime/live';
import { registerPlayer, type TestPlayer } from './support/accounts';
import { startTestServer, type TestServer } from './support/server';
import { TestSocket, type Frame } from './support/ws-client';

const isErrorCode = (value: string): value is ErrorCode => Object.prototype.hasOwnProperty.call(ERROR_STATUS, value);

/**
 * Property-based fuzz of the whole client surface through the production
 * wiring, serving the demo game (so matches, scripts and their RPCs run):
 * every route of the route table and every routed frame type, with
 * hostile strings, numbers, nesting and encodings. The properties: no 5xx,
 * no socket answer whose code is a 5xx one, every frame answered, and the
 * process still serving afterwards. Seeded, so a failure replays; bounded,
 * so it stays a few seconds.
 */
// FUZZ_SEED and FUZZ_RUNS (a multiplier) explore further by hand; `npm test` runs the fixed seed.
const SEED = Number(process.env.FUZZ_SEED ?? 20261124);
const REST_RUNS = 400 * Number(process.env.FUZZ_RUNS ?? 1);
const FRAME_RUNS = 300 * Number(process.env.FUZZ_RUNS ?? 1);

let s: TestServer;
let players: TestPlayer[];
let groupId: string;
beforeAll(async () => {
  s = await startTestServer({
    rate_limits: { ws_connect: { limit: 1000, window: 1000 }, login_failures: { limit: 1_000_000, window: 1000 } },
    chat_send_rate: { limit: 1000, window: 1000 },
    // An operator entry replaces the script's mode configuration, so it restates arena's.
    game_modes: { arena: { match_size: 2, max_players: 2, chat_channels: ['lobby'] } },
  }, { gameDir: path.resolve(__dirname, '../examples/demo-game') });
  players = [await registerPlayer(s), await registerPlayer(s), await registerPlayer(s)];
  const g = await s.call('POST', '/api/v1/groups', { token: players[0]!.access_token, body: { name: 'Fuzzers', open: true } });
  expect(g.status).toBe(200);
  groupId = g.body.id;
});
afterAll(async () => {
  await s?.close();
});

// ---- values -------------------------------------------------------------------------------

const HOSTILE_TEXT = [
  '\u0000', 'a\u0000b', '\ud800', '\udfff', 'x\udc00y', '\ud83d', '\uffff', '\ufeff', '🎮', 'é', 'ß\u0301', '',
  ' ', '\t\n\r', "'; drop table players; --", '../../etc/passwd', '%00', '%E0%A4%A', '\\u0000', 'null', 'true', '-1',
  'global:lobby', 'room:', 'dm:a:b', 'arena', 'lobby', 'game.roll', 'game.time', 'pending', 'accepted', 'blocked', 'admin', 'owner', 'member',
];

/** Text of every kind, including the sizes limits exist for. */
const text = (): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...HOSTILE_TEXT) },
    { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
    { weight: 1, arbitrary: fc.constantFrom(2001, 4097, 70_000, 300_000).map((n) => 'x'.repeat(n)) },
    { weight: 2, arbitrary: realId() },
  );

/** Real ids (known once the players exist), so some requests get past the not-found checks into the code behind them. */
function realId(): fc.Arbitrary<string> {
  return fc.nat(5).map((i) => [...players.map((p) => p.player_id), groupId, '00000000-0000-0000-0000-000000000000', '0190c1f2-aaaa-7000-8000-000000000001'][i]!);
}

/**
 * JSON text JSON.stringify cannot produce (1e999, nesting deeper than its stack) is spliced in
 * by `serialise` where a placeholder string stands.
 */
const fragments: string[] = [];
function raw(fragment: string): string {
  fragments.push(fragment);
  return `\u0001raw:${fragments.length - 1}\u0001`;
}
function serialise(value: unknown): string {
  return JSON.stringify(value).replace(/"\\u0001raw:(\d+)\\u0001"/g, (_, i: string) => fragments[Number(i)]!);
}

const number = (): fc.Arbitrary<unknown> =>
  fc.oneof(
    fc.constantFrom(0, -0, 1, -1, 0.5, -2147483649, 2 ** 31, 2 ** 53 + 2, Number.MAX_VALUE, -Number.MAX_VALUE, 5e-324),
    fc.constantFrom('1e999', '-1e999', '1e-999', '123456789012345678901234567890', '-0.0').map(raw),
    fc.double(),
    fc.integer(),
  );

const FIELDS = [
  'username', 'password', 'display_name', 'avatar_url', 'metadata', 'name', 'description', 'max_members', 'open', 'content',
  'recipient_id', 'status', 'role', 'player_id', 'friend_id', 'params', 'mode', 'properties', 'refresh_token', 'token',
  'provider', 'device_id', 'device_secret', 'channel_id', 'match_id', 'ticket_id', 'world_id', 'protocol', 'method',
  'input', 'join_ctx', 'has_capacity', 'joinable', 'limit', 'before', 'confirm', 'id', 'read', 'x', 'y', 'zone', 'seq',
];
function fieldName(): fc.Arbitrary<string> {
  return fc.constantFrom(...FIELDS);
}

/** Arbitrarily nested JSON, leaves drawn from the hostile pools. */
const json = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    text(),
    number(),
    fc.constantFrom(null, true, false),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.oneof(text(), fieldName()), tie('value'), { maxKeys: 4 }),
  ),
})).value;

/** The same value under many levels of arrays or objects. */
const deep = fc.tuple(fc.constantFrom(63, 64, 65, 1000, 100_000), fc.boolean(), json).map(([depth, arrays, leaf]) =>
  raw(`${(arrays ? '[' : '{"a":').repeat(depth)}${serialise(leaf)}${(arrays ? ']' : '}').repeat(depth)}`),
);

/**
 * Values that pass the usual checks, so that a hostile value beside them gets past those checks
 * to the code behind (a display name is only stored once username and password are valid).
 */
let usernames = 0;
function plausible(): Record<string, unknown> {
  const [, b, c] = players;
  return {
    username: `fz_${SEED.toString(36)}_${++usernames}`, password: 'correct horse battery', display_name: 'Fuzzy',
    avatar_url: 'https://example.com/a.png', metadata: { level: 1, tags: ['a'] }, name: 'Fuzz group', description: 'about',
    max_members: 10, open: true, content: 'hello', recipient_id: b!.player_id, status: 'pending', role: 'member',
    player_id: c!.player_id, friend_id: b!.player_id, params: { sides: 6 }, mode: 'lobby', properties: {}, provider: 'password',
    channel_id: 'global:lobby', match_id: '0190c1f2-aaaa-7000-8000-000000000001',
    protocol: 1, method: 'game.roll', input: { n: 1 }, join_ctx: {}, has_capacity: true, joinable: true, limit: 10,
  };
}

/** A plausible document with some keys dropped and one or two set to hostile values. */
const hostileDocument = fc
  .record({
    drop: fc.array(fieldName(), { maxLength: 3 }),
    hostile: fc.dictionary(fc.oneof({ weight: 5, arbitrary: fieldName() }, { weight: 1, arbitrary: text() }), fc.oneof({ weight: 3, arbitrary: text() }, { weight: 2, arbitrary: json }, { weight: 1, arbitrary: deep }), { minKeys: 1, maxKeys: 6 }),
  })
  .map(({ drop, hostile }) => {
    const doc = plausible();
    for (const key of drop) delete doc[key];
    return { ...doc, ...hostile };
  });

const bodyValue = fc.oneof({ weight: 6, arbitrary: hostileDocument }, { weight: 1, arbitrary: json }, { weight: 1, arbitrary: deep });

/** Bytes that are not the JSON they claim to be: invalid UTF-8, truncation, a BOM, deep brackets. */
const rawBody = fc.oneof(
  fc.constantFrom(
    Buffer.from([0xff, 0xfe, 0xfd]),
    Buffer.from('{"name":"\xc0\x80"}', 'latin1'),
    Buffer.from('{"name":"\xed\xa0\x80"}', 'latin1'),
    Buffer.from('{"content":"\xf4\x90\x80\x80","recipient_id":"x"}', 'latin1'),
    Buffer.from('\ufeff{"username":"a"}'),
    Buffer.from('{"username":'),
    Buffer.from('['.repeat(400_000) + ']'.repeat(400_000)),
    Buffer.from('{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000)),
    Buffer.from('{"name":"a","name":"\\u0000"}'),
  ),
  fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
);

// ---- REST ---------------------------------------------------------------------------------

/** A path segment: a real id, hostile text percent-encoded, or a malformed escape sent as is. */
const segment = fc.oneof(
  { weight: 3, arbitrary: realId() },
  { weight: 3, arbitrary: text().filter((t) => t.length < 5000).map(percentEncoded) },
  { weight: 2, arbitrary: fc.constantFrom('%', '%E0%A4%A', '%ZZ', '%00', '%ED%A0%80', '%C0%80', '%FF', 'a%2Fb', '..', '%2e%2e', 'me', 'game.roll', 'game.time', `room%3A${'0'.repeat(8)}`) },
);

/** Percent-encoded UTF-8; a lone surrogate has no UTF-8, so it goes as the escape of its WTF-8 bytes. */
function percentEncoded(t: string): string {
  try {
    return encodeURIComponent(t);
  } catch {
    return '%ED%A0%80';
  }
}

const QUERY_KEYS = ['limit', 'before', 'status', 'mode', 'username', 'provider', 'read', 'has_capacity', 'joinable'];
const queryValue = fc.oneof(
  segment,
  fc.constantFrom('%00', '%', '%E0%A4%A', '%ED%A0%80', 'true', 'false', '-1', '1e999', 'NaN', '9007199254740993', '0x10'),
);
const query = fc.array(fc.tuple(fc.oneof(fc.constantFrom(...QUERY_KEYS), fc.constantFrom('%00', '%E0', 'a[b]')), queryValue), { maxLength: 4 });

const ROUTES = allRoutes();
/**
 * Before the random cases, each route and frame type gets the cases the fuzz exists for, so
 * its verdict on them does not depend on the seed: one malformed escape in every path
 * parameter and query value, and each common text field in turn set to NUL or a lone
 * surrogate beside otherwise plausible values.
 */
type Generated<A> = A extends fc.Arbitrary<infer T> ? T : never;
const MALFORMED_ESCAPES = ['%E0%A4%A', '%00'];
const TEXT_FIELDS = ['username', 'display_name', 'name', 'description', 'content', 'status', 'mode', 'channel_id', 'metadata'];
function hostileFields(): Record<string, unknown>[] {
  return TEXT_FIELDS.flatMap((field) =>
    ['x\u0000', 'x\ud800'].map((bad) => ({ ...plausible(), [field]: field === 'metadata' ? { [bad]: bad } : bad })),
  );
}
function restExamples(): [Generated<typeof restCase>][] {
  return ROUTES.flatMap((r, route) => [
    ...MALFORMED_ESCAPES.map((e) => ({ route, params: [e, e, e, e], query: QUERY_KEYS.map((k): [string, string] => [k, e]), body: { json: plausible() }, as: 0 })),
    ...(r.method === 'GET' ? [] : hostileFields().map((json) => ({ route, params: realParams(r.path), query: [], body: { json }, as: 0 }))),
  ]).map((c) => [c]);
}
/** Path parameters that name something real for the caller (players[0]), so a route gets past its lookups. */
function realParams(path: string): string[] {
  return [...path.matchAll(/:(\w+)/g)].map(([, name]) => {
    if (name === 'id') return path.startsWith('/api/v1/players') ? players[0]!.player_id : groupId;
    if (name === 'method') return 'game.roll';
    return players[1]!.player_id;
  }).concat(['', '', '', '']).slice(0, 4);
}

const restCase = fc.record({
  route: fc.integer({ min: 0, max: ROUTES.length - 1 }),
  params: fc.array(segment, { minLength: 4, maxLength: 4 }),
  query,
  body: fc.oneof({ weight: 5, arbitrary: bodyValue.map((v) => ({ json: v })) }, { weight: 2, arbitrary: rawBody.map((raw) => ({ raw })) }, { weight: 1, arbitrary: fc.constant(null) }),
  as: fc.integer({ min: -1, max: 2 }),
});

describe('fuzz', () => {
  it('every REST route answers hostile requests without a 5xx', { timeout: 120_000 }, async () => {
    const statuses = new Map<number, number>();
    const examples = restExamples();
    await fc.assert(
      fc.asyncProperty(restCase, async (c) => {
        const route = ROUTES[c.route]!;
        let i = 0;
        const path = route.path.replace(/:\w+/g, () => c.params[i++]!);
        const qs = c.query.map(([k, v]) => `${k}=${v}`).join('&');
        const url = `${s.url}${path}${qs ? `?${qs}` : ''}`;
        // Logging out revokes the bearer: it gets a player of its own.
        const token = c.as < 0 ? null : route.path === '/api/v1/auth/logout' ? (await registerPlayer(s)).access_token : players[c.as]!.access_token;
        const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
        let body: Buffer | undefined;
        if (c.body && route.method !== 'GET') {
          body = 'raw' in c.body ? c.body.raw : Buffer.from(serialise(c.body.json));
          headers['content-type'] = 'application/json';
        }
        const res = await fetch(url, { method: route.method, headers, ...(body ? { body: new Uint8Array(body) } : {}) });
        const answer = await res.text();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status >= 500) throw new Error(`${route.method} ${url.slice(0, 300)} answered ${res.status}: ${answer.slice(0, 300)}`);
        // Every answer is JSON; an error carries a code from the closed set.
        const parsed = JSON.parse(answer);
        if (res.status >= 400) expect(isErrorCode(parsed.error.code)).toBe(true);
      }),
      // fast-check counts examples within numRuns.
      { seed: SEED, numRuns: examples.length + REST_RUNS, endOnFailure: true, examples },
    );
    expect((await s.call('GET', '/api/v1/health')).status).toBe(200);
    // Enough requests get past the front door for the fuzz to prove something.
    expect(statuses.get(200) ?? 0, JSON.stringify([...statuses])).toBeGreaterThan(REST_RUNS / 20);
  });

  it('a malformed Host header or request target is answered like any other request', async () => {
    // fetch cannot send these, so they go over a raw socket.
    const rawRequest = (target: string, host: string) =>
      new Promise<string>((resolve) => {
        const c = net.connect(s.port, '127.0.0.1', () => c.write(`GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`));
        let out = '';
        c.on('data', (d) => (out += d));
        c.on('close', () => resolve(out.split('\r\n')[0]!));
        c.on('error', () => resolve(out.split('\r\n')[0]!));
      });
    const HOSTS = ['[::1', 'a b', '%zz', 'x:99999', 'a/b', '', 'a\\b', 'a@b', '[', ':', 'exämple.com'];
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...HOSTS), fc.constantFrom('/api/v1/health', '/api/v1/matches?status=%00', '//api/v1/health', '*', 'http://evil.example/api/v1/health', '/api/v1/players/%E0%A4%A'), async (host, target) => {
        const status = Number((await rawRequest(target, host)).split(' ')[1]);
        if (!(status >= 200 && status < 500)) throw new Error(`GET ${target} with Host ${JSON.stringify(host)} answered ${status}`);
      }),
      { seed: SEED, numRuns: 40 },
    );
    // The path is read from the target alone, whatever the Host says.
    for (const host of ['a/b', '', '[::1']) expect(await rawRequest('/api/v1/health', host)).toBe('HTTP/1.1 200 OK');
  });

  it('every frame type answers hostile payloads without a 5xx code, and the socket stays in service', { timeout: 120_000 }, async () => {
    const types = (s.ctx.live as LiveHost).gateway.frameTypes();
    expect(types).toEqual(expect.arrayContaining(['session.connect', 'chat.send', 'dm.send', 'rpc.call', 'match.input']));
    // Three sockets a player: each socket may send 60 frames a second.
    const sockets = await Promise.all([...players, ...players, ...players].map(async (p) => {
      const socket = await TestSocket.open(s);
      expect((await socket.request('session.connect', { token: p.access_token })).type).toBe('session.connected');
      return { socket, token: p.access_token, sends: [] as number[] };
    }));
    let n = 0;
    const frameCase = fc.record({
      type: fc.oneof({ weight: 9, arbitrary: fc.constantFrom(...types) }, { weight: 1, arbitrary: text() }),
      payload: fc.oneof({ weight: 6, arbitrary: hostileDocument }, { weight: 1, arbitrary: json }, { weight: 1, arbitrary: fc.constant(undefined) }),
      cid: fc.oneof(fc.constant(undefined), fc.string({ maxLength: 8 }), number(), json),
      raw: fc.option(fc.constantFrom('{', '[1]', '"x"', '{"type":5}', '{"type":"chat.send","payload":{"channel_id":"global:lobby","content":"\\ud800"}}', 'x'.repeat(70_000)), { freq: 8 }),
    });
    const examples = types.flatMap((type) => hostileFields().map((payload): [Generated<typeof frameCase>] => [{ type, payload, cid: 'x', raw: null }]));
    await fc.assert(
      fc.asyncProperty(frameCase, async (c) => {
        const conn = sockets[n++ % sockets.length]!;
        await pace(conn);
        const text = c.raw ?? serialise({ type: c.type, ...(c.cid === undefined ? {} : { cid: c.cid }), ...(c.payload === undefined ? {} : { payload: c.payload }) });
        conn.socket.sendRaw(text);
        if (Buffer.byteLength(text) > 1024 * 1024) {
          // Past the hard cap the socket library closes the connection unread (1009) by design.
          expect((await conn.socket.closed).code).toBe(1009);
          conn.socket = await TestSocket.open(s);
        }
        // The socket still answers, signed in again in case the frame changed its identity. The cid is
        // longer than any the fuzz sends, so no fuzzed frame's reply can pass for this one's.
        const cid = `alive-check-${n}`;
        conn.socket.send({ type: 'session.connect', cid, payload: { token: conn.token } });
        const alive = await conn.socket.next((f) => f.cid === cid);
        if (alive.type !== 'session.connected') throw new Error(`socket stopped answering after ${text.slice(0, 300)}: ${JSON.stringify(alive)}`);
        const failures = conn.socket.frames.splice(0).filter(serverFault);
        if (failures.length > 0) throw new Error(`${text.slice(0, 300)} answered ${JSON.stringify(failures).slice(0, 500)}`);
      }),
      { seed: SEED, numRuns: examples.length + FRAME_RUNS, endOnFailure: true, examples },
    );
    for (const c of sockets) c.socket.close();
  });

  it('a text frame that is not UTF-8 closes that socket (1007) and nothing else', async () => {
    const socket = await TestSocket.open(s);
    socket.sendRaw(Buffer.from([0x7b, 0xff, 0x7d]));
    expect((await socket.closed).code).toBe(1007);
    const next = await TestSocket.open(s);
    expect((await next.request('session.heartbeat')).type).toBe('session.heartbeat');
    next.close();
  });
});

/** An answer carrying a code whose status is a server fault. */
function serverFault(f: Frame): boolean {
  const code = f.type === 'error' || f.type === 'rpc.error' ? f.payload?.error?.code : undefined;
  return typeof code === 'string' && (!isErrorCode(code) || ERROR_STATUS[code] >= 500);
}

/**
 * Two frames a case, at most 56 in any 1.1 s, so no fixed one-second window of the
 * server's (60 frames) is ever exceeded and every frame is really handled.
 */
async function pace(conn: { sends: number[] }): Promise<void> {
  const WINDOW = 1100;
  while (conn.sends.length >= 28 && Date.now() - conn.sends[0]! < WINDOW) {
    await new Promise((r) => setTimeout(r, WINDOW - (Date.now() - conn.sends[0]!) + 1));
  }
  if (conn.sends.length >= 28) conn.sends.shift();
  conn.sends.push(Date.now());
}
