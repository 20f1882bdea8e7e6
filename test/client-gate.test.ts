import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadClientGate } from '../host/infra/client-gate';
import type { RawSettings } from '../runtime/contracts/settings';
import { expectError, freshUsername } from './support/accounts';
import type { OpenDatabase } from '../host/infra/database';
import { inProcessApp, type InProcessApp } from './support/app';
import { freshDatabase } from './support/database';

/**
 * Each gate is a real module file loaded through the `client_gate` setting.
 * A gate records what it was called with on `globalThis.__gateCalls` (the
 * dynamic import runs in this process), so tests can see the minimised
 * context and whether the gate ran at all.
 */
const GATES: Record<string, string> = {
  'record.mjs': `export default async function gate(input) { (globalThis.__gateCalls ??= []).push(input); return { action: 'skip' }; }`,
  'allow.mjs': `export default async () => { (globalThis.__gateCalls ??= []).push('allow'); return { action: 'allow' }; }`,
  'deny.mjs': `export default async (input) => { (globalThis.__gateCalls ??= []).push(input); return { action: 'deny', reason: 'datacenter_ip' }; }`,
  'crash.mjs': `export default async () => { (globalThis.__gateCalls ??= []).push('crash'); throw new Error('gate blew up'); }`,
  'sync-crash.mjs': `export default () => { throw new TypeError('not even async'); }`,
  'hang.mjs': `export default () => { (globalThis.__gateCalls ??= []).push('hang'); return new Promise(() => {}); }`,
  'garbage-number.mjs': `export default async () => 42;`,
  'garbage-action.mjs': `export default async () => ({ action: 'maybe' });`,
  'garbage-deny.mjs': `export default async () => ({ action: 'deny' });`,
  'garbage-null.mjs': `export default async () => null;`,
  'no-default.mjs': `export const gate = async () => ({ action: 'skip' });`,
  'broken-syntax.mjs': `export default async () => {`,
};

let dir: string;
// One database for the file: each configuration is an in-process app over it, not a server of its own.
let database: OpenDatabase;
beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'svc-gates-'));
  for (const [name, source] of Object.entries(GATES)) writeFileSync(path.join(dir, name), source);
  database = await freshDatabase();
});
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await database.close();
});

const calls = (): unknown[] => ((globalThis as { __gateCalls?: unknown[] }).__gateCalls ??= []);
const resetCalls = () => void calls().splice(0);

async function withGate(gate: string, extra: RawSettings, run: (s: InProcessApp) => Promise<void>): Promise<void> {
  const s = await inProcessApp({ client_gate: path.join(dir, gate), ...extra }, { database });
  resetCalls();
  try {
    await run(s);
  } finally {
    await s.close();
  }
}

const register = (s: InProcessApp, body: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  s.call('POST', '/api/v1/auth/register', { body: { username: freshUsername(), password: 'password1', ...body }, headers });
const exists = async (s: InProcessApp, username: string) =>
  (await s.ctx.db.selectFrom('players').select('id').where('username', '=', username).executeTakeFirst()) !== undefined;

describe('client gate on /auth/register', () => {
  it('passes a skip through and sees only the minimised context: ip, headers without credentials, path, no password', async () => {
    await withGate('record.mjs', {}, async (s) => {
      const res = await register(s, { password: 'secret-password-1' }, { 'x-client-version': '1.2.3', cookie: 'a=b', authorization: 'Bearer nope' });
      expect(res.status).toBe(200);
      expect(calls()).toHaveLength(1);
      const input = calls()[0] as Record<string, any>;
      expect(Object.keys(input).sort()).toEqual(['headers', 'ip', 'path']);
      expect(input.path).toBe('/api/v1/auth/register');
      expect(input.ip).toMatch(/127\.0\.0\.1|::1/);
      expect(input.headers['x-client-version']).toBe('1.2.3');
      expect(input.headers.cookie).toBeUndefined();
      expect(input.headers.authorization).toBeUndefined();
      expect(JSON.stringify(input)).not.toContain('secret-password-1');
    });
  });

  it("accepts {action: 'allow'} like skip", async () => {
    await withGate('allow.mjs', {}, async (s) => {
      expect((await register(s)).status).toBe(200);
      expect(calls()).toEqual(['allow']);
    });
  });

  it('answers a denial with 403 client_gate_denied and its reason, creating nothing', async () => {
    await withGate('deny.mjs', {}, async (s) => {
      const username = freshUsername();
      const res = await register(s, { username });
      expectError(res, 403, 'client_gate_denied');
      expect(res.body.error.details).toEqual({ reason: 'datacenter_ip' });
      expect(await exists(s, username)).toBe(false);
    });
  });

  it('runs after field presence and before the registration mode and field rules', async () => {
    await withGate('deny.mjs', { registration: 'closed' }, async (s) => {
      expectError(await s.call('POST', '/api/v1/auth/register', { body: { username: 'someone' } }), 400, 'missing_field');
      expect(calls()).toHaveLength(0);
      // Closed registration and an invalid username: the gate answers first.
      expectError(await register(s, { username: 'x' }), 403, 'client_gate_denied');
      expect(calls()).toHaveLength(1);
    });
  });

  it('runs after the rate limiter: a limited request never reaches the gate', async () => {
    await withGate('record.mjs', { rate_limits: { register: { limit: 1, window: 60_000 } } }, async (s) => {
      expect((await register(s)).status).toBe(200);
      expectError(await register(s), 429, 'rate_limited');
      expect(calls()).toHaveLength(1);
    });
  });

  it('is not consulted on login, refresh or logout', async () => {
    await withGate('deny.mjs', {}, async (s) => {
      await s.call('POST', '/api/v1/auth/login', { body: { username: 'nobody_here', password: 'password1' } });
      await s.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: 'x'.repeat(43) } });
      await s.call('POST', '/api/v1/auth/logout');
      expect(calls()).toHaveLength(0);
    });
  });

  for (const gate of ['crash.mjs', 'sync-crash.mjs', 'garbage-number.mjs', 'garbage-action.mjs', 'garbage-deny.mjs', 'garbage-null.mjs']) {
    it(`fails closed with client_gate_unavailable when the gate misbehaves (${gate})`, async () => {
      await withGate(gate, {}, async (s) => {
        const username = freshUsername();
        const res = await register(s, { username });
        expectError(res, 403, 'client_gate_denied');
        expect(res.body.error.details).toEqual({ reason: 'client_gate_unavailable' });
        expect(await exists(s, username)).toBe(false);
        expect(JSON.stringify(res.body)).not.toContain('blew up');
      });
    });
  }

  it('fails closed when the gate hangs past client_gate_timeout', async () => {
    await withGate('hang.mjs', { client_gate_timeout: 150 }, async (s) => {
      const res = await register(s);
      expectError(res, 403, 'client_gate_denied');
      expect(res.body.error.details.reason).toBe('client_gate_unavailable');
      expect(calls()).toEqual(['hang']);
    });
  });

  it("lets requests through a crashing or hanging gate when client_gate_on_error is 'skip'", async () => {
    await withGate('crash.mjs', { client_gate_on_error: 'skip' }, async (s) => {
      expect((await register(s)).status).toBe(200);
      expect(calls()).toEqual(['crash']);
    });
    await withGate('hang.mjs', { client_gate_on_error: 'skip', client_gate_timeout: 150 }, async (s) => {
      expect((await register(s)).status).toBe(200);
    });
  });

  it("still honours a real denial when client_gate_on_error is 'skip'", async () => {
    await withGate('deny.mjs', { client_gate_on_error: 'skip' }, async (s) => {
      const res = await register(s);
      expectError(res, 403, 'client_gate_denied');
      expect(res.body.error.details.reason).toBe('datacenter_ip');
    });
  });
});

describe('loading the gate module', () => {
  it('is a no-op when unset', async () => {
    expect(await loadClientGate(undefined)).toBeNull();
  });

  it('stops the boot, naming the setting, when the module cannot be used', async () => {
    for (const file of ['no-default.mjs', 'broken-syntax.mjs', 'missing.mjs']) {
      await expect(loadClientGate(path.join(dir, file))).rejects.toThrow(/client_gate/);
    }
  });

  it('resolves a relative path against the working directory', async () => {
    const gate = await loadClientGate(path.basename(path.join(dir, 'allow.mjs')), dir);
    expect(typeof gate).toBe('function');
  });
});
