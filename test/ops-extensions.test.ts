import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateToLatest } from '../runtime/platform/migrate';
import { expectError, registerPlayer, type TestPlayer } from './support/accounts';
import { expectOpsDenied, OPS_SECRET, opsGet, opsPost, opsToken } from './support/ops';
import { startTestServer, type TestServer } from './support/server';

/** Extensions: the manifest checked at boot, `/ops/ext/:extension/:action`, RPC, features, export and erase hooks. */

const here = path.dirname(fileURLToPath(import.meta.url));
const GREETER = path.join(here, '../examples/extensions/greeter.ts');
const FAULTY = path.join(here, 'fixtures/extensions/faulty.ts');
const BAD_MANIFEST = path.join(here, 'fixtures/extensions/bad-manifest.ts');

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ ops_secret: OPS_SECRET, extensions: [GREETER, FAULTY] });
});
afterAll(async () => {
  await s.close();
});

const ext = (method: string, path: string, options: { body?: unknown; token?: string } = {}) =>
  s.call(method, `/api/v1/ops/ext${path}`, { token: options.token ?? OPS_SECRET, ...(options.body !== undefined ? { body: options.body } : {}) });
const auditOf = (action: string) => s.ctx.db.selectFrom('ops_audit_entries').selectAll().where('action', '=', action).orderBy('occurred_at').execute();
const exists = async (id: string) => (await s.ctx.db.selectFrom('players').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;

async function greet(p: TestPlayer, text: string): Promise<void> {
  const res = await s.call('POST', '/api/v1/rpc/greeter.set', { token: p.access_token, body: { params: { text } } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body).toEqual({ type: 'rpc.ok', payload: { result: { text } } });
}

describe('the API document', () => {
  it('lists the installed extensions\' actions with their capability class', async () => {
    const doc = await s.call('GET', '/api/v1/openapi.json');
    const op = doc.body.paths['/api/v1/ops/ext/greeter/greeting']?.get;
    expect(op).toBeDefined();
    expect(op['x-svc-capability']).toBe('player_data');
  });
});

describe('installed extensions', () => {
  it('are reported by /ops/features with their versions and declared seams', async () => {
    const res = await opsGet(s, '/features');
    expect(res.status).toBe(200);
    expect(res.body.data.extensions).toEqual([
      { name: 'greeter', version: '1.0.0', capabilities: ['rpc', 'actions', 'export', 'erase'].map((name) => ({ name, enabled: true })) },
      { name: 'faulty', version: '0.0.1-test', capabilities: ['actions', 'export'].map((name) => ({ name, enabled: true })) },
    ]);
  });

  it('serve their RPC methods as <extension>.<name>, with their declared codes', async () => {
    const p = await registerPlayer(s);
    const hello = await s.call('POST', '/api/v1/rpc/greeter.hello', { token: p.access_token, body: { params: {} } });
    expect(hello.body).toEqual({ type: 'rpc.ok', payload: { result: { text: 'Hello!' } } });
    await greet(p, 'ahoy');
    expect((await s.call('POST', '/api/v1/rpc/greeter.hello', { token: p.access_token, body: { params: {} } })).body.payload.result).toEqual({ text: 'ahoy' });
    const bad = await s.call('POST', '/api/v1/rpc/greeter.set', { token: p.access_token, body: { params: { text: 7 } } });
    expect(bad.body.error.code).toBe('rpc.invalid_params');
    expect((await s.call('POST', '/api/v1/rpc/greeter.nope', { token: p.access_token, body: { params: {} } })).body.error.code).toBe('rpc.unknown_method');
  });
});

describe('/ops/ext/:extension/:action', () => {
  it('answers 403 forbidden with empty details for an unknown extension, action or method', async () => {
    const p = await registerPlayer(s);
    expectOpsDenied(await ext('GET', `/nobody/greeting?player_id=${p.player_id}`));
    expectOpsDenied(await ext('GET', `/greeter/nothing?player_id=${p.player_id}`));
    expectOpsDenied(await ext('POST', '/greeter/greeting', { body: { player_id: p.player_id } }));
    expectOpsDenied(await ext('PUT', '/greeter/hold', { body: { player_id: p.player_id } }));
    expectOpsDenied(await ext('GET', '/greeter'));
    expectOpsDenied(await ext('GET', '/greeter/greeting/extra'));
    // Nothing that was refused reached the trail.
    expect(await auditOf('ext.greeter.hold')).toHaveLength(0);
  });

  it('enforces each action’s own capability class, and refuses without a credential', async () => {
    const p = await registerPlayer(s);
    await greet(p, 'hi');
    const query = `/greeter/greeting?player_id=${p.player_id}`;
    expectOpsDenied(await s.call('GET', `/api/v1/ops/ext${query}`));
    expectOpsDenied(await ext('GET', query, { token: await opsToken(['read', 'config', 'erasure']) }));
    expect((await ext('GET', query, { token: await opsToken(['player_data']) })).status).toBe(200);
    const hold = { body: { player_id: p.player_id, held: false } };
    expectOpsDenied(await ext('POST', '/greeter/hold', { ...hold, token: await opsToken(['read', 'player_data', 'config']) }));
    expect((await ext('POST', '/greeter/hold', { ...hold, token: await opsToken(['erasure']) })).status).toBe(200);
  });

  it('hands a GET action the query string as a map (first value of a repeated key) and answers its object without an envelope', async () => {
    const res = await ext('GET', '/faulty/echo?a=1&b=two&a=3&empty=');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ query: { a: '1', b: 'two', empty: '' } });
    const p = await registerPlayer(s);
    await greet(p, 'hey');
    const greeting = await ext('GET', `/greeter/greeting?player_id=${p.player_id}`);
    expect(greeting.body).toEqual({ player_id: p.player_id, text: 'hey', held: false });
  });

  it('hands other methods the JSON body as a map; a body that is not an object is 400', async () => {
    const p = await registerPlayer(s);
    await greet(p, 'bye');
    const res = await ext('DELETE', '/greeter/clear', { body: { player_id: p.player_id } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ player_id: p.player_id, cleared: true });
    expectError(await ext('GET', `/greeter/greeting?player_id=${p.player_id}`), 404, 'greeter.not_found');
    expectError(await ext('POST', '/greeter/hold', { body: [p.player_id] }), 400, 'invalid_payload');
  });

  it('answers a declared code with its status and the handler’s details', async () => {
    const res = await ext('GET', '/greeter/greeting?player_id=nope');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: { code: 'greeter.invalid_player', message: 'player_id must be a uuid.', details: { field: 'player_id' } } });
    const plain = await ext('PUT', '/faulty/declared', { body: {} });
    expect(plain.status).toBe(409);
    expect(plain.body).toEqual({ error: { code: 'faulty.declared', message: 'declared failure', details: { secret_note: 'kept out of the audit row' } } });
  });

  it('answers 500 internal for an undeclared code, a raising handler or a result that is not an object', async () => {
    for (const [method, action] of [
      ['POST', 'undeclared'],
      ['POST', 'raise'],
      ['GET', 'not_object'],
    ] as const) {
      const res = await ext(method, `/faulty/${action}`, method === 'GET' ? {} : { body: {} });
      expect(res.status, action).toBe(500);
      expect(res.body).toEqual({ error: { code: 'internal', message: expect.any(String), details: {} } });
    }
    expect(s.logs.some((l) => l.event === 'ops_extension_action_failed' && l.code === 'faulty.other')).toBe(true);
  });

  it('audits every non-GET call (ok with a count of 1, or error with only the code), and no GET call', async () => {
    const p = await registerPlayer(s);
    const headers = { 'x-svc-operator': 'alice' };
    expect((await s.call('POST', '/api/v1/ops/ext/greeter/hold', { token: OPS_SECRET, headers, body: { player_id: p.player_id, held: false } })).status).toBe(200);
    const held = (await auditOf('ext.greeter.hold')).filter((r) => r.actor_display === 'alice');
    expect(held).toHaveLength(1);
    expect(held[0]).toMatchObject({ actor_id: 'ops_secret', actor_source: 'ops_secret', outcome: 'ok', succeeded_count: 1, failed_count: 0, target_type: 'extension', target_id: 'greeter' });
    expect(held[0]!.details).toEqual({ method: 'POST' });

    await ext('PUT', '/faulty/declared', { body: {} });
    const declared = await auditOf('ext.faulty.declared');
    expect(declared.length).toBeGreaterThan(0);
    expect(declared.at(-1)).toMatchObject({ outcome: 'error', succeeded_count: 0 });
    expect(declared.at(-1)!.details).toEqual({ method: 'PUT', code: 'faulty.declared' });

    await ext('POST', '/faulty/raise', { body: {} });
    expect((await auditOf('ext.faulty.raise')).at(-1)).toMatchObject({ outcome: 'error', details: { method: 'POST', code: 'internal' } });

    await ext('GET', '/faulty/echo?x=1');
    await ext('GET', `/greeter/greeting?player_id=${p.player_id}`);
    expect(await auditOf('ext.faulty.echo')).toHaveLength(0);
    expect(await auditOf('ext.greeter.greeting')).toHaveLength(0);
  });

  it('keeps an action’s answer when its audit row cannot be written, and logs the row at error level instead', async () => {
    const p = await registerPlayer(s);
    await sql`create or replace function refuse_ext_audit() returns trigger language plpgsql as $$
      begin raise exception 'audit refused'; end $$`.execute(s.ctx.db);
    await sql`create trigger refuse_ext_audit before insert on ops_audit_entries for each row when (new.action = 'ext.greeter.hold') execute function refuse_ext_audit()`.execute(s.ctx.db);
    let res;
    try {
      res = await ext('POST', '/greeter/hold', { body: { player_id: p.player_id, held: false } });
    } finally {
      await sql`drop trigger refuse_ext_audit on ops_audit_entries`.execute(s.ctx.db);
    }
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const logged = s.logs.find((l) => l.event === 'ops_audit_write_failed' && l.action === 'ext.greeter.hold');
    expect(logged).toMatchObject({ level: 'error', actor_id: 'ops_secret', outcome: 'ok', details: { method: 'POST' }, error: expect.stringContaining('audit refused') });
  });
});

describe('export and erase hooks', () => {
  it('export carries each extension’s data under extensions.<name>', async () => {
    const p = await registerPlayer(s);
    await greet(p, 'exported');
    const res = await opsGet(s, `/players/${p.player_id}/export`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data.extensions).toEqual({ greeter: { greeting: 'exported', held: false }, faulty: { rows: 0 } });
  });

  it('an extension failing its export answers 500 ops.export_incomplete with nothing partial', async () => {
    const p = await registerPlayer(s);
    expect((await ext('POST', '/faulty/break_export', { body: { player_id: p.player_id } })).status).toBe(200);
    const res = await opsGet(s, `/players/${p.player_id}/export`);
    expectError(res, 500, 'ops.export_incomplete');
    expect(res.body.error.details).toEqual({ extension: 'faulty' });
    expect(res.body.data).toBeUndefined();
  });

  it('an erase hook refusing aborts the operator erasure: the player, its data and the trail stay as they were', async () => {
    const p = await registerPlayer(s);
    await greet(p, 'keep me');
    expect((await ext('POST', '/greeter/hold', { body: { player_id: p.player_id } })).body).toEqual({ player_id: p.player_id, held: true });
    const refused = await opsPost(s, `/players/${p.player_id}/erase`, { username: p.username });
    expectError(refused, 500, 'player.erase_failed');
    expect(await exists(p.player_id)).toBe(true);
    expect((await s.call('GET', `/api/v1/players/${p.player_id}`, { token: p.access_token })).status).toBe(200);
    expect((await s.ctx.db.selectFrom('ops_audit_entries').select('id').where('action', '=', 'player.erase').where('target_id', '=', p.player_id).execute())).toHaveLength(0);
    expect(s.logs.some((l) => l.event === 'player_erase_failed' && l.player_id === p.player_id && String(l.error).includes('greeter'))).toBe(true);

    // Self-erase goes through the same hooks.
    expectError(await s.call('POST', '/api/v1/players/me/erase', { token: p.access_token, body: { password: 'correct horse' } }), 500, 'player.erase_failed');
    expect(await exists(p.player_id)).toBe(true);

    expect((await ext('POST', '/greeter/hold', { body: { player_id: p.player_id, held: false } })).status).toBe(200);
    expect((await opsPost(s, `/players/${p.player_id}/erase`, { username: p.username })).status).toBe(200);
    expect(await exists(p.player_id)).toBe(false);
    // The extension erased its part first.
    expectError(await ext('GET', `/greeter/greeting?player_id=${p.player_id}`), 404, 'greeter.not_found');
  });
});

describe('while migrations run', () => {
  it('an extension action answers 503 not_ready before its handler runs', async () => {
    let finish!: () => void;
    const gate = new Promise<void>((resolve) => (finish = resolve));
    const held = await startTestServer(
      { ops_secret: OPS_SECRET, extensions: [FAULTY] },
      { waitReady: false, migrate: async (db) => { await gate; return migrateToLatest(db); } },
    );
    try {
      const res = await held.call('POST', '/api/v1/ops/ext/faulty/raise', { token: OPS_SECRET, body: {} });
      expect(res.status).toBe(503);
      expect(res.body.error).toMatchObject({ code: 'not_ready', details: {} });
      finish();
      await held.ready;
      expect(held.logs.some((l) => l.event === 'ops_extension_action_failed')).toBe(false);
      expect((await held.call('GET', '/api/v1/ops/ext/faulty/echo?a=b', { token: OPS_SECRET })).body).toEqual({ query: { a: 'b' } });
    } finally {
      finish();
      await held.close();
    }
  });
});

describe('the extensions setting', () => {
  it('a module that cannot be loaded stops the boot naming it', async () => {
    const missing = path.join(here, 'fixtures/extensions/no-such-extension.ts');
    await expect(startTestServer({ extensions: [GREETER, missing] })).rejects.toThrow(/extensions\.1.*cannot load .*no-such-extension\.ts/);
  });

  it('a bad manifest stops the boot naming the module and each problem', async () => {
    const boot = startTestServer({ extensions: [BAD_MANIFEST] });
    await expect(boot).rejects.toThrow(/bad-manifest\.ts is not a valid extension/);
    await expect(boot).rejects.toThrow(/declares seam erase without providing it/);
    await expect(boot).rejects.toThrow(/provides actions without declaring it/);
    await expect(boot).rejects.toThrow(/internal must be bad\.<reason>/);
  });

  it('the same extension twice stops the boot', async () => {
    await expect(startTestServer({ extensions: [FAULTY, FAULTY] })).rejects.toThrow(/extension faulty is installed twice/);
  });

  it('must be a list of paths', async () => {
    await expect(startTestServer({ extensions: 'greeter.ts' as unknown as string[] })).rejects.toThrow(/'extensions'/);
  });
});
