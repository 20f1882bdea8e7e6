import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, registerPlayer, type TestPlayer } from './support/accounts';
import { startTestServer, type TestServer } from './support/server';

let s: TestServer;
let alice: TestPlayer;
let bob: TestPlayer;
beforeAll(async () => {
  s = await startTestServer();
  alice = await registerPlayer(s);
  bob = await registerPlayer(s);
});
afterAll(async () => {
  await s.close();
});

const get = (id: string, token: string) => s.call('GET', `/api/v1/players/${id}`, { token });
const put = (id: string, token: string, body?: unknown) => s.call('PUT', `/api/v1/players/${id}`, { token, ...(body !== undefined ? { body } : {}) });
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;

describe('GET /players/:id', () => {
  it("returns any player's public profile and nothing else", async () => {
    const res = await get(bob.player_id, alice.access_token);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['avatar_url', 'display_name', 'id', 'inserted_at', 'metadata', 'updated_at', 'username']);
    expect(res.body).toMatchObject({ id: bob.player_id, username: bob.username, display_name: bob.username, avatar_url: null, metadata: {} });
    expect(res.body.inserted_at).toMatch(ISO);
    expect(res.body.updated_at).toMatch(ISO);
    expect(JSON.stringify(res.body)).not.toContain('pbkdf2');
  });

  it('answers 404 player.not_found for an unknown id and for a non-UUID id', async () => {
    expectError(await get('01900000-0000-7000-8000-000000000000', alice.access_token), 404, 'player.not_found');
    expectError(await get('not-a-uuid', alice.access_token), 404, 'player.not_found');
    expectError(await get("1' or '1'='1", alice.access_token), 404, 'player.not_found');
  });

  it('needs a session', async () => {
    expectError(await s.call('GET', `/api/v1/players/${bob.player_id}`), 401, 'unauthenticated');
  });
});

describe('GET /players/me and GET /players?username=', () => {
  it('answers the caller\'s own profile', async () => {
    const res = await s.call('GET', '/api/v1/players/me', { token: alice.access_token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual((await get(alice.player_id, alice.access_token)).body);
    expectError(await s.call('GET', '/api/v1/players/me'), 401, 'unauthenticated');
  });

  it('finds a player by exact username, as a list that is empty when nobody has it', async () => {
    const found = await s.call('GET', `/api/v1/players?username=${encodeURIComponent(bob.username)}`, { token: alice.access_token });
    expect(found.status).toBe(200);
    expect(found.body).toEqual({ players: [(await get(bob.player_id, alice.access_token)).body] });
    // Exact: another case or a prefix is somebody else.
    for (const other of [bob.username.toUpperCase(), bob.username.slice(0, -1), '%', 'x'.repeat(300)]) {
      const res = await s.call('GET', `/api/v1/players?username=${encodeURIComponent(other)}`, { token: alice.access_token });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ players: [] });
    }
    expectError(await s.call('GET', '/api/v1/players', { token: alice.access_token }), 400, 'missing_field');
    expectError(await s.call('GET', `/api/v1/players?username=${bob.username}`), 401, 'unauthenticated');
  });
});

describe('PUT /players/:id', () => {
  it('updates the recognised keys, ignores the rest and leaves omitted keys alone', async () => {
    const res = await put(alice.player_id, alice.access_token, {
      display_name: 'Alice A.',
      avatar_url: 'not even a url',
      metadata: { level: 3, tags: ['a'] },
      username: 'hijacked',
      password: 'new password',
      banned_at: null,
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id: alice.player_id,
      username: alice.username,
      display_name: 'Alice A.',
      avatar_url: 'not even a url',
      metadata: { level: 3, tags: ['a'] },
    });

    const partial = await put(alice.player_id, alice.access_token, { avatar_url: 'https://example.test/a.png' });
    expect(partial.body).toMatchObject({ display_name: 'Alice A.', avatar_url: 'https://example.test/a.png', metadata: { level: 3, tags: ['a'] } });

    expect((await get(alice.player_id, bob.access_token)).body).toEqual(partial.body);
    // The ignored password key changed nothing.
    expect((await s.call('POST', '/api/v1/auth/login', { body: { username: alice.username, password: alice.password } })).status).toBe(200);
  });

  it('answers 200 with the unchanged profile for an empty object or no body', async () => {
    const before = (await get(alice.player_id, alice.access_token)).body;
    const res = await put(alice.player_id, alice.access_token, {});
    expect(res.status).toBe(200);
    expect({ ...res.body, updated_at: null }).toEqual({ ...before, updated_at: null });
    expect((await put(alice.player_id, alice.access_token)).status).toBe(200);
  });

  it('answers 403 forbidden for anyone else, before looking anything up', async () => {
    expectError(await put(bob.player_id, alice.access_token, { display_name: 'mallory' }), 403, 'forbidden');
    expectError(await put('01900000-0000-7000-8000-000000000000', alice.access_token, {}), 403, 'forbidden');
    expectError(await put('not-a-uuid', alice.access_token, {}), 403, 'forbidden');
    expect((await get(bob.player_id, bob.access_token)).body.display_name).toBe(bob.username);
  });

  it('answers 422 with the errors key for bad values, and changes nothing', async () => {
    const before = (await get(alice.player_id, alice.access_token)).body;
    const cases: [Record<string, unknown>, string][] = [
      [{ display_name: '' }, 'display_name'],
      [{ display_name: 'x'.repeat(65) }, 'display_name'],
      [{ display_name: 12 }, 'display_name'],
      [{ display_name: null }, 'display_name'],
      [{ avatar_url: 5 }, 'avatar_url'],
      [{ metadata: [1, 2] }, 'metadata'],
      [{ metadata: 'text' }, 'metadata'],
      [{ metadata: { blob: 'x'.repeat(16_384) } }, 'metadata'],
    ];
    for (const [body, field] of cases) {
      const res = await put(alice.player_id, alice.access_token, { display_name: 'would be fine', ...body });
      expectError(res, 422, 'validation_failed');
      expect(res.body.errors[field], JSON.stringify(body)).toBeInstanceOf(Array);
      expect(res.body.error.details.errors).toEqual(res.body.errors);
      expect(res.body.fields).toBeUndefined();
    }
    const after = (await get(alice.player_id, alice.access_token)).body;
    expect(after).toEqual(before);
  });

  it('accepts metadata of exactly 16384 encoded bytes and a 64-character display name', async () => {
    const padding = 16_384 - JSON.stringify({ blob: '' }).length;
    const res = await put(alice.player_id, alice.access_token, { metadata: { blob: 'x'.repeat(padding) }, display_name: 'd'.repeat(64) });
    expect(res.status).toBe(200);
    // Bytes, not characters: the same length in two-byte characters is over.
    const over = await put(alice.player_id, alice.access_token, { metadata: { blob: 'é'.repeat(padding) } });
    expectError(over, 422, 'validation_failed');
  });

  it('answers 400 invalid_payload for a body that is not a JSON object', async () => {
    for (const body of ['[1,2]', '"text"', '42', 'null']) {
      expectError(await put(alice.player_id, alice.access_token, body), 400, 'invalid_payload');
    }
    expectError(await put(alice.player_id, alice.access_token, '{"display_name":'), 400, 'invalid_json');
  });

  it('needs a session', async () => {
    expectError(await s.call('PUT', `/api/v1/players/${alice.player_id}`, { body: {} }), 401, 'unauthenticated');
  });
});

describe('profiles this node has read', () => {
  it('show a change or an erasure made through the API at once, however recently they were read', async () => {
    const carol = await registerPlayer(s);
    expect((await get(carol.player_id, bob.access_token)).body.display_name).toBe(carol.username);
    expect((await put(carol.player_id, carol.access_token, { display_name: 'Carol C.' })).status).toBe(200);
    expect((await get(carol.player_id, bob.access_token)).body.display_name).toBe('Carol C.');
    expect((await s.call('GET', '/api/v1/players/me', { token: carol.access_token })).body.display_name).toBe('Carol C.');

    expect((await s.call('POST', '/api/v1/players/me/erase', { token: carol.access_token, body: { password: carol.password } })).status).toBe(200);
    expectError(await get(carol.player_id, bob.access_token), 404, 'player.not_found');
  });

  it('show a change made behind the node\'s back once profile_cache_ttl_ms has passed, and at once with 0', async () => {
    for (const ttl of [150, 0]) {
      const other = await startTestServer({ profile_cache_ttl_ms: ttl });
      try {
        const dave = await registerPlayer(other);
        const read = async () => (await other.call('GET', `/api/v1/players/${dave.player_id}`, { token: dave.access_token })).body.display_name;
        expect(await read()).toBe(dave.username);
        // Another node of the deployment, or an operator's SQL.
        await other.ctx.db.updateTable('players').set({ display_name: 'Changed elsewhere' }).where('id', '=', dave.player_id).execute();
        if (ttl > 0) {
          expect(await read()).toBe(dave.username);
          await new Promise((r) => setTimeout(r, ttl + 50));
        }
        expect(await read()).toBe('Changed elsewhere');
      } finally {
        await other.close();
      }
    }
  });
});
