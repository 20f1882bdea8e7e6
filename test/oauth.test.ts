import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RegistrationMode } from '../runtime/contracts/settings';
import { KEY_REFRESH_COOLDOWN_MS } from '../runtime/accounts/oidc';
import { expectError } from './support/accounts';
import { makePki, signingKey, TestOidcProvider, type TestPki } from './support/oidc-provider';
import { startTestServer, type TestServer } from './support/server';

/**
 * Social sign-in against real local OIDC providers over HTTPS: their CA and
 * certificates are made with openssl at test time and the service pins that
 * CA through `oidc_ca_file`. The service's clock is the test's, so expiry and
 * the key-refresh cooldown are moved, not waited for.
 */

let pki: TestPki;
let otherPki: TestPki;
let google: TestOidcProvider;
let discord: TestOidcProvider;
let foreign: TestOidcProvider;
let s: TestServer;
let gateDir: string;
let offset = 0;
const clock = { now: () => Date.now() + offset };
let mode: RegistrationMode | null = null;
let googleKey: Awaited<ReturnType<typeof signingKey>>;

beforeAll(async () => {
  pki = makePki();
  otherPki = makePki();
  google = await TestOidcProvider.start(pki);
  discord = await TestOidcProvider.start(pki, '/tenant/discord');
  foreign = await TestOidcProvider.start(otherPki);
  googleKey = await signingKey('g1');
  google.published = [googleKey];
  gateDir = mkdtempSync(path.join(tmpdir(), 'svc-oauth-gate-'));
  writeFileSync(
    path.join(gateDir, 'gate.mjs'),
    `export default async (input) => { (globalThis.__oauthGate ??= []).push(input); return input.headers['x-gate'] === 'deny' ? { action: 'deny', reason: 'test_denied' } : { action: 'skip' }; }`,
  );
  s = await startTestServer(
    {
      oidc_ca_file: pki.caFile,
      client_gate: path.join(gateDir, 'gate.mjs'),
      oidc_providers: {
        google: { issuer: google.issuer, client_id: 'svc-client', client_secret: 'not-used-here' },
        discord: { issuer: discord.issuer, client_id: 'svc-client' },
        microsoft: { issuer: foreign.issuer, client_id: 'svc-client' },
        apple: { issuer: google.issuer.replace('https:', 'http:'), client_id: 'svc-client' },
      },
    },
    { clock, game: { registration: () => mode, guestAuth: () => false } },
  );
});
afterAll(async () => {
  await s?.close();
  await Promise.all([google?.close(), discord?.close(), foreign?.close()]);
  pki?.remove();
  otherPki?.remove();
  rmSync(gateDir, { recursive: true, force: true });
});

const oauth = (body: unknown, headers: Record<string, string> = {}) => s.call('POST', '/api/v1/auth/oauth', { body, headers });
const googleToken = (options: Parameters<TestOidcProvider['token']>[1] = {}) => google.token(googleKey, { now: clock.now(), ...options });
const identityCount = async (provider: string, uid: string) =>
  (await s.ctx.db.selectFrom('player_identities').select('id').where('provider', '=', provider).where('provider_uid', '=', uid).execute()).length;

describe('boot', () => {
  it('drops an entry with a non-https issuer, logging its name, and the node still starts', async () => {
    const dropped = s.logs.filter((l) => l.event === 'oidc_provider_dropped');
    expect(dropped.map((l) => l.provider)).toEqual(['apple']);
    expectError(await oauth({ provider: 'apple', token: await googleToken() }), 401, 'auth.unsupported_provider');
  });

  it('answers 401 auth.unsupported_provider for unknown and unconfigured providers, before calling anyone', async () => {
    const before = google.discoveryFetches + google.jwksFetches;
    for (const provider of ['facebook', 'steam', 'guest', 'GOOGLE', '']) {
      expectError(await oauth({ provider, token: 'x' }), 401, 'auth.unsupported_provider');
    }
    expect(google.discoveryFetches + google.jwksFetches).toBe(before);
  });

  it('answers 400 missing_field for an absent or non-string provider or token', async () => {
    for (const [body, field] of [
      [{ token: 't' }, 'provider'],
      [{ provider: 'google' }, 'token'],
      [{ provider: 7, token: 't' }, 'provider'],
      [{ provider: 'google', token: null }, 'token'],
    ] as const) {
      const res = await oauth(body);
      expectError(res, 400, 'missing_field');
      expect(res.body.error.details.field).toBe(field);
    }
  });
});

describe('first sign-in and login', () => {
  it('creates a player with the generated username and the name claim, then logs the same identity in', async () => {
    const sub = 'abcdefgh-1234567';
    const first = await oauth({ provider: 'google', token: await googleToken({ sub }) });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body.created).toBe(true);
    expect(first.body.username).toMatch(/^google_abcdefgh_\d{4}$/);
    expect(Object.keys(first.body).sort()).toEqual(['access_token', 'created', 'player_id', 'refresh_token', 'username']);
    const me = await s.call('GET', `/api/v1/players/${first.body.player_id}`, { token: first.body.access_token });
    expect(me.body.display_name).toBe('Ada Lovelace');
    const row = await s.ctx.db.selectFrom('player_identities').selectAll().where('provider_uid', '=', sub).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ provider: 'google', player_id: first.body.player_id, provider_email: 'ada@example.test', provider_display_name: 'Ada Lovelace' });
    expect((await s.ctx.db.selectFrom('player_stats').select('player_id').where('player_id', '=', first.body.player_id).execute()).length).toBe(1);

    const again = await oauth({ provider: 'google', token: await googleToken({ sub, claims: { name: 'Ada L.' } }) });
    expect(again.status).toBe(200);
    expect(again.body.created).toBeUndefined();
    expect(again.body.player_id).toBe(first.body.player_id);
    expect(again.body.username).toBe(first.body.username);
    expect(again.body.access_token).not.toBe(first.body.access_token);
    expect(await identityCount('google', sub)).toBe(1);
  });

  it('falls back to the generated username when the token has no usable name', async () => {
    const res = await oauth({ provider: 'google', token: await googleToken({ claims: { name: '   ' } }) });
    expect(res.status).toBe(200);
    const me = await s.call('GET', `/api/v1/players/${res.body.player_id}`, { token: res.body.access_token });
    expect(me.body.display_name).toBe(res.body.username);
  });

  it('serves a provider whose issuer has a path (discovery under it)', async () => {
    const key = await signingKey('d1');
    discord.published = [key];
    const res = await oauth({ provider: 'discord', token: await discord.token(key, { now: clock.now() }) });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.username).toMatch(/^discord_/);
  });
});

describe('provider rejections: 401 auth.provider_rejected with a reason, nothing created', () => {
  const rejectedWith = async (token: string, reason: string, provider = 'google') => {
    const before = await s.ctx.db.selectFrom('players').select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow();
    const res = await oauth({ provider, token });
    expectError(res, 401, 'auth.provider_rejected');
    expect(res.body.error.details.reason).toBe(reason);
    const after = await s.ctx.db.selectFrom('players').select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow();
    expect(after.n).toBe(before.n);
  };

  it('wrong audience', async () => {
    await rejectedWith(await googleToken({ audience: 'someone-else' }), 'wrong_audience');
  });

  it('wrong issuer claim', async () => {
    await rejectedWith(await googleToken({ issuer: discord.issuer }), 'wrong_issuer');
  });

  it('expired beyond the 60 s skew; just expired within it is accepted', async () => {
    const now = Math.floor(clock.now() / 1000);
    await rejectedWith(await googleToken({ expiresAt: now - 120 }), 'expired');
    expect((await oauth({ provider: 'google', token: await googleToken({ expiresAt: now - 30 }) })).status).toBe(200);
  });

  it('not yet valid beyond the skew', async () => {
    const now = Math.floor(clock.now() / 1000);
    await rejectedWith(await googleToken({ notBefore: now + 300 }), 'not_yet_valid');
  });

  it('bad signature: a different key under a published kid, and a tampered payload', async () => {
    const impostor = await signingKey('g1');
    await rejectedWith(await google.token(impostor, { now: clock.now() }), 'bad_signature');
    const [h, p, sig] = (await googleToken({ sub: 'victim' })).split('.');
    const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(p!, 'base64url').toString()), sub: 'attacker' })).toString('base64url');
    await rejectedWith(`${h}.${forged}.${sig}`, 'bad_signature');
  });

  it('malformed tokens', async () => {
    await rejectedWith('not-a-jwt', 'malformed');
    await rejectedWith('a.b.c', 'malformed');
  });

  it('a provider whose certificate does not chain to the pinned CA is unreachable', async () => {
    const key = await signingKey('f1');
    foreign.published = [key];
    await rejectedWith(await foreign.token(key, { now: clock.now() }), 'discovery_unreachable', 'microsoft');
    expect(foreign.discoveryFetches).toBe(0);
  });
});

describe('key rotation and the key-set cache', () => {
  it('refreshes on an unknown kid at most once per cooldown, then accepts the rotated key', async () => {
    // The cache is warm from earlier sign-ins.
    expect((await oauth({ provider: 'google', token: await googleToken() })).status).toBe(200);
    const fetches = google.jwksFetches;
    const rotated = await signingKey('g2');
    offset += KEY_REFRESH_COOLDOWN_MS + 1000;

    // Unknown kid, cooldown passed: one refresh, key still not published.
    let res = await oauth({ provider: 'google', token: await google.token(rotated, { now: clock.now() }) });
    expectError(res, 401, 'auth.provider_rejected');
    expect(res.body.error.details.reason).toBe('unknown_key');
    expect(google.jwksFetches).toBe(fetches + 1);

    // Published now, but within the cooldown: no second fetch, still unknown.
    google.published = [googleKey, rotated];
    res = await oauth({ provider: 'google', token: await google.token(rotated, { now: clock.now() }) });
    expect(res.body.error.details.reason).toBe('unknown_key');
    expect(google.jwksFetches).toBe(fetches + 1);

    offset += KEY_REFRESH_COOLDOWN_MS + 1000;
    res = await oauth({ provider: 'google', token: await google.token(rotated, { now: clock.now() }) });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(google.jwksFetches).toBe(fetches + 2);
    // The old key keeps working while published, without another fetch.
    expect((await oauth({ provider: 'google', token: await googleToken() })).status).toBe(200);
    expect(google.jwksFetches).toBe(fetches + 2);
  });

  it('answers jwks_unreachable when the key set cannot be fetched, and recovers when it can', async () => {
    const other = await TestOidcProvider.start(pki);
    const key = await signingKey('x1');
    other.published = [key];
    other.jwksDown = true;
    const s2 = await startTestServer({ oidc_ca_file: pki.caFile, oidc_providers: { google: { issuer: other.issuer, client_id: 'svc-client' } } });
    try {
      const res = await s2.call('POST', '/api/v1/auth/oauth', { body: { provider: 'google', token: await other.token(key, {}) } });
      expectError(res, 401, 'auth.provider_rejected');
      expect(res.body.error.details.reason).toBe('jwks_unreachable');
      other.jwksDown = false;
      const ok = await s2.call('POST', '/api/v1/auth/oauth', { body: { provider: 'google', token: await other.token(key, {}) } });
      expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    } finally {
      await s2.close();
      await other.close();
    }
  });
});

describe('registration posture applies to the first sign-in only', () => {
  it('closed refuses a new identity (nothing created) but still logs in a known one; oauth_only allows both', async () => {
    const known = await googleToken({ sub: 'known-before-closing' });
    const created = await oauth({ provider: 'google', token: known });
    expect(created.body.created).toBe(true);
    try {
      mode = 'closed';
      const newSub = 'never-created-closed';
      expectError(await oauth({ provider: 'google', token: await googleToken({ sub: newSub }) }), 403, 'auth.registration_closed');
      expect(await identityCount('google', newSub)).toBe(0);
      const login = await oauth({ provider: 'google', token: await googleToken({ sub: 'known-before-closing' }) });
      expect(login.status).toBe(200);
      expect(login.body.player_id).toBe(created.body.player_id);

      mode = 'oauth_only';
      const fresh = await oauth({ provider: 'google', token: await googleToken({ sub: 'created-oauth-only' }) });
      expect(fresh.status).toBe(200);
      expect(fresh.body.created).toBe(true);
      expectError(await s.call('POST', '/api/v1/auth/register', { body: { username: 'pw_oauth_only', password: 'password1' } }), 403, 'auth.password_registration_disabled');
    } finally {
      mode = null;
    }
  });
});

describe('concurrent first sign-ins', () => {
  it('one creates, the other answers 409 auth.already_registering, and its retry logs in to the same player', async () => {
    const sub = 'racing-identity-1';
    let arrived = 0;
    let release!: () => void;
    const both = new Promise<void>((resolve) => (release = resolve));
    s.ctx.seams = {
      async providerAfterLookup(_provider, uid) {
        if (uid !== sub) return;
        if (++arrived === 2) release();
        await both;
      },
    };
    try {
      const [a, b] = await Promise.all([
        oauth({ provider: 'google', token: await googleToken({ sub }) }),
        oauth({ provider: 'google', token: await googleToken({ sub }) }),
      ]);
      const statuses = [a.status, b.status].sort();
      expect(statuses).toEqual([200, 409]);
      const winner = a.status === 200 ? a : b;
      const loser = a.status === 200 ? b : a;
      expect(winner.body.created).toBe(true);
      expectError(loser, 409, 'auth.already_registering');
      expect(await identityCount('google', sub)).toBe(1);
      const players = await s.ctx.db.selectFrom('players').select('id').where('username', 'like', 'google_racing-_%').execute();
      expect(players).toHaveLength(1);

      const retry = await oauth({ provider: 'google', token: await googleToken({ sub }) });
      expect(retry.status).toBe(200);
      expect(retry.body.created).toBeUndefined();
      expect(retry.body.player_id).toBe(winner.body.player_id);
    } finally {
      s.ctx.seams = undefined;
    }
  });
});

describe('generated usernames', () => {
  it('retries a taken name and answers 500 auth.registration_failed when all three attempts collide', async () => {
    const prefix = 'zzcollid';
    await sql`insert into players (id, username, metadata, updated_at)
      select gen_random_uuid(), ${'google_' + prefix + '_'} || lpad(i::text, 4, '0'), '{}'::jsonb, now() from generate_series(0, 9999) i`.execute(s.ctx.db);
    try {
      const res = await oauth({ provider: 'google', token: await googleToken({ sub: `${prefix}-the-rest` }) });
      expectError(res, 500, 'auth.registration_failed');
      expect(await identityCount('google', `${prefix}-the-rest`)).toBe(0);
      expect(s.logs.filter((l) => l.event === 'generated_username_taken' && l.provider === 'google').length).toBe(3);
    } finally {
      await sql`delete from player_stats where player_id in (select id from players where username like ${'google_' + prefix + '_%'})`.execute(s.ctx.db);
      await sql`delete from players where username like ${'google_' + prefix + '_%'}`.execute(s.ctx.db);
    }
  });
});

describe('client gate on /auth/oauth', () => {
  it('runs before the provider is asked, with the token in its input; a denial creates nothing', async () => {
    const calls = ((globalThis as { __oauthGate?: Record<string, any>[] }).__oauthGate ??= []);
    calls.splice(0);
    const fetches = google.jwksFetches + google.discoveryFetches;
    const token = await googleToken({ sub: 'gated-identity' });
    const res = await oauth({ provider: 'google', token }, { 'x-gate': 'deny' });
    expectError(res, 403, 'client_gate_denied');
    expect(res.body.error.details.reason).toBe('test_denied');
    expect(calls).toHaveLength(1);
    expect(calls[0]!.token).toBe(token);
    expect(calls[0]!.path).toBe('/api/v1/auth/oauth');
    expect(google.jwksFetches + google.discoveryFetches).toBe(fetches);
    expect(await identityCount('google', 'gated-identity')).toBe(0);
  });
});
