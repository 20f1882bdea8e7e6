import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gameDir, matchScript } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, registerPlayer } from './support/ws-client';

/**
 * `game.storage.*` from real Lua scripts (rpc.lua methods called over REST,
 * a match script's `join`): the owner-less namespace, player rows shared
 * with REST, the 256 KB bound, envelopes and reasons, and the namespace's
 * absence when the operator switches storage off.
 */

const RPC = `
rpc = {}
function rpc.get(pid, p) return { r = game.storage.get(p.c, p.k) } end
function rpc.set(pid, p) return { r = game.storage.set(p.c, p.k, p.v) } end
function rpc.player_get(pid, p) return { r = game.storage.player_get(p.player or pid, p.c, p.k) } end
function rpc.player_set(pid, p) return { r = game.storage.player_set(p.player or pid, p.c, p.k, p.v) } end
function rpc.set_sized(pid, p) return { r = game.storage.set(p.c, p.k, string.rep("a", p.n)) } end
function rpc.shapes(pid, p)
  game.storage.set("shapes", "seq", { 1, 2, 3 })
  game.storage.set("shapes", "empty", {})
  game.storage.set("shapes", "nested", { a = { b = { "x" } }, n = 1.5, t = true })
  game.storage.set("shapes", "text", "plain")
  return {
    seq = game.storage.get("shapes", "seq"),
    empty = game.storage.get("shapes", "empty"),
    nested = game.storage.get("shapes", "nested"),
    text = game.storage.get("shapes", "text"),
  }
end
function rpc.misuse(pid, p)
  return {
    no_args = game.storage.get(),
    key_number = game.storage.get("c", 5),
    empty_collection = game.storage.set("", "k", 1),
    long_key = game.storage.set("c", string.rep("k", 256), 1),
    player_table = game.storage.player_get({}, "c", "k"),
    set_no_key = game.storage.set("c"),
    player_set_number = game.storage.player_set(7, "c", "k", 1),
  }
end
`;

const game = gameDir({
  'match.lua': matchScript(
    'match_size = 2\nmin_players = 1\nquick_play = true',
    `function join(player_id, state)
  local seen = game.storage.player_get(player_id, "progress", "visits")
  local visits = (seen.ok and seen.ok.n or 0) + 1
  state.saved = game.storage.player_set(player_id, "progress", "visits", { n = visits })
  return state
end
function get_state(player_id, state) return { saved = state.saved } end`,
  ),
  'rpc.lua': RPC,
});

let s: TestServer;

beforeAll(async () => {
  s = await startTestServer({ match_workers: 1, rate_limits: { ws_connect: { limit: 1000, window: 1000 } } }, { gameDir: game.dir });
});
afterAll(async () => {
  await s?.close();
  game.remove();
});

const rpcOn = async (server: TestServer, token: string, method: string, params: Record<string, unknown> = {}) => {
  const res = await server.call('POST', `/api/v1/rpc/game.${method}`, { token, body: { params } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.payload.result.r ?? res.body.payload.result;
};
const rpc = (token: string, method: string, params: Record<string, unknown> = {}) => rpcOn(s, token, method, params);
const unique = (name: string) => `${name}_${Math.random().toString(36).slice(2, 8)}`;

describe('the owner-less namespace (get, set)', () => {
  it('creates at version 1, counts writes, and reads the value back; a missing row is not_found', async () => {
    const p = await registerPlayer(s);
    const c = unique('world');
    expect(await rpc(p.token, 'get', { c, k: 'motd' })).toEqual({ error: 'not_found' });
    const first = await rpc(p.token, 'set', { c, k: 'motd', v: { text: 'hello' } });
    // Rows reach Lua without id and timestamps; the shared row has no owner (nil).
    expect(first).toEqual({ ok: { collection: c, key: 'motd', value: { text: 'hello' }, version: 1, read_perm: 'owner', write_perm: 'owner' } });
    expect((await rpc(p.token, 'set', { c, k: 'motd', v: { text: 'bye' } })).ok.version).toBe(2);
    expect(await rpc(p.token, 'get', { c, k: 'motd' })).toEqual({ ok: { text: 'bye' } });
    const rows = await s.ctx.db.selectFrom('storage').selectAll().where('collection', '=', c).execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ player_id: null, version: 2 });
  });

  it('is distinct from player rows of the same collection and key, and unreachable over REST', async () => {
    const p = await registerPlayer(s);
    const c = unique('dual');
    await rpc(p.token, 'set', { c, k: 'k', v: 'global' });
    expect(await rpc(p.token, 'player_get', { c, k: 'k' })).toEqual({ error: 'not_found' });
    await rpc(p.token, 'player_set', { c, k: 'k', v: 'mine' });
    expect(await rpc(p.token, 'get', { c, k: 'k' })).toEqual({ ok: 'global' });
    expect(await rpc(p.token, 'player_get', { c, k: 'k' })).toEqual({ ok: 'mine' });
    const listed = await s.call('GET', `/api/v1/storage/${c}`, { token: p.token });
    expect(listed.body.objects.map((o: { value: unknown }) => o.value)).toEqual(['mine']);
  });

  it('marshals Lua values: sequences become arrays, an empty table {}, scalars as they are', async () => {
    const p = await registerPlayer(s);
    expect(await rpc(p.token, 'shapes')).toEqual({
      seq: { ok: [1, 2, 3] },
      // Stored as {}; inside the RPC's answer the empty table is nested, so it arrives as [] (only an empty value as a whole is {}).
      empty: { ok: [] },
      nested: { ok: { a: { b: ['x'] }, n: 1.5, t: true } },
      text: { ok: 'plain' },
    });
  });
});

describe('player rows (player_get, player_set)', () => {
  it('shares rows with REST: the player reads what the script wrote, the script reads any row whatever its perms', async () => {
    const p = await registerPlayer(s);
    const c = unique('inv');
    const written = await rpc(p.token, 'player_set', { c, k: 'bag', v: { gold: 5 } });
    expect(written).toEqual({ ok: { collection: c, key: 'bag', player_id: p.playerId, value: { gold: 5 }, version: 1, read_perm: 'owner', write_perm: 'owner' } });
    const rest = await s.call('GET', `/api/v1/storage/${c}/bag`, { token: p.token });
    expect(rest.body).toMatchObject({ player_id: p.playerId, value: { gold: 5 }, version: 1, read_perm: 'owner' });

    // The owner opens the row up over REST; a later script write keeps those perms.
    await s.call('PUT', `/api/v1/storage/${c}/bag`, { token: p.token, body: { value: { gold: 6 }, read_perm: 'public', write_perm: 'public' } });
    expect((await rpc(p.token, 'player_set', { c, k: 'bag', v: { gold: 7 } })).ok).toMatchObject({ version: 3, read_perm: 'public', write_perm: 'public' });

    // Another player's script call reads a private row: scripts are the server.
    const other = await registerPlayer(s);
    await s.call('PUT', `/api/v1/storage/${c}/secret`, { token: p.token, body: { value: 'hidden' } });
    expect(await rpc(other.token, 'player_get', { player: p.playerId, c, k: 'secret' })).toEqual({ ok: 'hidden' });
  });

  it('answers player_not_found for an unknown or malformed player id, writing nothing', async () => {
    const p = await registerPlayer(s);
    const ghost = '0190c1f2-aaaa-7000-8000-000000000001';
    expect(await rpc(p.token, 'player_set', { player: ghost, c: 'c', k: 'k', v: 1 })).toEqual({ error: 'player_not_found' });
    expect(await rpc(p.token, 'player_set', { player: 'bob', c: 'c', k: 'k', v: 1 })).toEqual({ error: 'player_not_found' });
    expect(await rpc(p.token, 'player_get', { player: ghost, c: 'c', k: 'k' })).toEqual({ error: 'not_found' });
    expect(await s.ctx.db.selectFrom('storage').select('id').where('player_id', '=', ghost).execute()).toEqual([]);
  });

  it('works from a match script too (join counts visits in the player’s storage)', async () => {
    const { socket, token, playerId } = await connectPlayer(s, 'st');
    const joined = await socket.request('match.find_or_create', { mode: 'default' });
    expect(joined.type).toBe('match.joined');
    const state = await socket.next((f) => f.type === 'match.state' && f.payload.saved !== undefined);
    expect(state.payload.saved).toEqual({ ok: { collection: 'progress', key: 'visits', player_id: playerId, value: { n: 1 }, version: 1, read_perm: 'owner', write_perm: 'owner' } });
    expect((await s.call('GET', '/api/v1/storage/progress/visits', { token })).body.value).toEqual({ n: 1 });
    socket.close();
  });
});

describe('bounds and bad arguments', () => {
  it('holds script writes to the 262144-byte bound: value_too_large, and nothing written', async () => {
    const p = await registerPlayer(s);
    const c = unique('big');
    // A Lua string of n bytes encodes as n + 2 (its quotes).
    expect((await rpc(p.token, 'set_sized', { c, k: 'k', n: 262_142 })).ok.version).toBe(1);
    expect(await rpc(p.token, 'set_sized', { c, k: 'k', n: 262_143 })).toEqual({ error: 'value_too_large' });
    expect(await rpc(p.token, 'set_sized', { c, k: 'other', n: 300_000 })).toEqual({ error: 'value_too_large' });
    const rows = await s.ctx.db.selectFrom('storage').select(['key', 'version']).where('collection', '=', c).execute();
    expect(rows).toEqual([{ key: 'k', version: 1 }]);
  });

  it('answers wrong arguments with an error envelope naming the call, instead of raising', async () => {
    const p = await registerPlayer(s);
    const misuse = await rpc(p.token, 'misuse');
    expect(Object.keys(misuse).sort()).toEqual(['empty_collection', 'key_number', 'long_key', 'no_args', 'player_set_number', 'player_table', 'set_no_key']);
    for (const [name, answer] of Object.entries(misuse)) {
      expect(answer, name).toEqual({ error: expect.stringMatching(/^game\.storage\.\w+\(/) });
    }
  });
});

describe('a write the script stopped waiting for', () => {
  it('rolls back: the row keeps its value and version', async () => {
    const p = await registerPlayer(s);
    const c = unique('slow');
    await rpc(p.token, 'set', { c, k: 'k', v: 'before' });
    let release!: () => void;
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    // Hold the row (on the embedded database, the one connection) past the RPC deadline.
    const holder = s.ctx.db.transaction().execute(async (trx) => {
      await trx.selectFrom('storage').select('id').where('collection', '=', c).forUpdate().execute();
      locked();
      await new Promise<void>((r) => (release = r));
    });
    await isLocked;
    try {
      const late = await s.call('POST', '/api/v1/rpc/game.set', { token: p.token, body: { params: { c, k: 'k', v: 'lost' } } });
      expect(late.body.type === 'rpc.error' || late.body.payload.result.r?.error === 'binding_timeout', JSON.stringify(late.body)).toBe(true);
    } finally {
      release();
      await holder;
    }
    expect(await rpc(p.token, 'get', { c, k: 'k' })).toEqual({ ok: 'before' });
    const row = await s.ctx.db.selectFrom('storage').select(['version']).where('collection', '=', c).executeTakeFirstOrThrow();
    expect(row.version).toBe(1);
  });
});

describe('with the storage setting off', () => {
  it('leaves game.storage out: indexing it raises, so the call fails', async () => {
    const off = await startTestServer({ match_workers: 1, storage: false }, { gameDir: game.dir });
    try {
      const p = await registerPlayer(off);
      const res = await off.call('POST', '/api/v1/rpc/game.get', { token: p.token, body: { params: { c: 'c', k: 'k' } } });
      expect(res.body.type, JSON.stringify(res.body)).toBe('rpc.error');
      const failed = off.logs.find((l) => l.event === 'lua_callback_failed' && l.callback === 'rpc.get');
      expect(String(failed?.detail)).toContain("attempt to index a nil value (field 'storage')");
      expect(await off.ctx.db.selectFrom('storage').select('id').execute()).toEqual([]);
    } finally {
      await off.close();
    }
  });
});
