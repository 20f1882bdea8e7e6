import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, registerPlayer } from './support/accounts';
import { guestSignIn, guestUpgrade, newDevice, PEPPER_V1 } from './support/guests';
import { makePki, signingKey, TestOidcProvider, type TestPki } from './support/oidc-provider';
import { startTestServer, type TestServer } from './support/server';

/** Link and unlink across password accounts, provider-only accounts and guests, with real OIDC tokens. */

let pki: TestPki;
let google: TestOidcProvider;
let discord: TestOidcProvider;
let gKey: Awaited<ReturnType<typeof signingKey>>;
let dKey: Awaited<ReturnType<typeof signingKey>>;
let s: TestServer;
let n = 0;

beforeAll(async () => {
  pki = makePki();
  google = await TestOidcProvider.start(pki);
  discord = await TestOidcProvider.start(pki);
  gKey = await signingKey('g');
  dKey = await signingKey('d');
  google.published = [gKey];
  discord.published = [dKey];
  s = await startTestServer(
    {
      oidc_ca_file: pki.caFile,
      guest_verifier_pepper: PEPPER_V1,
      oidc_providers: { google: { issuer: google.issuer, client_id: 'svc-client' }, discord: { issuer: discord.issuer, client_id: 'svc-client' } },
    },
    { game: { guestAuth: () => true, registration: () => null } },
  );
});
afterAll(async () => {
  await s?.close();
  await Promise.all([google?.close(), discord?.close()]);
  pki?.remove();
});

const sub = (label: string) => `${label}-${++n}-${Date.now().toString(36)}`;
const gToken = (subject: string) => google.token(gKey, { sub: subject });
const dToken = (subject: string) => discord.token(dKey, { sub: subject });
const link = (token: string | undefined, body: unknown) => s.call('POST', '/api/v1/auth/link', { body, ...(token ? { token } : {}) });
const unlink = (token: string | undefined, query: string, body?: unknown) =>
  s.call('DELETE', `/api/v1/auth/unlink${query}`, { ...(token ? { token } : {}), ...(body !== undefined ? { body } : {}) });
const oauth = (provider: string, token: string) => s.call('POST', '/api/v1/auth/oauth', { body: { provider, token } });

describe('link', () => {
  it('links a verified identity to the caller; that identity then signs the caller in', async () => {
    const p = await registerPlayer(s);
    const subject = sub('pw');
    const res = await link(p.access_token, { provider: 'google', token: await gToken(subject) });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ provider: 'google', provider_uid: subject, linked: true });
    const signIn = await oauth('google', await gToken(subject));
    expect(signIn.body.player_id).toBe(p.player_id);
    expect(signIn.body.created).toBeUndefined();
  });

  it('409 auth.provider_already_linked for an identity held by anyone, the caller included', async () => {
    const a = await registerPlayer(s);
    const b = await registerPlayer(s);
    const subject = sub('dup');
    expect((await link(a.access_token, { provider: 'google', token: await gToken(subject) })).status).toBe(200);
    expectError(await link(a.access_token, { provider: 'google', token: await gToken(subject) }), 409, 'auth.provider_already_linked');
    expectError(await link(b.access_token, { provider: 'google', token: await gToken(subject) }), 409, 'auth.provider_already_linked');
    const signedUp = sub('signedup');
    expect((await oauth('discord', await dToken(signedUp))).body.created).toBe(true);
    expectError(await link(b.access_token, { provider: 'discord', token: await dToken(signedUp) }), 409, 'auth.provider_already_linked');
  });

  it('401 without a session, 400 missing_field, 401 unsupported or rejected; nothing linked', async () => {
    const p = await registerPlayer(s);
    expectError(await link(undefined, { provider: 'google', token: await gToken(sub('x')) }), 401, 'unauthenticated');
    const missing = await link(p.access_token, { provider: 'google' });
    expectError(missing, 400, 'missing_field');
    expect(missing.body.error.details.field).toBe('token');
    expectError(await link(p.access_token, { token: 'x' }), 400, 'missing_field');
    expectError(await link(p.access_token, { provider: 'apple', token: 'x' }), 401, 'auth.unsupported_provider');
    const bad = await link(p.access_token, { provider: 'google', token: await google.token(gKey, { sub: sub('aud'), audience: 'other' }) });
    expectError(bad, 401, 'auth.provider_rejected');
    expect(bad.body.error.details.reason).toBe('wrong_audience');
    expect(await s.ctx.db.selectFrom('player_identities').select('id').where('player_id', '=', p.player_id).execute()).toHaveLength(0);
  });
});

describe('unlink', () => {
  it('reads the provider from the query string only: absent → 400 missing_field even with it in a body', async () => {
    const p = await registerPlayer(s);
    for (const [query, body] of [['', undefined], ['?provider=', undefined], ['', { provider: 'google' }]] as const) {
      const res = await unlink(p.access_token, query, body);
      expectError(res, 400, 'missing_field');
      expect(res.body.error.details.field).toBe('provider');
    }
    expectError(await unlink(undefined, '?provider=google'), 401, 'unauthenticated');
  });

  it('404 auth.identity_not_found for a provider not linked to the caller', async () => {
    const p = await registerPlayer(s);
    expectError(await unlink(p.access_token, '?provider=google'), 404, 'auth.identity_not_found');
    expectError(await unlink(p.access_token, '?provider=nonsense'), 404, 'auth.identity_not_found');
  });

  it('a password account unlinks freely; the identity is free again afterwards', async () => {
    const p = await registerPlayer(s);
    const subject = sub('free');
    await link(p.access_token, { provider: 'google', token: await gToken(subject) });
    const res = await unlink(p.access_token, '?provider=google');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true });
    const fresh = await oauth('google', await gToken(subject));
    expect(fresh.body.created).toBe(true);
    expect(fresh.body.player_id).not.toBe(p.player_id);
  });

  it('422 auth.last_auth_method for a provider-only account until another provider is linked', async () => {
    const created = await oauth('google', await gToken(sub('only')));
    const token = created.body.access_token;
    expectError(await unlink(token, '?provider=google'), 422, 'auth.last_auth_method');
    expect((await link(token, { provider: 'discord', token: await dToken(sub('second')) })).status).toBe(200);
    expect((await unlink(token, '?provider=google')).status).toBe(200);
    expectError(await unlink(token, '?provider=discord'), 422, 'auth.last_auth_method');
  });

  it('two concurrent unlinks of the last two methods: exactly one succeeds', async () => {
    const created = await oauth('google', await gToken(sub('race')));
    const token = created.body.access_token;
    await link(token, { provider: 'discord', token: await dToken(sub('race-d')) });
    const [a, b] = await Promise.all([unlink(token, '?provider=google'), unlink(token, '?provider=discord')]);
    expect([a.status, b.status].sort()).toEqual([200, 422]);
    expect(await s.ctx.db.selectFrom('player_identities').select('id').where('player_id', '=', created.body.player_id).execute()).toHaveLength(1);
  });
});

describe('guests and providers', () => {
  it('a guest identity counts as a method: an unclaimed guest cannot unlink it', async () => {
    const g = await guestSignIn(s, newDevice());
    expectError(await unlink(g.body.access_token, '?provider=guest'), 422, 'auth.last_auth_method');
  });

  it('linking a provider claims the guest; unlinking it makes an unclaimed guest again', async () => {
    const device = newDevice();
    const g = (await guestSignIn(s, device)).body;
    const subject = sub('guest-link');
    expect((await link(g.access_token, { provider: 'google', token: await gToken(subject) })).status).toBe(200);
    expectError(await guestSignIn(s, device), 401, 'guest.already_upgraded');
    expectError(await guestUpgrade(s, g.access_token, { username: `gl_${n}_${Date.now() % 1e6}`, password: 'password1' }), 409, 'guest.not_unclaimed');
    expect((await oauth('google', await gToken(subject))).body.player_id).toBe(g.player_id);

    expect((await unlink(g.access_token, '?provider=google')).status).toBe(200);
    expect((await guestSignIn(s, device)).body.player_id).toBe(g.player_id);
  });

  it('with a provider linked the guest identity can go, leaving a provider-only account', async () => {
    const device = newDevice();
    const g = (await guestSignIn(s, device)).body;
    await link(g.access_token, { provider: 'discord', token: await dToken(sub('keep')) });
    expect((await unlink(g.access_token, '?provider=guest')).status).toBe(200);
    expectError(await unlink(g.access_token, '?provider=discord'), 422, 'auth.last_auth_method');
    // The device is unknown now: it would create a new guest.
    const again = await guestSignIn(s, device);
    expect(again.body.created).toBe(true);
    expect(again.body.player_id).not.toBe(g.player_id);
  });

  it('an upgraded guest (password) may unlink its old guest identity', async () => {
    const g = (await guestSignIn(s, newDevice())).body;
    const up = await guestUpgrade(s, g.access_token, { username: `ug_${n}_${Date.now() % 1e6}`, password: 'password1' });
    expect(up.status).toBe(200);
    expect((await unlink(up.body.access_token, '?provider=guest')).status).toBe(200);
  });
});
