import { randomUUID, hkdfSync } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { SignJWT } from 'jose';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { route, type Auth, type Route } from '../handlers/contract';
import { allRoutes } from '../handlers/routes';
import { runOps } from '../host/ops/commands';
import { parseSettings } from '../runtime/contracts/settings';
import { CAPABILITIES, type Capability } from '../runtime/contracts/capabilities';
import { writeAudit } from '../runtime/changes/audit';
import { registerPlayer } from './support/accounts';
import { expectOpsDenied, OPS_SECRET, opsGet, opsToken } from './support/ops';
import { startTestServer, type TestServer } from './support/server';

/**
 * Who may call the operator plane: deny by default, one 403 for every cause,
 * one capability class per route, and how an operator is named on audit rows.
 */

const Ok = z.object({ ok: z.literal(true) });

/** A test-only route per capability class, plus the mistakes a route table could hold. */
function probeRoutes(): Route[] {
  const routes = CAPABILITIES.map((capability) =>
    route({
      method: 'GET',
      path: `/api/v1/ops/probe/${capability}`,
      summary: `probe (${capability})`,
      tag: 'test',
      auth: 'operator',
      capability,
      rate: 'api',
      response: Ok,
      errors: [],
      handle: async () => ({ ok: true as const }),
    }),
  );
  // A mutation that records its caller, the way every ops mutation will.
  routes.push(
    route({
      method: 'POST',
      path: '/api/v1/ops/probe/audited',
      summary: 'probe (audited)',
      tag: 'test',
      auth: 'operator',
      capability: 'config',
      rate: 'api',
      response: Ok,
      errors: [],
      handle: async ({ ctx, operator }) => {
        await writeAudit(ctx.db, ctx, { actor: operator.actor, action: 'probe.audited', outcome: 'ok', succeeded: 1 });
        return { ok: true as const };
      },
    }),
  );
  // Declared without a class (only a cast gets past the type), and declared for players under the ops path.
  const unclassed = { method: 'GET', path: '/api/v1/ops/probe/unclassed', summary: 'x', tag: 'test', auth: 'operator', rate: 'api', response: Ok, errors: [], handle: async () => ({ ok: true }) };
  routes.push(route(unclassed as unknown as Parameters<typeof route<'none'>>[0]));
  routes.push(
    route({ method: 'GET', path: '/api/v1/ops/probe/for-players', summary: 'x', tag: 'test', auth: 'player' as Auth as 'player', rate: 'api', response: Ok, errors: [], handle: async () => ({ ok: true as const }) }),
  );
  return routes;
}

let open: TestServer;
let closed: TestServer;
beforeAll(async () => {
  [open, closed] = await Promise.all([startTestServer({ ops_secret: OPS_SECRET }, { extraRoutes: probeRoutes() }), startTestServer({}, { extraRoutes: probeRoutes() })]);
});
afterAll(async () => {
  await Promise.all([open.close(), closed.close()]);
});

describe('the ops plane with no secret configured', () => {
  it('answers 403 forbidden with empty details to everything: any bearer, none, every route and method', async () => {
    const player = await registerPlayer(closed);
    for (const bearer of [null, OPS_SECRET, player.access_token, 'x'.repeat(40), await opsToken(['read'])]) {
      expectOpsDenied(await opsGet(closed, '/stats', bearer));
      expectOpsDenied(await opsGet(closed, '/probe/read', bearer));
      expectOpsDenied(await opsGet(closed, '/players', bearer));
    }
    expectOpsDenied(await closed.call('GET', '/api/v1/ops'));
    expectOpsDenied(await closed.call('DELETE', '/api/v1/ops/stats', { token: OPS_SECRET }));
  });
});

describe('the ops secret as bearer', () => {
  it('opens every class; a wrong, truncated or extended secret, a player token or no bearer is the same 403', async () => {
    for (const c of CAPABILITIES) expect((await opsGet(open, `/probe/${c}`)).status).toBe(200);
    expect((await opsGet(open, '/stats')).status).toBe(200);
    const player = await registerPlayer(open);
    for (const bearer of [null, OPS_SECRET.slice(0, -1), `${OPS_SECRET}x`, OPS_SECRET.toUpperCase(), player.access_token, 'a.b.c']) {
      expectOpsDenied(await opsGet(open, '/stats', bearer));
    }
    // A player token never reaches the player routes' resolver here: a valid one is no credential at all.
    expectOpsDenied(await opsGet(open, '/probe/read', player.access_token));
  });

  it('answers an undeclared path or method under /ops with the same 403, never 404', async () => {
    expectOpsDenied(await opsGet(open, '/nowhere'));
    expectOpsDenied(await opsGet(open, '/players/guests/purge'));
    expectOpsDenied(await open.call('POST', '/api/v1/ops/stats', { token: OPS_SECRET, body: {} }));
    expectOpsDenied(await open.call('GET', '/api/v1/ops', { token: OPS_SECRET }));
    // Outside the plane an unknown path is still a 404.
    expect((await open.call('GET', '/api/v1/opsx', { token: OPS_SECRET })).status).toBe(404);
  });

  it('denies a route that declares no class, and a route under /ops declared for players, whoever calls', async () => {
    const player = await registerPlayer(open);
    for (const p of ['/probe/unclassed', '/probe/for-players']) {
      expectOpsDenied(await opsGet(open, p));
      expectOpsDenied(await opsGet(open, p, await opsToken([...CAPABILITIES])));
      expectOpsDenied(await opsGet(open, p, player.access_token));
    }
  });

  it('spends the address bucket before looking at the credential, so guessing is rate limited', async () => {
    const s = await startTestServer({ ops_secret: OPS_SECRET, rate_limits: { api: { limit: 3, window: 60_000 } } });
    try {
      const answers = [];
      for (let i = 0; i < 4; i++) answers.push((await opsGet(s, '/stats', `guess-${i}`)).status);
      expect(answers).toEqual([403, 403, 403, 429]);
    } finally {
      await s.close();
    }
  });
});

describe('minted operator tokens', () => {
  for (const cls of CAPABILITIES) {
    it(`a token of ${cls} opens only ${cls} routes, and every other class is refused on them`, async () => {
      const only = await opsToken([cls]);
      for (const c of CAPABILITIES) {
        const res = await opsGet(open, `/probe/${c}`, only);
        if (c === cls) expect(res.status).toBe(200);
        else expectOpsDenied(res);
      }
      const others = await opsToken(CAPABILITIES.filter((c) => c !== cls));
      expectOpsDenied(await opsGet(open, `/probe/${cls}`, others));
    });
  }

  it('every read route is open to a read token', async () => {
    const read = await opsToken(['read']);
    for (const p of ['/stats', '/features', '/players', '/audit']) expect((await opsGet(open, p, read)).status).toBe(200);
  });

  it('refuses an expired token, one signed with another secret, a tampered one, and one past the longest lifetime', async () => {
    const expired = await opsToken(['read'], { ttlSeconds: 60, now: Date.now() - 10 * 60_000 });
    expectOpsDenied(await opsGet(open, '/stats', expired));
    // No grace after its lifetime: expired two seconds ago is expired.
    expectOpsDenied(await opsGet(open, '/stats', await opsToken(['read'], { ttlSeconds: 60, now: Date.now() - 62_000 })));
    // Minted on a machine whose clock runs half a minute ahead, it works at once.
    expect((await opsGet(open, '/stats', await opsToken(['read'], { ttlSeconds: 60, now: Date.now() + 30_000 }))).status).toBe(200);
    expectOpsDenied(await opsGet(open, '/stats', await opsToken(['read'], { secret: `${OPS_SECRET}-other` })));
    const good = await opsToken(['read']);
    const [h, p, sig] = good.split('.') as [string, string, string];
    const widened = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(p, 'base64url').toString()), caps: ['read', 'erasure'] })).toString('base64url');
    expectOpsDenied(await opsGet(open, '/probe/erasure', `${h}.${widened}.${sig}`));
    // Signed correctly (the documented derivation), but claiming more than the rules allow.
    const key = new Uint8Array(hkdfSync('sha256', OPS_SECRET, 'svc ops', 'svc ops token v1', 32));
    const sign = (claims: Record<string, unknown>, ttl: number, typ = 'svc-ops+jwt') =>
      new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ }).setIssuer('svc').setAudience('svc-ops').setIssuedAt().setExpirationTime(Math.floor(Date.now() / 1000) + ttl).setJti(randomUUID()).sign(key);
    expect((await opsGet(open, '/stats', await sign({ caps: ['read'] }, 600))).status).toBe(200);
    expectOpsDenied(await opsGet(open, '/stats', await sign({ caps: ['read'] }, 25 * 3600)));
    expectOpsDenied(await opsGet(open, '/stats', await sign({ caps: ['read', 'root'] }, 600)));
    expectOpsDenied(await opsGet(open, '/stats', await sign({ caps: 'read' }, 600)));
    expectOpsDenied(await opsGet(open, '/stats', await sign({ caps: ['read'] }, 600, 'JWT')));
  });

  it('never writes the secret or a token to the log', async () => {
    const token = await opsToken(['read']);
    await opsGet(open, '/stats', token);
    await opsGet(open, '/stats', `${OPS_SECRET}x`);
    const text = JSON.stringify(open.logs);
    expect(text).toContain('ops_denied');
    expect(text).not.toContain(OPS_SECRET);
    expect(text).not.toContain(token.split('.')[2]);
  });
});

describe('x-svc-operator and audit attribution', () => {
  /** Runs the audited probe and answers the audit row it wrote. */
  async function attributed(bearer: string, label?: string | string[]): Promise<Record<string, unknown>> {
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${open.url}/api/v1/ops/probe/audited`, { method: 'POST', headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', 'content-length': '2' } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      // An array sends the header once per value, as a proxy or a careless client might.
      if (label !== undefined) req.setHeader('x-svc-operator', label);
      req.end('{}');
    });
    expect(status).toBe(200);
    const res = await opsGet(open, '/audit?action=probe.audited&limit=1');
    expect(res.status).toBe(200);
    return res.body.data[0];
  }

  it('names the person the header gives, unattested, behind the shared secret', async () => {
    expect(await attributed(OPS_SECRET, 'alice')).toMatchObject({ actor_id: 'ops_secret', actor_display: 'alice', actor_source: 'ops_secret', actor_attested: false, outcome: 'ok', succeeded_count: 1 });
    expect(await attributed(OPS_SECRET, 'a'.repeat(64))).toMatchObject({ actor_display: 'a'.repeat(64) });
  });

  it('drops a header that is empty, multi-valued, over 64 bytes or not printable ASCII', async () => {
    for (const label of ['', ['alice', 'bob'], 'alice, bob', 'a'.repeat(65), 'tab\there', 'caf\u00e9']) {
      expect((await attributed(OPS_SECRET, label)).actor_display, JSON.stringify(label)).toBe('operator');
    }
    expect((await attributed(OPS_SECRET)).actor_display).toBe('operator');
  });

  it('records a name signed into a token as attested, over whatever the header says', async () => {
    const named = await opsToken(['config'], { name: 'carol' });
    const row = await attributed(named, 'mallory');
    expect(row).toMatchObject({ actor_display: 'carol', actor_source: 'ops_token', actor_attested: true });
    expect(String(row.actor_id)).toMatch(/^ops_token:[0-9a-f-]{36}$/);
    expect(await attributed(await opsToken(['config']), 'dave')).toMatchObject({ actor_display: 'dave', actor_source: 'ops_token', actor_attested: false });
  });
});

describe('the route table and the API document', () => {
  it('gives every ops route exactly one known class, and no other route the operator credential', () => {
    const routes = allRoutes();
    const ops = routes.filter((r) => r.path.startsWith('/api/v1/ops/'));
    expect(ops.length).toBeGreaterThanOrEqual(4);
    for (const r of ops) {
      expect(r.spec.auth, `${r.method} ${r.path}`).toBe('operator');
      expect(CAPABILITIES, `${r.method} ${r.path}`).toContain(r.spec.capability);
    }
    for (const r of routes.filter((r) => !r.path.startsWith('/api/v1/ops/'))) expect(r.spec.auth, r.path).not.toBe('operator');
  });

  it('shows the operator scheme and each ops route’s class', async () => {
    const doc = (await open.call('GET', '/api/v1/openapi.json')).body;
    expect(doc.components.securitySchemes.operator).toMatchObject({ type: 'http', scheme: 'bearer' });
    const stats = doc.paths['/api/v1/ops/stats'].get;
    expect(stats.security).toEqual([{ operator: ['read'] }]);
    expect(stats['x-svc-capability']).toBe('read');
    expect(Object.keys(stats.responses)).toContain('403');
    expect(doc.paths['/api/v1/ops/players/{id}'].get.security).toEqual([{ operator: ['read'] }]);
    const list = doc.paths['/api/v1/ops/players'].get.parameters.map((p: { name: string }) => p.name);
    expect(list).toEqual(expect.arrayContaining(['limit', 'page', 'offset', 'sort', 'order', 'q', 'guest']));
  });
});

describe('the ops_secret setting', () => {
  it('has no default, and a short or spaced secret stops the boot without echoing it', () => {
    expect(parseSettings({}).settings.ops_secret).toBeUndefined();
    for (const bad of ['short-secret', `${'x'.repeat(20)} ${'y'.repeat(20)}`]) {
      let message = '';
      try {
        parseSettings({ ops_secret: bad });
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toContain('ops_secret');
      expect(message).not.toContain(bad);
    }
  });
});

describe('npm run ops -- mint-token', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-ops-'));
  const config = path.join(dir, 'settings.json');
  writeFileSync(config, JSON.stringify({ ops_secret: OPS_SECRET }));
  const run = async (argv: string[], env: NodeJS.ProcessEnv = {}) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runOps(argv, env, { out: (l) => out.push(l), err: (l) => err.push(l) });
    return { code, out: out.join('\n'), err: err.join('\n') };
  };

  it('prints a token the node accepts for exactly the classes asked', async () => {
    const minted = await run(['mint-token', '--caps', 'read,player_data', '--ttl', '15m', '--config', config]);
    expect(minted.code).toBe(0);
    const token = minted.out.trim();
    expect(token.split('.')).toHaveLength(3);
    expect(minted.err).toMatch(/expires \d{4}-/);
    expect((await opsGet(open, '/probe/player_data', token)).status).toBe(200);
    expect((await opsGet(open, '/probe/read', token)).status).toBe(200);
    expectOpsDenied(await opsGet(open, '/probe/erasure', token));
    // SVC_CONFIG works as it does for the node.
    expect((await run(['mint-token', '--caps', 'read'], { SVC_CONFIG: config })).code).toBe(0);
  });

  it('refuses unknown classes, a bad or too long lifetime, a bad name, and a settings file without a secret', async () => {
    const empty = path.join(dir, 'empty.json');
    writeFileSync(empty, '{}');
    for (const argv of [
      ['mint-token', '--caps', 'read,root', '--config', config],
      ['mint-token', '--caps', '', '--config', config],
      ['mint-token', '--caps', 'read', '--ttl', '25h', '--config', config],
      ['mint-token', '--caps', 'read', '--ttl', 'soon', '--config', config],
      ['mint-token', '--caps', 'read', '--name', 'a,b', '--config', config],
      ['mint-token', '--caps', 'read', '--config', empty],
      ['mint-token', '--caps', 'read', '--bogus', '--config', config],
      ['frobnicate'],
    ]) {
      const r = await run(argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.out).toBe('');
    }
    expect((await run(['help'])).out).toContain('mint-token');
  });

  it('runs as a command: one line on stdout, exit 0', () => {
    const child = spawnSync(process.execPath, ['--import', 'tsx', 'host/ops/main.ts', 'mint-token', '--caps', 'read', '--ttl', '90s', '--config', config], { encoding: 'utf8' });
    expect(child.status, child.stderr).toBe(0);
    expect(child.stdout.trim().split('\n')).toHaveLength(1);
    expect(child.stdout).not.toContain(OPS_SECRET);
  });
});
