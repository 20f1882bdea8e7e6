import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerPlayer } from './support/accounts';
import type { Answer } from './support/calls';
import { expectOpsDenied, OPS_SECRET } from './support/ops';
import { startTestServer, type TestServer } from './support/server';

/**
 * The console's browser session (`/console/session`, two cookies, 12 hours), as a browser and a
 * cross-site attacker would meet it: cookies, CSRF header, expiry, the
 * bearer's precedence, labels, the rate limit, and the 404 while it is off.
 */

let offset = 0;
const clock = { now: () => Date.now() + offset };
const HOUR = 3600 * 1000;

interface Signed {
  cookie: string;
  csrf: string;
  setCookies: string[];
  body: any;
}

async function signIn(s: TestServer, body: Record<string, unknown> = { secret: OPS_SECRET }, headers: Record<string, string> = {}): Promise<Signed> {
  const res = await s.call('POST', '/console/session', { body, headers });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const setCookies = res.headers.getSetCookie();
  const cookie = setCookies.map((c) => c.split(';')[0]!).join('; ');
  return { cookie, csrf: res.body.data.csrf, setCookies, body: res.body };
}

function withSession(signed: Signed, csrf: string | null = signed.csrf): Record<string, string> {
  return { cookie: signed.cookie, ...(csrf !== null ? { 'x-csrf-token': csrf } : {}) };
}

function expectUnknownPath(res: Answer, method: string, path: string): void {
  expect(res.status).toBe(404);
  expect(res.body).toEqual({ error: { code: 'not_found', message: `No route for ${method} ${path}.`, details: {} } });
}

describe('console off (the default)', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ ops_secret: OPS_SECRET });
  });
  afterAll(() => s.close());

  it('answers every session route and the console itself exactly as an unknown path', async () => {
    for (const method of ['GET', 'POST', 'DELETE']) {
      const res = await s.call(method, '/console/session', method === 'POST' ? { body: { secret: OPS_SECRET } } : {});
      expectUnknownPath(res, method, '/console/session');
      expect(res.headers.getSetCookie()).toEqual([]);
    }
    expectUnknownPath(await s.call('GET', '/console'), 'GET', '/console');
    expectUnknownPath(await s.call('GET', '/console/players'), 'GET', '/console/players');
  });
});

describe('console on', () => {
  let s: TestServer;
  let other: TestServer;
  beforeAll(async () => {
    [s, other] = await Promise.all([
      startTestServer({ ops_secret: OPS_SECRET, console: true, trusted_proxies: ['127.0.0.1'] }, { clock }),
      startTestServer({ ops_secret: OPS_SECRET, console: true, console_erasure: true, rate_limits: { auth: { limit: 3, window: 60_000 } } }, { clock }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([s.close(), other.close()]);
  });

  it('opens a session with the secret: two Lax cookies on path /, the session one HttpOnly, no Secure over plain HTTP', async () => {
    const before = Math.floor(clock.now() / 1000);
    const signed = await signIn(s);
    expect(signed.body).toEqual({ data: { display: 'operator', expires_at: expect.any(Number), csrf: expect.any(String) } });
    expect(signed.body.data.expires_at).toBeGreaterThanOrEqual(before + 12 * 3600);
    expect(signed.body.data.expires_at).toBeLessThanOrEqual(Math.floor(clock.now() / 1000) + 12 * 3600);
    const [session, csrf] = signed.setCookies;
    expect(session).toMatch(/^svc_console=[A-Za-z0-9_-]{32,};/);
    expect(csrf).toBe(`svc_console_csrf=${signed.csrf}; Max-Age=43200; Path=/; SameSite=Lax`);
    const attrs = (c: string) => c.split(';').slice(1).map((a) => a.trim()).sort();
    expect(attrs(session!)).toEqual(['HttpOnly', 'Max-Age=43200', 'Path=/', 'SameSite=Lax']);
    // The session id is never the CSRF token, nor in the body.
    expect(JSON.stringify(signed.body)).not.toContain(session!.split(';')[0]!.split('=')[1]);
  });

  it('marks both cookies Secure when a trusted proxy says the request came over TLS', async () => {
    const signed = await signIn(s, { secret: OPS_SECRET }, { 'x-forwarded-proto': 'https' });
    for (const c of signed.setCookies) expect(c.split(';').map((a) => a.trim())).toContain('Secure');
  });

  it("refuses another site's page signing in (login CSRF): a body that is not JSON, a foreign Origin, a cross-site Sec-Fetch-Site", async () => {
    const host = `127.0.0.1:${s.port}`;
    const refused: Record<string, string>[] = [
      // A cross-site form or no-cors fetch: text/plain needs no preflight.
      { 'content-type': 'text/plain', origin: 'http://evil.example' },
      { 'content-type': 'text/plain' },
      { 'content-type': 'application/x-www-form-urlencoded' },
      { origin: 'http://evil.example' },
      { origin: `https://${host}` },
      { 'sec-fetch-site': 'cross-site', origin: `http://${host}` },
      { 'sec-fetch-site': 'same-site' },
    ];
    for (const headers of refused) {
      const res = await s.call('POST', '/console/session', { body: { secret: OPS_SECRET }, headers });
      expect(res.status, JSON.stringify(headers)).toBe(403);
      expect(res.body.error.code).toBe('forbidden');
      expect(res.headers.getSetCookie()).toEqual([]);
    }
    // The console's own page, a browser navigating by hand, and tools that are not browsers.
    const admitted: Record<string, string>[] = [{ origin: `http://${host}` }, { 'sec-fetch-site': 'same-origin', origin: 'http://proxy-rewrote-the-host' }, { 'sec-fetch-site': 'none' }, { 'content-type': 'application/json; charset=utf-8' }];
    for (const headers of admitted) await signIn(s, { secret: OPS_SECRET }, headers);
  });

  it('refuses a wrong secret, a minted-token-shaped guess and a bad body', async () => {
    for (const secret of ['nope', OPS_SECRET + 'x', 'a.b.c']) {
      const res = await s.call('POST', '/console/session', { body: { secret } });
      expectOpsDenied(res);
      expect(res.headers.getSetCookie()).toEqual([]);
    }
    expect((await s.call('POST', '/console/session', { body: {} })).status).toBe(400);
  });

  it('holds the label to the operator header shape and defaults it to operator', async () => {
    const named = await signIn(s, { secret: OPS_SECRET, label: 'Ada Lovelace' });
    expect(named.body.data.display).toBe('Ada Lovelace');
    for (const label of ['', 'a,b', 'Zoë', 'x'.repeat(65), 'tab\there']) {
      const res = await s.call('POST', '/console/session', { body: { secret: OPS_SECRET, label } });
      expect(res.status, label).toBe(422);
      expect(res.body.error.code).toBe('validation_failed');
    }
    const read = await s.call('GET', '/console/session', { headers: withSession(named) });
    expect(read.body).toEqual({ data: { display: 'Ada Lovelace', source: 'console', caps: ['read', 'player_data', 'config'], attested: false } });
  });

  it('reads the session only with the cookie and the matching x-csrf-token header', async () => {
    const signed = await signIn(s);
    expect((await s.call('GET', '/console/session')).status).toBe(401);
    expect((await s.call('GET', '/console/session', { headers: { cookie: 'svc_console=forged' } })).status).toBe(401);
    const noHeader = await s.call('GET', '/console/session', { headers: withSession(signed, null) });
    expect(noHeader.status).toBe(403);
    expect(noHeader.body.error.code).toBe('forbidden');
    expect((await s.call('GET', '/console/session', { headers: withSession(signed, signed.csrf.slice(1)) })).status).toBe(403);
    // The CSRF cookie alone, echoed, is not a session.
    expect((await s.call('GET', '/console/session', { headers: { cookie: `svc_console_csrf=${signed.csrf}`, 'x-csrf-token': signed.csrf } })).status).toBe(401);
    const ok = await s.call('GET', '/console/session', { headers: withSession(signed) });
    expect(ok.status).toBe(200);
    expect(ok.body.data.caps).not.toContain('erasure');
  });

  it('opens the ops plane to a console session only with the CSRF header, without erasure unless console_erasure', async () => {
    const signed = await signIn(s);
    expect((await s.call('GET', '/api/v1/ops/stats', { headers: withSession(signed) })).status).toBe(200);
    expectOpsDenied(await s.call('GET', '/api/v1/ops/stats', { headers: withSession(signed, null) }));
    expectOpsDenied(await s.call('GET', '/api/v1/ops/stats', { headers: withSession(signed, 'wrong') }));
    // player_data and config classes are held; erasure is not.
    const player = await registerPlayer(s);
    expect((await s.call('GET', `/api/v1/ops/players/${player.player_id}/export`, { headers: withSession(signed) })).status).toBe(200);
    const erase = await s.call('POST', `/api/v1/ops/players/${player.player_id}/erase`, { headers: withSession(signed), body: { username: player.username } });
    expectOpsDenied(erase);
    expect((await s.call('GET', `/api/v1/ops/players/${player.player_id}`, { token: OPS_SECRET })).status).toBe(200);
  });

  it('lets a bearer win over a cookie, whichever of them is good', async () => {
    const signed = await signIn(s);
    expectOpsDenied(await s.call('GET', '/api/v1/ops/stats', { headers: withSession(signed), token: 'not-the-secret-not-the-secret-000000' }));
    expect((await s.call('GET', '/api/v1/ops/stats', { headers: { cookie: 'svc_console=forged' }, token: OPS_SECRET })).status).toBe(200);
  });

  it('expires sessions 12 hours after creation, however often they are read', async () => {
    const signed = await signIn(s);
    const started = offset;
    try {
      for (const hours of [1, 6, 11.9]) {
        offset = started + hours * HOUR;
        expect((await s.call('GET', '/console/session', { headers: withSession(signed) })).status).toBe(200);
        expect((await s.call('GET', '/api/v1/ops/features', { headers: withSession(signed) })).status).toBe(200);
      }
      offset = started + 12 * HOUR + 1000;
      expect((await s.call('GET', '/console/session', { headers: withSession(signed) })).status).toBe(401);
      expectOpsDenied(await s.call('GET', '/api/v1/ops/features', { headers: withSession(signed) }));
    } finally {
      offset = started;
    }
  });

  it('ends a session on DELETE with the cookie alone, expiring both cookies; answers the same with none', async () => {
    const signed = await signIn(s);
    const res = await s.call('DELETE', '/console/session', { headers: { cookie: signed.cookie } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true });
    const cleared = res.headers.getSetCookie();
    expect(cleared).toHaveLength(2);
    expect(cleared[0]).toMatch(/^svc_console=; Max-Age=0; HttpOnly; Path=\/; SameSite=Lax$/);
    expect(cleared[1]).toMatch(/^svc_console_csrf=; Max-Age=0; Path=\/; SameSite=Lax$/);
    expect((await s.call('GET', '/console/session', { headers: withSession(signed) })).status).toBe(401);
    expectOpsDenied(await s.call('GET', '/api/v1/ops/stats', { headers: withSession(signed) }));
    expect((await s.call('DELETE', '/console/session')).status).toBe(200);
  });

  it('resolves a session only on the node that minted it (a restarted node knows none)', async () => {
    const signed = await signIn(s);
    expect((await other.call('GET', '/console/session', { headers: withSession(signed) })).status).toBe(401);
    expectOpsDenied(await other.call('GET', '/api/v1/ops/stats', { headers: withSession(signed) }));
  });

  it('with console_erasure, a console session erases, attributed to its label on the audit row', async () => {
    const signed = await signIn(other, { secret: OPS_SECRET, label: 'grace' });
    const read = await other.call('GET', '/console/session', { headers: withSession(signed) });
    expect(read.body.data.caps).toEqual(['read', 'player_data', 'config', 'erasure']);
    const player = await registerPlayer(other);
    const erased = await other.call('POST', `/api/v1/ops/players/${player.player_id}/erase`, { headers: withSession(signed), body: { username: player.username } });
    expect(erased.status, JSON.stringify(erased.body)).toBe(200);
    // A console-origin write without the header is refused like any forged cross-site post.
    const again = await registerPlayer(other);
    expectOpsDenied(await other.call('POST', `/api/v1/ops/players/${again.player_id}/erase`, { headers: withSession(signed, null), body: { username: again.username } }));
    const audit = await other.call('GET', `/api/v1/ops/audit?target_id=${player.player_id}`, { token: OPS_SECRET });
    expect(audit.status).toBe(200);
    expect(audit.body.data).toEqual([
      expect.objectContaining({ actor_display: 'grace', actor_source: 'console', actor_attested: false, actor_id: expect.stringMatching(/^console:/), target_id: player.player_id }),
    ]);
    expect(audit.body.data[0].actor_id).not.toContain(signed.cookie.split(';')[0]!.split('=')[1]);
  });

  it('spends the auth rate-limit group on create (3 per window in this deployment)', async () => {
    // One sign-in from this address happened above; a wrong secret spends the bucket too.
    let status = 0;
    let attempts = 0;
    while (attempts < 10) {
      attempts++;
      const res = await other.call('POST', '/console/session', { body: { secret: 'wrong' } });
      status = res.status;
      if (status === 429) {
        expect(res.body.error.code).toBe('rate_limited');
        break;
      }
      expect(status).toBe(403);
    }
    expect(status).toBe(429);
    expect(attempts).toBeLessThanOrEqual(3);
    // Reads of the session are not the auth group.
    expect((await other.call('GET', '/console/session')).status).toBe(401);
  });

  it('declares the session routes in the OpenAPI document', async () => {
    const doc = await s.call('GET', '/api/v1/openapi.json');
    expect(Object.keys(doc.body.paths['/console/session']).sort()).toEqual(['delete', 'get', 'post']);
  });
});
