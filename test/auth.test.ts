import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken } from '../runtime/accounts/tokens';
import { parseSettings } from '../runtime/contracts/settings';
import { expectError, freshUsername, registerPlayer } from './support/accounts';
import { startTestServer, type TestServer } from './support/server';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.close();
});

const register = (body: unknown) => s.call('POST', '/api/v1/auth/register', { body });
const login = (body: unknown) => s.call('POST', '/api/v1/auth/login', { body });
const refresh = (body: unknown) => s.call('POST', '/api/v1/auth/refresh', { body });
const logout = (opts: { body?: unknown; token?: string; headers?: Record<string, string> } = {}) =>
  s.call('POST', '/api/v1/auth/logout', opts);
const profile = (id: string, token?: string) => s.call('GET', `/api/v1/players/${id}`, token ? { token } : {});

const TOKEN = /^[A-Za-z0-9_-]{43}$/;

describe('register', () => {
  it('answers the token pair and nothing else', async () => {
    const username = freshUsername();
    const res = await register({ username, password: 'password1' });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['access_token', 'player_id', 'refresh_token', 'username']);
    expect(res.body.username).toBe(username);
    expect(res.body.player_id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(res.body.access_token).toMatch(TOKEN);
    expect(res.body.refresh_token).toMatch(TOKEN);
    expect(res.body.access_token).not.toBe(res.body.refresh_token);

    const me = await profile(res.body.player_id, res.body.access_token);
    expect(me.status).toBe(200);
    expect(me.body.display_name).toBe(username);
  });

  it('stores a salted PBKDF2 hash and only SHA-256 hashes of tokens', async () => {
    const a = await registerPlayer(s, 'same password');
    const b = await registerPlayer(s, 'same password');
    const rows = await s.ctx.db.selectFrom('players').select(['id', 'hashed_password']).where('id', 'in', [a.player_id, b.player_id]).execute();
    const hashes = rows.map((r) => r.hashed_password!);
    for (const h of hashes) expect(h).toMatch(/^pbkdf2-sha256\$1000\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
    expect(hashes[0]).not.toBe(hashes[1]);
    expect(hashes.join()).not.toContain('same password');

    const tokens = await s.ctx.db.selectFrom('player_tokens').select(['token', 'context']).where('user_id', '=', a.player_id).execute();
    expect(tokens.map((t) => t.context).sort()).toEqual(['access', 'refresh']);
    const stored = tokens.map((t) => t.token).sort();
    expect(stored).toEqual([await hashToken(a.access_token), await hashToken(a.refresh_token)].sort());
    expect(stored).not.toContain(a.access_token);
  });

  it('creates the stats row with the account', async () => {
    const p = await registerPlayer(s);
    const stats = await s.ctx.db.selectFrom('player_stats').selectAll().where('player_id', '=', p.player_id).execute();
    expect(stats).toHaveLength(1);
  });

  it('takes an optional display_name of 1-64 characters', async () => {
    const ok = await register({ username: freshUsername(), password: 'password1', display_name: 'Zoë the Bold' });
    expect(ok.status).toBe(200);
    expect((await profile(ok.body.player_id, ok.body.access_token)).body.display_name).toBe('Zoë the Bold');

    for (const bad of ['', 'x'.repeat(65), 42]) {
      const res = await register({ username: freshUsername(), password: 'password1', display_name: bad });
      expectError(res, 422, 'validation_failed');
      expect(res.body.fields.display_name).toBeInstanceOf(Array);
    }
    expect((await register({ username: freshUsername(), password: 'password1', display_name: 'x'.repeat(64) })).status).toBe(200);
  });

  it('answers 400 missing_field for an absent or non-string username or password', async () => {
    const cases: [unknown, string][] = [
      [{ password: 'password1' }, 'username'],
      [{ username: 42, password: 'password1' }, 'username'],
      [{ username: freshUsername() }, 'password'],
      [{ username: freshUsername(), password: null }, 'password'],
      [{}, 'username'],
    ];
    for (const [body, field] of cases) {
      const res = await register(body);
      expectError(res, 400, 'missing_field');
      expect(res.body.error.details.field).toBe(field);
    }
  });

  it('applies the username and password rules with 422 and the fields key at both levels', async () => {
    const badNames = ['ab', 'x'.repeat(33), 'has space', 'dot.name', 'ünïcode', 'semi;colon', ''];
    for (const username of badNames) {
      const res = await register({ username, password: 'password1' });
      expectError(res, 422, 'validation_failed');
      expect(res.body.error.details.fields.username.length).toBeGreaterThan(0);
      expect(res.body.fields).toEqual(res.body.error.details.fields);
      expect(res.body.fields.password).toBeUndefined();
    }
    for (const password of ['short12', 'x'.repeat(129), '']) {
      const res = await register({ username: freshUsername(), password });
      expectError(res, 422, 'validation_failed');
      expect(res.body.fields.password.length).toBeGreaterThan(0);
      expect(res.body.fields.username).toBeUndefined();
    }
    const both = await register({ username: 'a', password: 'b' });
    expect(Object.keys(both.body.fields).sort()).toEqual(['password', 'username']);
  });

  it('accepts the boundaries of the rules, any password characters, and nothing was created on failure', async () => {
    const three = `a${Date.now().toString(36).slice(-2)}`;
    expect((await register({ username: three, password: 'pässwörd' })).status).toBe(200);
    expect((await register({ username: freshUsername('A-_9').padEnd(32, 'z'), password: '🔑'.repeat(8) })).status).toBe(200);
    expect((await register({ username: freshUsername(), password: 'p'.repeat(128) })).status).toBe(200);

    const name = freshUsername();
    await register({ username: name, password: 'short' });
    expect((await register({ username: name, password: 'long enough' })).status).toBe(200);
  });

  it('answers 409 auth.username_taken for a taken username, compared case-sensitively', async () => {
    const p = await registerPlayer(s);
    const again = await register({ username: p.username, password: 'other password' });
    expectError(again, 409, 'auth.username_taken');
    expect((await register({ username: p.username.toUpperCase(), password: 'other password' })).status).toBe(200);
    // The original account is untouched.
    expect((await login({ username: p.username, password: p.password })).status).toBe(200);
  });

  it('answers invalid JSON and non-object bodies with their codes', async () => {
    expectError(await register('{"username":'), 400, 'invalid_json');
    expectError(await register([1, 2]), 400, 'invalid_payload');
  });
});

describe('login', () => {
  it('answers the same token-pair shape as register, with a new family', async () => {
    const p = await registerPlayer(s);
    const res = await login({ username: p.username, password: p.password });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['access_token', 'player_id', 'refresh_token', 'username']);
    expect(res.body.player_id).toBe(p.player_id);
    expect(res.body.access_token).not.toBe(p.access_token);
    expect((await profile(p.player_id, res.body.access_token)).status).toBe(200);
    expect((await profile(p.player_id, p.access_token)).status).toBe(200);
  });

  it('answers 401 auth.invalid_credentials alike for a wrong password, an unknown user and a password-less account', async () => {
    const p = await registerPlayer(s);
    const wrong = await login({ username: p.username, password: 'not the password' });
    const unknown = await login({ username: freshUsername('nobody'), password: p.password });
    const other = await registerPlayer(s);
    await s.ctx.db.updateTable('players').set({ hashed_password: null }).where('id', '=', other.player_id).execute();
    const noPassword = await login({ username: other.username, password: other.password });
    for (const res of [wrong, unknown, noPassword]) expectError(res, 401, 'auth.invalid_credentials');
    expect(wrong.body).toEqual(unknown.body);
    expect(unknown.body).toEqual(noPassword.body);
  });

  it('answers 400 missing_field for absent or non-string fields', async () => {
    expectError(await login({ username: 'someone' }), 400, 'missing_field');
    expectError(await login({ password: 'password1' }), 400, 'missing_field');
    expectError(await login({ username: 'someone', password: 12345678 }), 400, 'missing_field');
    expectError(await s.call('POST', '/api/v1/auth/login'), 400, 'missing_field');
  });

  it('still verifies hashes made at an older iteration count', async () => {
    const p = await registerPlayer(s);
    const before = s.ctx.settings.pbkdf2_iterations;
    s.ctx.settings.pbkdf2_iterations = before * 2;
    try {
      expect((await login({ username: p.username, password: p.password })).status).toBe(200);
      const newer = await registerPlayer(s);
      const row = await s.ctx.db.selectFrom('players').select('hashed_password').where('id', '=', newer.player_id).executeTakeFirstOrThrow();
      expect(row.hashed_password).toMatch(new RegExp(`^pbkdf2-sha256\\$${before * 2}\\$`));
      expectError(await login({ username: p.username, password: 'wrong password' }), 401, 'auth.invalid_credentials');
    } finally {
      s.ctx.settings.pbkdf2_iterations = before;
    }
  });

  it('refuses a banned account', async () => {
    const p = await registerPlayer(s);
    await s.ctx.db.updateTable('players').set({ banned_at: new Date() }).where('id', '=', p.player_id).execute();
    expectError(await login({ username: p.username, password: p.password }), 401, 'auth.invalid_credentials');
  });
});

describe('refresh', () => {
  it('rotates: the refresh token is burned and a new pair with only the two tokens is returned', async () => {
    const p = await registerPlayer(s);
    const res = await refresh({ refresh_token: p.refresh_token });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['access_token', 'refresh_token']);
    expect(res.body.access_token).toMatch(TOKEN);
    expect(res.body.refresh_token).not.toBe(p.refresh_token);
    expect((await profile(p.player_id, res.body.access_token)).status).toBe(200);

    const next = await refresh({ refresh_token: res.body.refresh_token });
    expect(next.status).toBe(200);
    expect((await profile(p.player_id, next.body.access_token)).status).toBe(200);
  });

  it('treats a reused refresh token as theft: 401 and the whole family revoked at once', async () => {
    const p = await registerPlayer(s);
    const other = await login({ username: p.username, password: p.password });
    const first = await refresh({ refresh_token: p.refresh_token });
    const second = await refresh({ refresh_token: first.body.refresh_token });
    // Every access token of the family has been resolved (and cached) before the reuse.
    for (const t of [p.access_token, first.body.access_token, second.body.access_token]) {
      expect((await profile(p.player_id, t)).status).toBe(200);
    }

    const reuse = await refresh({ refresh_token: p.refresh_token });
    expectError(reuse, 401, 'unauthenticated');

    expectError(await refresh({ refresh_token: second.body.refresh_token }), 401, 'unauthenticated');
    for (const t of [p.access_token, first.body.access_token, second.body.access_token]) {
      expectError(await profile(p.player_id, t), 401, 'unauthenticated');
    }
    // Another family of the same player (a second login) is untouched.
    expect((await profile(p.player_id, other.body.access_token)).status).toBe(200);
    expect((await refresh({ refresh_token: other.body.refresh_token })).status).toBe(200);
  });

  it('lets exactly one of two concurrent uses of one refresh token through, then burns the family', async () => {
    const p = await registerPlayer(s);
    const [a, b] = await Promise.all([refresh({ refresh_token: p.refresh_token }), refresh({ refresh_token: p.refresh_token })]);
    expect([a.status, b.status].sort()).toEqual([200, 401]);
    const winner = a.status === 200 ? a : b;
    expectError(await refresh({ refresh_token: winner.body.refresh_token }), 401, 'unauthenticated');
  });

  it('answers 401 unauthenticated for unknown, expired and access tokens', async () => {
    const p = await registerPlayer(s);
    expectError(await refresh({ refresh_token: 'x'.repeat(43) }), 401, 'unauthenticated');
    expectError(await refresh({ refresh_token: '' }), 401, 'unauthenticated');
    expectError(await refresh({ refresh_token: 'y'.repeat(5000) }), 401, 'unauthenticated');
    expectError(await refresh({ refresh_token: p.access_token }), 401, 'unauthenticated');

    await s.ctx.db
      .updateTable('player_tokens')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('token', '=', await hashToken(p.refresh_token))
      .execute();
    expectError(await refresh({ refresh_token: p.refresh_token }), 401, 'unauthenticated');
  });

  it('refuses a banned player', async () => {
    const p = await registerPlayer(s);
    await s.ctx.db.updateTable('players').set({ banned_at: new Date() }).where('id', '=', p.player_id).execute();
    expectError(await refresh({ refresh_token: p.refresh_token }), 401, 'unauthenticated');
  });

  it('answers 400 missing_field when refresh_token is absent or not a string', async () => {
    expectError(await refresh({}), 400, 'missing_field');
    expectError(await refresh({ refresh_token: 7 }), 400, 'missing_field');
  });
});

describe('logout', () => {
  const OK = { success: true };

  it('answers 200 {success: true} with no body and no header', async () => {
    const res = await logout();
    expect(res.status).toBe(200);
    expect(res.body).toEqual(OK);
  });

  it('with refresh_token and Bearer: revokes the whole family and the bearer token at once', async () => {
    const p = await registerPlayer(s);
    const rotated = await refresh({ refresh_token: p.refresh_token });
    const second = await login({ username: p.username, password: p.password });
    for (const t of [p.access_token, rotated.body.access_token, second.body.access_token]) {
      expect((await profile(p.player_id, t)).status).toBe(200);
    }
    // The bearer is from another family: it dies too.
    const res = await logout({ body: { refresh_token: rotated.body.refresh_token }, token: second.body.access_token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(OK);

    for (const t of [p.access_token, rotated.body.access_token, second.body.access_token]) {
      expectError(await profile(p.player_id, t), 401, 'unauthenticated');
    }
    expectError(await refresh({ refresh_token: rotated.body.refresh_token }), 401, 'unauthenticated');
    expect((await refresh({ refresh_token: second.body.refresh_token })).status).toBe(200);
  });

  it('with only the Bearer header revokes that access token', async () => {
    const p = await registerPlayer(s);
    const other = await login({ username: p.username, password: p.password });
    expect((await profile(p.player_id, p.access_token)).status).toBe(200);
    expect((await logout({ token: p.access_token })).body).toEqual(OK);
    expectError(await profile(p.player_id, p.access_token), 401, 'unauthenticated');
    expect((await profile(p.player_id, other.body.access_token)).status).toBe(200);
  });

  it('with only refresh_token revokes the family', async () => {
    const p = await registerPlayer(s);
    expect((await profile(p.player_id, p.access_token)).status).toBe(200);
    expect((await logout({ body: { refresh_token: p.refresh_token } })).body).toEqual(OK);
    expectError(await profile(p.player_id, p.access_token), 401, 'unauthenticated');
    expectError(await refresh({ refresh_token: p.refresh_token }), 401, 'unauthenticated');
  });

  it('answers the same for repeated, unknown, malformed and expired tokens, and unreadable bodies', async () => {
    const p = await registerPlayer(s);
    await s.ctx.db
      .updateTable('player_tokens')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('token', '=', await hashToken(p.access_token))
      .execute();
    const answers = [
      await logout({ token: p.access_token, body: { refresh_token: p.refresh_token } }),
      await logout({ token: p.access_token, body: { refresh_token: p.refresh_token } }),
      await logout({ token: 'x'.repeat(43), body: { refresh_token: 'y'.repeat(43) } }),
      await logout({ headers: { authorization: 'Basic abc' } }),
      await logout({ headers: { authorization: 'Bearer' } }),
      await logout({ body: '{"refresh_token":' }),
      await logout({ body: [1, 2, 3] }),
      await logout({ body: { refresh_token: 42 } }),
      await logout({ body: 'null' }),
    ];
    for (const res of answers) {
      expect(res.status).toBe(200);
      expect(res.body).toEqual(OK);
    }
    // The expired access token was revoked (deleted), not left behind.
    const left = await s.ctx.db.selectFrom('player_tokens').select('id').where('user_id', '=', p.player_id).execute();
    expect(left).toHaveLength(0);
  });
});

describe('authenticated routes answer 401 unauthenticated', () => {
  it('for a missing, malformed, unknown, expired, revoked or banned token', async () => {
    const p = await registerPlayer(s);
    const path = `/api/v1/players/${p.player_id}`;
    const cases: Record<string, string>[] = [
      {},
      { authorization: 'Basic dXNlcjpwYXNz' },
      { authorization: 'Bearer' },
      { authorization: 'Bearer a b' },
      { authorization: `Bearer ${'z'.repeat(43)}` },
      { authorization: `Bearer ${'z'.repeat(4000)}` },
      { authorization: `Bearer ${p.refresh_token}` },
    ];
    for (const headers of cases) expectError(await s.call('GET', path, { headers }), 401, 'unauthenticated');

    const expired = await login({ username: p.username, password: p.password });
    await s.ctx.db
      .updateTable('player_tokens')
      .set({ expires_at: new Date(Date.now() - 1) })
      .where('token', '=', await hashToken(expired.body.access_token))
      .execute();
    expectError(await profile(p.player_id, expired.body.access_token), 401, 'unauthenticated');

    const revoked = await login({ username: p.username, password: p.password });
    await logout({ token: revoked.body.access_token });
    expectError(await profile(p.player_id, revoked.body.access_token), 401, 'unauthenticated');

    // A ban applies to tokens not yet cached at once, and to cached ones once the player is evicted.
    const cached = await login({ username: p.username, password: p.password });
    expect((await profile(p.player_id, cached.body.access_token)).status).toBe(200);
    const fresh = await login({ username: p.username, password: p.password });
    await s.ctx.db.updateTable('players').set({ banned_at: new Date() }).where('id', '=', p.player_id).execute();
    expectError(await profile(p.player_id, fresh.body.access_token), 401, 'unauthenticated');
    s.ctx.auth.evictPlayer(p.player_id);
    expectError(await profile(p.player_id, cached.body.access_token), 401, 'unauthenticated');
  });

  it('once the access token reaches its expiry, even while cached', async () => {
    const short = await startTestServer({ access_token_ttl: 1 });
    try {
      const res = await short.call('POST', '/api/v1/auth/register', { body: { username: freshUsername(), password: 'password1' } });
      const read = () => short.call('GET', `/api/v1/players/${res.body.player_id}`, { token: res.body.access_token });
      expect((await read()).status).toBe(200);
      await new Promise((r) => setTimeout(r, 1100));
      expectError(await read(), 401, 'unauthenticated');
      // The refresh token outlives it and mints a working pair.
      const next = await short.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: res.body.refresh_token } });
      expect(next.status).toBe(200);
      expect((await short.call('GET', `/api/v1/players/${res.body.player_id}`, { token: next.body.access_token })).status).toBe(200);
    } finally {
      await short.close();
    }
  });
});

describe('registration modes', () => {
  const setModes = (operator: 'open' | 'oauth_only' | 'closed' | null, script: 'open' | 'oauth_only' | 'closed' | null) => {
    s.ctx.settings.registration = operator;
    s.ctx.game = { ...s.ctx.game, registration: () => script };
  };
  const restore = () => setModes(null, null);

  it('open (the default) allows password registration', async () => {
    restore();
    expect((await register({ username: freshUsername(), password: 'password1' })).status).toBe(200);
  });

  it('oauth_only refuses password registration; existing players sign in, refresh and log out', async () => {
    const p = await registerPlayer(s);
    setModes('oauth_only', null);
    try {
      expectError(await register({ username: freshUsername(), password: 'password1' }), 403, 'auth.password_registration_disabled');
      const signedIn = await login({ username: p.username, password: p.password });
      expect(signedIn.status).toBe(200);
      expect((await refresh({ refresh_token: signedIn.body.refresh_token })).status).toBe(200);
      expect((await logout({ token: p.access_token })).status).toBe(200);
    } finally {
      restore();
    }
  });

  it('closed refuses registration; login, refresh and logout still work', async () => {
    const p = await registerPlayer(s);
    setModes('closed', null);
    try {
      expectError(await register({ username: freshUsername(), password: 'password1' }), 403, 'auth.registration_closed');
      const signedIn = await login({ username: p.username, password: p.password });
      expect(signedIn.status).toBe(200);
      expect((await refresh({ refresh_token: p.refresh_token })).status).toBe(200);
      expect((await logout({ body: { refresh_token: signedIn.body.refresh_token } })).status).toBe(200);
    } finally {
      restore();
    }
  });

  it('checks presence before the mode, and the mode before the field rules', async () => {
    setModes('closed', null);
    try {
      expectError(await register({ username: 'ok_name' }), 400, 'missing_field');
      expectError(await register({ username: 'x', password: 'y' }), 403, 'auth.registration_closed');
    } finally {
      restore();
    }
  });

  it('lets the game script narrow an unset operator posture but never override a set one', async () => {
    const attempt = async () => (await register({ username: freshUsername(), password: 'password1' })).body?.error?.code ?? 'ok';
    const table: [('open' | 'oauth_only' | 'closed' | null), ('open' | 'oauth_only' | 'closed' | null), string][] = [
      [null, 'closed', 'auth.registration_closed'],
      [null, 'oauth_only', 'auth.password_registration_disabled'],
      [null, 'open', 'ok'],
      ['open', 'closed', 'ok'],
      ['open', 'oauth_only', 'ok'],
      ['oauth_only', 'open', 'auth.password_registration_disabled'],
      ['closed', 'open', 'auth.registration_closed'],
      ['oauth_only', 'closed', 'auth.password_registration_disabled'],
    ];
    try {
      for (const [operator, script, expected] of table) {
        setModes(operator, script);
        expect(await attempt(), `operator ${operator}, script ${script}`).toBe(expected);
      }
    } finally {
      restore();
    }
  });

  it('refuses an unrecognised operator mode at boot instead of opening registration', () => {
    expect(() => parseSettings({ registration: 'invite_only' })).toThrow(/'registration'/);
    expect(() => parseSettings({ registration: 'Closed' })).toThrow(/'registration'/);
  });
});
