import { afterEach, describe, expect, it } from 'vitest';
import { WindowLimiter } from '../runtime/platform/rate-limiter';
import { DEFAULT_RATE_LIMITS, parseSettings } from '../runtime/contracts/settings';
import { TrustedProxies } from '../host/infra/client-address';
import { startTestServer, type TestServer } from './support/server';
import { inProcessApp } from './support/app';
import { expectError, registerPlayer } from './support/accounts';

// Each test's servers stop after it, so the next test's server takes over their database.
const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
async function server(settings: Parameters<typeof startTestServer>[0]) {
  const s = await startTestServer(settings);
  servers.push(s);
  return s;
}

describe('fixed windows', () => {
  it('admits `limit` per window and says exactly when the next one opens', () => {
    let now = 1_000_000;
    const limiter = new WindowLimiter({ ...DEFAULT_RATE_LIMITS, api: { limit: 3, window: 1000 } }, () => now);
    for (let i = 0; i < 3; i++) expect(limiter.take('api', 'k').ok).toBe(true);
    now += 400;
    expect(limiter.take('api', 'k')).toEqual({ ok: false, retryAfterMs: 600 });
    expect(limiter.take('api', 'other').ok).toBe(true);
    now += 599;
    expect(limiter.take('api', 'k').ok).toBe(false);
    now += 1;
    expect(limiter.take('api', 'k').ok).toBe(true);
    limiter.close();
  });

  it('keeps groups apart and sweeps closed windows', () => {
    let now = 0;
    const limiter = new WindowLimiter({ ...DEFAULT_RATE_LIMITS, auth: { limit: 1, window: 1000 }, api: { limit: 1, window: 5000 } }, () => now);
    expect(limiter.take('auth', 'k').ok).toBe(true);
    expect(limiter.take('api', 'k').ok).toBe(true);
    expect(limiter.take('auth', 'k').ok).toBe(false);
    now = 1500;
    limiter.sweep();
    expect(limiter.size).toBe(1);
    limiter.close();
  });
});

describe('HTTP rate limiting', () => {
  it('answers 429 rate_limited with retry_after and Retry-After, then admits again', async () => {
    const s = await server({ rate_limits: { api: { limit: 3, window: 1000 } } });
    for (let i = 0; i < 3; i++) expect((await s.call('GET', '/api/v1/health')).status).toBe(200);
    const res = await s.call('GET', '/api/v1/health');
    expect(res.status).toBe(429);
    expect(res.body.error.code).toBe('rate_limited');
    expect(res.body.error.details.retry_after).toBe(1);
    expect(res.headers.get('retry-after')).toBe('1');
    await new Promise((r) => setTimeout(r, 1050));
    expect((await s.call('GET', '/api/v1/health')).status).toBe(200);
  });

  it('spends register, auth and iap from their own groups, not api', async () => {
    const s = await server({
      rate_limits: { register: { limit: 1, window: 60_000 }, auth: { limit: 2, window: 60_000 }, iap: { limit: 1, window: 60_000 }, api: { limit: 50, window: 60_000 } },
    });
    // Paths without a route still pass the limiter first, so they isolate the grouping.
    expect((await s.call('POST', '/api/v1/auth/register', { body: {} })).status).not.toBe(429);
    expect((await s.call('POST', '/api/v1/auth/register', { body: {} })).status).toBe(429);
    expect((await s.call('POST', '/api/v1/auth/zz-probe')).status).toBe(404);
    expect((await s.call('POST', '/api/v1/auth/zz-probe')).status).toBe(404);
    expect((await s.call('POST', '/api/v1/auth/zz-probe')).status).toBe(429);
    expect((await s.call('POST', '/api/v1/iap/zz-probe')).status).toBe(404);
    expect((await s.call('POST', '/api/v1/iap/zz-probe')).status).toBe(429);
    expect((await s.call('GET', '/api/v1/health')).status).toBe(200);
  });

  it('applies operator overrides and keeps the defaults of groups it does not name', async () => {
    const s = await server({ rate_limits: { api: { limit: 1, window: 60_000 } } });
    expect(s.ctx.settings.rate_limits.api).toEqual({ limit: 1, window: 60_000 });
    expect(s.ctx.settings.rate_limits.ws_connect).toEqual(DEFAULT_RATE_LIMITS.ws_connect);
    expect((await s.call('GET', '/api/v1/health')).status).toBe(200);
    const res = await s.call('GET', '/api/v1/health');
    expect(res.status).toBe(429);
    expect(res.body.error.details.retry_after).toBe(60);
  });

  it('believes X-Forwarded-For only from a trusted proxy', async () => {
    const untrusted = await server({ rate_limits: { api: { limit: 1, window: 60_000 } } });
    expect((await untrusted.call('GET', '/api/v1/health', { headers: { 'x-forwarded-for': '203.0.113.1' } })).status).toBe(200);
    // A forged header does not buy a fresh bucket.
    expect((await untrusted.call('GET', '/api/v1/health', { headers: { 'x-forwarded-for': '203.0.113.2' } })).status).toBe(429);

    const trusted = await server({ rate_limits: { api: { limit: 1, window: 60_000 } }, trusted_proxies: ['127.0.0.0/8'] });
    expect((await trusted.call('GET', '/api/v1/health', { headers: { 'x-forwarded-for': '203.0.113.1' } })).status).toBe(200);
    expect((await trusted.call('GET', '/api/v1/health', { headers: { 'x-forwarded-for': '203.0.113.1' } })).status).toBe(429);
    expect((await trusted.call('GET', '/api/v1/health', { headers: { 'x-forwarded-for': '203.0.113.2' } })).status).toBe(200);
    // The nearest untrusted hop counts, not whatever the client wrote first.
    expect((await trusted.call('GET', '/api/v1/health', { headers: { 'x-forwarded-for': '203.0.113.1, 203.0.113.3' } })).status).toBe(200);
  });
});

describe('bucket keys', () => {
  it('keys on the player when a valid Bearer token is present, else on the peer address', async () => {
    const s = await server({ rate_limits: { api: { limit: 3, window: 60_000 } } });
    const a = (await s.call('POST', '/api/v1/auth/register', { body: { username: 'bucket_a', password: 'password-a1' } })).body;
    const b = (await s.call('POST', '/api/v1/auth/register', { body: { username: 'bucket_b', password: 'password-b1' } })).body;
    expect(a.access_token).toBeTypeOf('string');
    // A's first call misses the token cache: it spends the address's bucket once, then A's own.
    for (let i = 0; i < 3; i++) expect((await s.call('GET', `/api/v1/players/${a.player_id}`, { token: a.access_token })).status).toBe(200);
    expect((await s.call('GET', `/api/v1/players/${a.player_id}`, { token: a.access_token })).status).toBe(429);
    // Same address, other player: its own bucket (its cache miss spends the address's once more).
    expect((await s.call('GET', `/api/v1/players/${a.player_id}`, { token: b.access_token })).status).toBe(200);
    // Same address, no token: the address's bucket, which the two cache misses drew on.
    expect((await s.call('GET', '/api/v1/health')).status).toBe(200);
    expect((await s.call('GET', '/api/v1/health')).status).toBe(429);
    // An invalid token falls back to the address, so it cannot buy a fresh bucket.
    expect((await s.call('GET', '/api/v1/players/me', { token: 'not-a-real-token' })).status).toBe(429);
  });

  it('spends the address bucket before a token the cache does not know costs a database read', async () => {
    const app = await inProcessApp({ rate_limits: { api: { limit: 2, window: 60_000 } } });
    try {
      // Distinct garbage tokens: each misses the cache, and each spends the address's bucket first.
      expect((await app.call('GET', '/api/v1/players/me', { token: 'garbage-1' })).status).toBe(401);
      expect((await app.call('GET', '/api/v1/players/me', { token: 'garbage-2' })).status).toBe(401);
      // The database goes away: a lookup now would fail, so a 429 proves none was attempted.
      await app.ctx.db.destroy().catch(() => {});
      const res = await app.call('GET', '/api/v1/players/me', { token: 'garbage-3' });
      expect(res.status).toBe(429);
      expect(res.body.error.code).toBe('rate_limited');
    } finally {
      await app.close().catch(() => {});
    }
  });
});

describe('sign-in buckets', () => {
  it('keys register and auth on the address even when a valid Bearer token comes along', async () => {
    const s = await server({ rate_limits: { auth: { limit: 3, window: 60_000 }, register: { limit: 3, window: 60_000 } } });
    const tokens: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await s.call('POST', '/api/v1/auth/register', { body: { username: `rot_${i}_${Date.now() % 100000}`, password: 'password-rot' }, token: tokens[i - 1] });
      expect(res.status).toBe(200);
      tokens.push(res.body.access_token);
    }
    // Each registration minted a token; rotating them buys no fresh register bucket.
    for (const token of tokens) {
      expectError(await s.call('POST', '/api/v1/auth/register', { body: { username: `rot_x_${Date.now() % 100000}`, password: 'password-rot' }, token }), 429, 'rate_limited');
    }
    for (let i = 0; i < 3; i++) {
      expect((await s.call('POST', '/api/v1/auth/login', { body: { username: 'nobody_here', password: 'wrong-guess' }, token: tokens[i] })).status).toBe(401);
    }
    for (const token of tokens) {
      expectError(await s.call('POST', '/api/v1/auth/login', { body: { username: 'nobody_here', password: 'wrong-guess' }, token }), 429, 'rate_limited');
    }
    // The players' own buckets still serve their ordinary calls.
    expect((await s.call('GET', '/api/v1/players/me', { token: tokens[0] })).status).toBe(200);
  });

  it('slows guesses on one account from any address, for that account only, and for at most one window', async () => {
    let now = Date.now();
    const s = await startTestServer({ rate_limits: { login_failures: { limit: 3, window: 60_000 } } }, { clock: { now: () => now } });
    servers.push(s);
    const victim = await registerPlayer(s);
    const other = await registerPlayer(s);
    const login = (username: string, password: string, ip: string) =>
      s.call('POST', '/api/v1/auth/login', { body: { username, password }, headers: { 'x-forwarded-for': ip } });
    // Addresses differ (a botnet); the server trusts no proxy here, so they do not even matter.
    for (let i = 0; i < 3; i++) expectError(await login(victim.username, `guess-${i}-wrong`, `198.51.100.${i}`), 401, 'auth.invalid_credentials');
    const locked = await login(victim.username, victim.password, '198.51.100.9');
    expectError(locked, 429, 'rate_limited');
    expect(locked.body.error.details.retry_after).toBe(60);
    // Another account is untouched, and so is a success on it.
    expect((await login(other.username, other.password, '198.51.100.9')).status).toBe(200);
    // An unknown username is limited the same way, so the limit reveals no account.
    for (let i = 0; i < 3; i++) expectError(await login('no_such_player', 'guess-wrong', '198.51.100.7'), 401, 'auth.invalid_credentials');
    expectError(await login('no_such_player', 'guess-wrong', '198.51.100.7'), 429, 'rate_limited');
    // Once the window has passed, the owner signs in.
    now += 60_001;
    expect((await login(victim.username, victim.password, '198.51.100.9')).status).toBe(200);
  });

  it('does not count successful sign-ins', async () => {
    const s = await server({ rate_limits: { login_failures: { limit: 2, window: 60_000 } } });
    const p = await registerPlayer(s);
    for (let i = 0; i < 5; i++) expect((await s.call('POST', '/api/v1/auth/login', { body: { username: p.username, password: p.password } })).status).toBe(200);
  });
});

describe('trusted proxies', () => {
  it('match IPv4 and IPv6 addresses and CIDR ranges, IPv4-mapped addresses as IPv4', () => {
    const proxies = new TrustedProxies(['10.0.0.0/8', '192.0.2.7', '2001:db8::/32', 'fd00::1']);
    expect(proxies.trusts('10.20.30.40')).toBe(true);
    expect(proxies.trusts('::ffff:10.1.2.3')).toBe(true);
    expect(proxies.trusts('11.0.0.1')).toBe(false);
    expect(proxies.trusts('192.0.2.7')).toBe(true);
    expect(proxies.trusts('192.0.2.8')).toBe(false);
    expect(proxies.trusts('2001:db8:1234::5')).toBe(true);
    expect(proxies.trusts('2001:db9::5')).toBe(false);
    expect(proxies.trusts('fd00:0:0:0:0:0:0:1')).toBe(true);
    expect(proxies.trusts('fd00::2')).toBe(false);
    for (const junk of ['', 'localhost', '10.1', '0x0a000001', '10.0.0.0/8/8']) expect(proxies.trusts(junk)).toBe(false);
    expect(new TrustedProxies([]).trusts('10.0.0.1')).toBe(false);
  });

  it('refuse an entry that is not an address or a range at boot, naming it', () => {
    for (const entry of ['10.0.0.0/33', 'proxy.internal', '10.1', '2001:db8::/129', '10.0.0.0/x']) {
      expect(() => parseSettings({ trusted_proxies: [entry] }), entry).toThrow(/trusted_proxies\.0/);
    }
    expect(parseSettings({ trusted_proxies: ['::ffff:127.0.0.0/104', '::1', '0.0.0.0/0'] }).settings.trusted_proxies).toHaveLength(3);
  });

  it('believe X-Forwarded-For from a peer inside an IPv6-written range', async () => {
    const s = await server({ rate_limits: { api: { limit: 1, window: 60_000 } }, trusted_proxies: ['::ffff:127.0.0.0/104'] });
    expect((await s.call('GET', '/api/v1/health', { headers: { 'x-forwarded-for': '2001:db8::10' } })).status).toBe(200);
    expect((await s.call('GET', '/api/v1/health', { headers: { 'x-forwarded-for': '2001:db8::10' } })).status).toBe(429);
    expect((await s.call('GET', '/api/v1/health', { headers: { 'x-forwarded-for': '2001:db8::11' } })).status).toBe(200);
  });
});

describe('sliding windows', () => {
  it('never admit more than the limit in any window for ws_connect and join, across a window edge too', () => {
    let now = 0;
    const limiter = new WindowLimiter({ ...DEFAULT_RATE_LIMITS, ws_connect: { limit: 3, window: 1000 }, api: { limit: 3, window: 1000 } }, () => now);
    expect(limiter.take('api', 'ip').ok).toBe(true);
    now = 900;
    for (let i = 0; i < 3; i++) expect(limiter.take('ws_connect', 'ip').ok).toBe(true);
    for (let i = 0; i < 2; i++) expect(limiter.take('api', 'ip').ok).toBe(true);
    // 200 ms later a fixed window has opened afresh; the sliding one still holds the three.
    now = 1100;
    expect(limiter.take('api', 'ip').ok).toBe(true);
    expect(limiter.take('ws_connect', 'ip')).toEqual({ ok: false, retryAfterMs: 800 });
    expect(limiter.check('ws_connect', 'ip').ok).toBe(false);
    now = 1900;
    for (let i = 0; i < 3; i++) expect(limiter.take('ws_connect', 'ip').ok).toBe(true);
    expect(limiter.take('ws_connect', 'ip').ok).toBe(false);
    now = 2899;
    limiter.sweep();
    expect(limiter.take('ws_connect', 'ip')).toEqual({ ok: false, retryAfterMs: 1 });
    now = 2900;
    expect(limiter.take('ws_connect', 'ip').ok).toBe(true);
    now = 10_000;
    limiter.sweep();
    expect(limiter.size).toBe(0);
    limiter.close();
  });
});
