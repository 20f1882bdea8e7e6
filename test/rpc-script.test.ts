import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gameDir, matchScript } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, type Frame, type TestSocket } from './support/ws-client';

/** The game's RPC script: methods `game.<name>` for every function in its `rpc` table. */
const RPC = (version: string) => `
local util = require("util")
calls = calls or 0
rpc = {}
function rpc.echo(player_id, params)
  calls = calls + 1
  return { caller = player_id, params = params, version = "${version}", calls = calls, doubled = util.double(params.n or 0) }
end
function rpc.nothing(player_id, params) end
function rpc.poor(player_id, params) return nil, "not_enough_gold" end
function rpc.no(player_id, params) return false end
function rpc.broken(player_id, params) error("the script broke") end
function rpc.forever(player_id, params) while true do end end
function rpc.list(player_id, params) return { 1, 2, 3 } end
function rpc.scalar(player_id, params) return 42 end
function rpc.whisper(player_id, params)
  game.send(player_id, { text = params.text })
  return { sent = true, has_broadcast = game.broadcast ~= nil, has_match = game.match ~= nil }
end
rpc.not_a_function = 7
function rpc.gift(player_id, params)
  return { one = game.notify(player_id, "gift", "A gift", { gold = 5 }),
           many = game.notify_many({ player_id, "not-a-player-id", 5 }, "gift", "Another", "not a table"),
           bad = game.notify(player_id, 7, "x"),
           too_long = game.notify(player_id, string.rep("t", 65), "x") }
end
`;

const game = gameDir({
  'match.lua': matchScript(
    'match_size = 2\nmin_players = 1\nquick_play = true',
    'function join(player_id, state) game.notify(player_id, "welcome", "Welcome to " .. state.match_id) return state end',
  ),
  'util.lua': 'return { double = function(n) return n * 2 end }',
  'rpc.lua': RPC('v1'),
});

let s: TestServer;
let sock: TestSocket;
let playerId: string;
let token: string;

beforeAll(async () => {
  s = await startTestServer({}, { gameDir: game.dir });
  ({ socket: sock, playerId, token } = await connectPlayer(s));
});
afterAll(async () => {
  sock.close();
  await s.close();
  game.remove();
});

function call(method: string, params: Record<string, unknown> = {}): Promise<Frame> {
  return sock.request('rpc.call', { protocol: 1, method, params });
}

describe('game script RPC', () => {
  it('serves game.<name> from rpc.lua with the caller, the params and required modules', async () => {
    const f = await call('game.echo', { n: 21, tags: ['a', 'b'], nested: { ok: true } });
    expect(f.type).toBe('rpc.ok');
    expect(f.payload.result).toMatchObject({ caller: playerId, params: { n: 21, tags: ['a', 'b'], nested: { ok: true } }, version: 'v1', doubled: 42 });
  });

  it('keeps the script globals between calls (one VM for every caller)', async () => {
    const a = (await call('game.echo')).payload.result.calls;
    const other = await connectPlayer(s, 'q');
    const b = (await other.socket.request('rpc.call', { protocol: 1, method: 'game.echo', params: {} })).payload.result;
    expect(b.calls).toBe(a + 1);
    expect(b.caller).toBe(other.playerId);
    other.socket.close();
  });

  it('answers a function that returns nothing with an empty result', async () => {
    expect(await call('game.nothing')).toMatchObject({ type: 'rpc.ok', payload: { result: {} } });
  });

  it('answers nil/false [, reason] with rpc.error validation_failed, the reason in details', async () => {
    const poor = await call('game.poor');
    expect(poor.type).toBe('rpc.error');
    expect(poor.payload.error).toMatchObject({ code: 'validation_failed', details: { reason: 'not_enough_gold' } });
    const no = await call('game.no');
    expect(no.payload.error).toMatchObject({ code: 'validation_failed', details: {} });
  });

  it('turns a failing function into internal, logs it, and keeps serving', async () => {
    for (const method of ['game.broken', 'game.forever', 'game.list', 'game.scalar']) {
      const f = await call(method);
      expect(f.type, method).toBe('rpc.error');
      expect(f.payload.error.code, method).toBe('internal');
    }
    const failures = s.logs.filter((l) => l.event === 'lua_callback_failed' && l.script === 'rpc.lua');
    expect(failures.map((l) => l.callback)).toEqual(expect.arrayContaining(['rpc.broken', 'rpc.forever', 'rpc.list', 'rpc.scalar']));
    expect(failures.find((l) => l.callback === 'rpc.forever')?.reason_class).toMatch(/^(timeout|instructions_exhausted)$/);
    expect((await call('game.echo', { n: 1 })).type).toBe('rpc.ok');
  });

  it('answers names the script does not serve with rpc.unknown_method', async () => {
    for (const method of ['game.missing', 'game.not_a_function', 'game.a.b', 'game.']) {
      const f = await call(method);
      expect(f.payload.error?.code, method).toBe('rpc.unknown_method');
    }
  });

  it('gives the script game.send but no instance functions', async () => {
    const reply = call('game.whisper', { text: 'psst' });
    const message = await sock.next((f) => f.type === 'module.message');
    expect(message.payload).toEqual({ module: 'lua', message: { text: 'psst' } });
    expect((await reply).payload.result).toEqual({ sent: true, has_broadcast: false, has_match: false });
  });

  it('sends game.send as the deprecated game.message first, then module.message, with the same payload (ws_legacy_game_frames on by default)', async () => {
    const twin = (f: Frame) => (f.type === 'game.message' || f.type === 'module.message') && f.payload.message?.text === 'twice';
    const reply = call('game.whisper', { text: 'twice' });
    const first = await sock.next(twin);
    const second = await sock.next(twin);
    expect([first.type, second.type]).toEqual(['game.message', 'module.message']);
    expect(first.payload).toEqual({ module: 'lua', message: { text: 'twice' } });
    expect(second.payload).toEqual(first.payload);
    await reply;
  });

  it('sends module.message alone with ws_legacy_game_frames off', async () => {
    const quiet = await startTestServer({ ws_legacy_game_frames: false }, { gameDir: game.dir });
    try {
      const { socket } = await connectPlayer(quiet);
      const reply = socket.request('rpc.call', { protocol: 1, method: 'game.whisper', params: { text: 'once' } });
      expect((await socket.next('module.message')).payload).toEqual({ module: 'lua', message: { text: 'once' } });
      await reply;
      expect(await socket.quiet('game.message', 300)).toBe(true);
      socket.close();
    } finally {
      await quiet.close();
    }
  });

  it('gives game VMs game.notify and game.notify_many, stored and pushed live', async () => {
    const reply = call('game.gift');
    const pushed = await sock.next((f) => f.type === 'notification.new' && f.payload.subject === 'A gift');
    const result = (await reply).payload.result;
    expect(result.one.ok).toMatchObject({ player_id: playerId, type: 'gift', subject: 'A gift', content: { gold: 5 }, read: false });
    expect(result.one.ok.id).toBeUndefined();
    expect(result.many).toEqual({ ok: [playerId] });
    expect(result.bad.error).toContain('game.notify(player_id, type, subject');
    expect(result.too_long).toEqual({ error: 'invalid_notification' });
    expect(pushed.payload).toMatchObject({ type: 'gift', content: { gold: 5 } });
    await sock.next((f) => f.type === 'notification.new' && f.payload.subject === 'Another');
    const listed = await s.call('GET', '/api/v1/notifications', { token });
    const gifts = listed.body.notifications.filter((n: { type: string }) => n.type === 'gift');
    expect(gifts.map((n: { subject: string; content: unknown }) => [n.subject, n.content])).toEqual(
      expect.arrayContaining([
        ['A gift', { gold: 5 }],
        ['Another', {}],
      ]),
    );
    expect(gifts).toHaveLength(2);
  });

  it('gives match scripts the same bindings', async () => {
    const other = await connectPlayer(s, 'm');
    const joined = await other.socket.request('match.find_or_create', { mode: 'default' });
    expect(joined.type).toBe('match.joined');
    const welcome = await other.socket.next((f) => f.type === 'notification.new' && f.payload.type === 'welcome');
    expect(welcome.payload.subject).toBe(`Welcome to ${joined.payload.match_id}`);
    other.socket.close();
  });

  it('is the same dispatcher over REST', async () => {
    const ok = await s.call('POST', '/api/v1/rpc/game.echo', { token, body: { params: { n: 2 } } });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ type: 'rpc.ok', payload: { result: { doubled: 4, caller: playerId } } });
    const poor = await s.call('POST', '/api/v1/rpc/game.poor', { token, body: { params: {} } });
    expect(poor.status).toBe(422);
    expect(poor.body).toMatchObject({ type: 'rpc.error', error: { code: 'validation_failed', details: { reason: 'not_enough_gold' } } });
  });

  it('picks up an edited rpc.lua before the next call and keeps the old code when the edit is broken', async () => {
    game.write('rpc.lua', RPC('v2') + '\nfunction rpc.added(player_id, params) return { added = true } end\n');
    const reloaded = await eventually(async () => {
      const f = await call('game.echo');
      return f.payload.result?.version === 'v2' ? f : null;
    });
    // The body re-ran in the same VM: `calls = calls or 0` kept the count.
    expect(reloaded.payload.result.calls).toBeGreaterThan(1);
    expect((await call('game.added')).payload.result).toEqual({ added: true });

    game.write('rpc.lua', 'rpc = {} this is not lua');
    await eventually(async () => (s.logs.some((l) => l.event === 'lua_callback_failed' && l.callback === 'reload') ? true : (await call('game.echo'), null)));
    expect((await call('game.echo')).payload.result.version).toBe('v2');
  });
});

async function eventually<T>(probe: () => Promise<T | null>, ms = 8000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== null) return v;
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('the demo game', () => {
  it('ships rpc.lua with game.roll and game.time', async () => {
    const demo = await startTestServer({}, { gameDir: new URL('../examples/demo-game', import.meta.url).pathname });
    try {
      const p = await connectPlayer(demo);
      const roll = await p.socket.request('rpc.call', { protocol: 1, method: 'game.roll', params: { sides: 20 } });
      expect(roll.payload.result.sides).toBe(20);
      expect(roll.payload.result.value).toBeGreaterThanOrEqual(1);
      expect(roll.payload.result.value).toBeLessThanOrEqual(20);
      const refused = await p.socket.request('rpc.call', { protocol: 1, method: 'game.roll', params: { sides: 1 } });
      expect(refused.payload.error).toMatchObject({ code: 'validation_failed', details: { reason: 'sides_out_of_range' } });
      const time = await p.socket.request('rpc.call', { protocol: 1, method: 'game.time', params: {} });
      expect(Math.abs(time.payload.result.unix - Date.now() / 1000)).toBeLessThan(5);
      p.socket.close();
    } finally {
      await demo.close();
    }
  });
});
