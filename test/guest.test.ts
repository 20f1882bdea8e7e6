import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OpenDatabase } from '../host/infra/database';
import { parseSettings, type RawSettings, type RegistrationMode } from '../runtime/contracts/settings';
import { expectError, registerPlayer } from './support/accounts';
import { freshDatabase } from './support/database';
import { guestSignIn, guestUpgrade, newDevice, PEPPER_V1, PEPPER_V2 } from './support/guests';
import { startTestServer, type TestServer } from './support/server';

/**
 * Guest create, resume and upgrade over real HTTP against a real database,
 * every refusal of the guest routes with its status and code. The game's declarations are a
 * variable the tests flip; the operator settings differ per server, and the
 * servers of one describe share one database where the test needs that.
 */

let s: TestServer;
let gateDir: string;
let declared = true;
let mode: RegistrationMode | null = null;

beforeAll(async () => {
  gateDir = mkdtempSync(path.join(tmpdir(), 'svc-guest-gate-'));
  writeFileSync(
    path.join(gateDir, 'gate.mjs'),
    `export default async (input) => { (globalThis.__guestGate ??= []).push(input); return input.headers['x-gate'] === 'deny' ? { action: 'deny', reason: 'test_denied' } : { action: 'skip' }; }`,
  );
  s = await startTestServer(
    { guest_verifier_pepper: { v1: PEPPER_V1 }, client_gate: path.join(gateDir, 'gate.mjs') },
    { game: { guestAuth: () => declared, registration: () => mode } },
  );
});
afterAll(async () => {
  await s?.close();
  rmSync(gateDir, { recursive: true, force: true });
});

const profile = (id: string, token: string) => s.call('GET', `/api/v1/players/${id}`, { token });
const identitiesOf = (deviceId: string) =>
  s.ctx.db.selectFrom('player_identities').selectAll().where('provider', '=', 'guest').where('provider_uid', '=', deviceId).execute();
const playerCount = async () => (await s.ctx.db.selectFrom('players').select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow()).n;

async function createGuest(server = s) {
  const device = newDevice();
  const res = await guestSignIn(server, device);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { device, ...res.body } as { device: ReturnType<typeof newDevice>; player_id: string; access_token: string; refresh_token: string; username: string };
}

describe('enablement', () => {
  let db: OpenDatabase;
  const servers: TestServer[] = [];
  beforeAll(async () => {
    db = await freshDatabase();
  });
  afterAll(async () => {
    for (const server of servers) await server.close();
    await db.close();
  });
  const start = async (raw: RawSettings, gameSays: boolean) => {
    const server = await startTestServer(raw, { database: { ...db, close: async () => {} }, game: { guestAuth: () => gameSays, registration: () => null } });
    servers.push(server);
    return server;
  };
  const disabledEverywhere = async (server: TestServer) => {
    expectError(await guestSignIn(server, newDevice()), 403, 'guest.disabled');
    expectError(await guestSignIn(server, {}), 403, 'guest.disabled');
    const p = await registerPlayer(server);
    expectError(await guestUpgrade(server, p.access_token, { username: 'someone_new', password: 'password1' }), 403, 'guest.disabled');
  };

  it('is off unless the game declares guest_auth = true', async () => {
    declared = false;
    try {
      expectError(await guestSignIn(s, newDevice()), 403, 'guest.disabled');
    } finally {
      declared = true;
    }
    expect((await guestSignIn(s, newDevice())).status).toBe(200);
  });

  it('is off without a pepper, or with one under 32 bytes (which counts as absent)', async () => {
    await disabledEverywhere(await start({}, true));
    await disabledEverywhere(await start({ guest_verifier_pepper: 'x'.repeat(31) }, true));
    await disabledEverywhere(await start({ guest_verifier_pepper: { v1: 'x'.repeat(31), v2: PEPPER_V2 } }, true));
    const { notices } = parseSettings({ guest_verifier_pepper: { v1: 'short' } });
    expect(notices.map((n) => n.key)).toEqual(['guest_verifier_pepper.v1']);
  });

  it('takes a bare pepper as the one key under guest_verifier_key_id, 32 bytes counting as enough', async () => {
    const server = await start({ guest_verifier_pepper: 'p'.repeat(32) }, true);
    const res = await guestSignIn(server, newDevice());
    expect(res.status).toBe(200);
    const [row] = await server.ctx.db.selectFrom('player_identities').select('provider_metadata').where('player_id', '=', res.body.player_id).execute();
    expect((row!.provider_metadata as Record<string, unknown>).key_id).toBe('v1');
  });

  it("the operator's guest_auth setting wins both ways over the game's declaration", async () => {
    await disabledEverywhere(await start({ guest_auth: false, guest_verifier_pepper: PEPPER_V1 }, true));
    const on = await start({ guest_auth: true, guest_verifier_pepper: PEPPER_V1 }, false);
    expect((await guestSignIn(on, newDevice())).status).toBe(200);
    // Still needs the pepper.
    await disabledEverywhere(await start({ guest_auth: true }, false));
  });
});

describe('create and resume', () => {
  it('creates a guest: token pair with guest and created, a generated username, a verifier and never the secret', async () => {
    const device = newDevice();
    const res = await guestSignIn(s, device);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['access_token', 'created', 'guest', 'player_id', 'refresh_token', 'username']);
    expect(res.body).toMatchObject({ guest: true, created: true });
    expect(res.body.username).toMatch(/^guest_[0-9a-f]{16}$/);
    expect((await profile(res.body.player_id, res.body.access_token)).body.display_name).toBe(res.body.username);

    const [identity] = await identitiesOf(device.device_id);
    expect(identity!.player_id).toBe(res.body.player_id);
    const meta = identity!.provider_metadata as Record<string, unknown>;
    expect(Object.keys(meta).sort()).toEqual(['key_id', 'revoked', 'salt', 'verifier']);
    expect(meta.key_id).toBe('v1');
    expect(meta.revoked).toBe(false);
    expect(Buffer.from(meta.salt as string, 'base64')).toHaveLength(16);
    expect(Buffer.from(meta.verifier as string, 'base64')).toHaveLength(32);
    const everything = JSON.stringify(await s.ctx.db.selectFrom('player_identities').selectAll().execute()) + JSON.stringify(await s.ctx.db.selectFrom('players').selectAll().execute());
    expect(everything).not.toContain(device.device_secret);
    expect(everything).not.toContain(Buffer.from(device.device_secret, 'base64').toString('hex'));
    const player = await s.ctx.db.selectFrom('players').select('hashed_password').where('id', '=', res.body.player_id).executeTakeFirstOrThrow();
    expect(player.hashed_password).toBeNull();
    expect(await s.ctx.db.selectFrom('player_stats').select('player_id').where('player_id', '=', res.body.player_id).execute()).toHaveLength(1);
  });

  it('resumes the same player for the same pair, without created, touching the identity', async () => {
    const g = await createGuest();
    const [before] = await identitiesOf(g.device.device_id);
    await new Promise((r) => setTimeout(r, 20));
    const again = await guestSignIn(s, g.device);
    expect(again.status).toBe(200);
    expect(Object.keys(again.body).sort()).toEqual(['access_token', 'guest', 'player_id', 'refresh_token', 'username']);
    expect(again.body.player_id).toBe(g.player_id);
    expect(again.body.username).toBe(g.username);
    const [after] = await identitiesOf(g.device.device_id);
    expect(new Date(after!.updated_at).getTime()).toBeGreaterThan(new Date(before!.updated_at).getTime());
    expect((await profile(g.player_id, again.body.access_token)).status).toBe(200);
    expect((await profile(g.player_id, g.access_token)).status).toBe(200);
  });

  it('two clients sharing one device pair resume one player', async () => {
    const g = await createGuest();
    const [a, b] = await Promise.all([guestSignIn(s, g.device), guestSignIn(s, g.device)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(a.body.player_id).toBe(g.player_id);
    expect(b.body.player_id).toBe(g.player_id);
    expect(await identitiesOf(g.device.device_id)).toHaveLength(1);
  });

  it('accepts url-safe base64 and the 32 and 128 byte bounds, and device ids up to 255 bytes', async () => {
    const urlSafe = newDevice();
    urlSafe.device_secret = Buffer.from(Buffer.from(urlSafe.device_secret, 'base64')).toString('base64url');
    expect((await guestSignIn(s, urlSafe)).status).toBe(200);
    expect((await guestSignIn(s, newDevice(128))).status).toBe(200);
    expect((await guestSignIn(s, { ...newDevice(), device_id: `${'é'.repeat(127)}${Date.now() % 10}` })).status).toBe(200);
  });
});

describe('the guest error table', () => {
  it('400 missing_field for an absent or non-string device_id or device_secret', async () => {
    const d = newDevice();
    for (const [body, field] of [
      [{ device_secret: d.device_secret }, 'device_id'],
      [{ device_id: d.device_id }, 'device_secret'],
      [{ device_id: 12, device_secret: d.device_secret }, 'device_id'],
      [{ device_id: d.device_id, device_secret: null }, 'device_secret'],
      [{}, 'device_id'],
    ] as const) {
      const res = await guestSignIn(s, body);
      expectError(res, 400, 'missing_field');
      expect(res.body.error.details.field).toBe(field);
    }
  });

  it('400 guest.invalid_device_id for an empty id or one over 255 bytes', async () => {
    const d = newDevice();
    expectError(await guestSignIn(s, { ...d, device_id: '' }), 400, 'guest.invalid_device_id');
    expectError(await guestSignIn(s, { ...d, device_id: 'é'.repeat(128) }), 400, 'guest.invalid_device_id');
  });

  it('400 guest.weak_device_secret under 32 bytes, over 128, or not base64', async () => {
    const d = newDevice();
    for (const secret of [newDevice(31).device_secret, newDevice(129).device_secret, '!!!!not base64!!!!', '']) {
      expectError(await guestSignIn(s, { ...d, device_secret: secret }), 400, 'guest.weak_device_secret');
    }
    expect(await identitiesOf(d.device_id)).toHaveLength(0);
  });

  it('401 guest.invalid_device_secret for a wrong secret, never a second account', async () => {
    const g = await createGuest();
    const players = await playerCount();
    const res = await guestSignIn(s, { device_id: g.device.device_id, device_secret: newDevice().device_secret });
    expectError(res, 401, 'guest.invalid_device_secret');
    expect(await playerCount()).toBe(players);
    expect(await identitiesOf(g.device.device_id)).toHaveLength(1);
  });

  it('401 guest.revoked for a revoked verifier (the right secret; a wrong one still says invalid secret)', async () => {
    const g = await createGuest();
    const [row] = await identitiesOf(g.device.device_id);
    await s.ctx.db
      .updateTable('player_identities')
      .set({ provider_metadata: sql`provider_metadata || '{"revoked": true}'::jsonb` })
      .where('id', '=', row!.id)
      .execute();
    expectError(await guestSignIn(s, g.device), 401, 'guest.revoked');
    expectError(await guestSignIn(s, { ...g.device, device_secret: newDevice().device_secret }), 401, 'guest.invalid_device_secret');
  });

  it('401 guest.already_upgraded once the guest is claimed', async () => {
    const g = await createGuest();
    expect((await guestUpgrade(s, g.access_token, { username: `claimed_${Date.now() % 1e6}`, password: 'password1' })).status).toBe(200);
    expectError(await guestSignIn(s, g.device), 401, 'guest.already_upgraded');
    expectError(await guestSignIn(s, { ...g.device, device_secret: newDevice().device_secret }), 401, 'guest.already_upgraded');
  });

  it('403 auth.registration_closed for a new device when closed; resume still works; oauth_only allows guests', async () => {
    const g = await createGuest();
    try {
      mode = 'closed';
      const d = newDevice();
      expectError(await guestSignIn(s, d), 403, 'auth.registration_closed');
      expect(await identitiesOf(d.device_id)).toHaveLength(0);
      expect(s.logs.some((l) => l.event === 'guest_create_denied' && l.reason === 'registration_closed')).toBe(true);
      expect((await guestSignIn(s, g.device)).body.player_id).toBe(g.player_id);
      mode = 'oauth_only';
      const created = await guestSignIn(s, newDevice());
      expect(created.status).toBe(200);
      expect(created.body.created).toBe(true);
    } finally {
      mode = null;
    }
  });

  it('404 player.not_found when the upgrading token resolves to no player', async () => {
    const g = await createGuest();
    // Warm the token cache, then remove the rows behind its back (no eviction).
    expect((await profile(g.player_id, g.access_token)).status).toBe(200);
    await s.ctx.db.transaction().execute(async (trx) => {
      await trx.deleteFrom('player_identities').where('player_id', '=', g.player_id).execute();
      await trx.deleteFrom('player_tokens').where('user_id', '=', g.player_id).execute();
      await trx.deleteFrom('player_stats').where('player_id', '=', g.player_id).execute();
      await trx.deleteFrom('players').where('id', '=', g.player_id).execute();
    });
    expectError(await guestUpgrade(s, g.access_token, { username: 'ghost_user', password: 'password1' }), 404, 'player.not_found');
  });

  it('409 guest.device_already_registered for raced creates; the retry resumes', async () => {
    const d = newDevice();
    let arrived = 0;
    let release!: () => void;
    const both = new Promise<void>((resolve) => (release = resolve));
    s.ctx.seams = {
      async guestAfterLookup(deviceId) {
        if (deviceId !== d.device_id) return;
        if (++arrived === 2) release();
        await both;
      },
    };
    try {
      const [a, b] = await Promise.all([guestSignIn(s, d), guestSignIn(s, d)]);
      expect([a.status, b.status].sort()).toEqual([200, 409]);
      const winner = a.status === 200 ? a : b;
      expectError(a.status === 200 ? b : a, 409, 'guest.device_already_registered');
      expect(await identitiesOf(d.device_id)).toHaveLength(1);
      expect(s.logs.some((l) => l.event === 'guest_create_denied' && l.reason === 'device_already_registered')).toBe(true);
      const retry = await guestSignIn(s, d);
      expect(retry.status).toBe(200);
      expect(retry.body.created).toBeUndefined();
      expect(retry.body.player_id).toBe(winner.body.player_id);
    } finally {
      s.ctx.seams = undefined;
    }
  });

  it('409 guest.not_unclaimed for a password account; 401 without a session', async () => {
    const p = await registerPlayer(s);
    expectError(await guestUpgrade(s, p.access_token, { username: 'upgrade_me', password: 'password1' }), 409, 'guest.not_unclaimed');
    expectError(await guestUpgrade(s, undefined, { username: 'upgrade_me', password: 'password1' }), 401, 'unauthenticated');
  });

  it('upgrade: 400 missing_field, 422 validation_failed with fields at both levels, 409 auth.username_taken; nothing changes', async () => {
    const g = await createGuest();
    const taken = await registerPlayer(s);
    const missing = await guestUpgrade(s, g.access_token, { username: 'fine_name' });
    expectError(missing, 400, 'missing_field');
    expect(missing.body.error.details.field).toBe('password');
    const invalid = await guestUpgrade(s, g.access_token, { username: 'a b', password: 'short' });
    expectError(invalid, 422, 'validation_failed');
    expect(Object.keys(invalid.body.fields).sort()).toEqual(['password', 'username']);
    expect(invalid.body.error.details.fields).toEqual(invalid.body.fields);
    expectError(await guestUpgrade(s, g.access_token, { username: taken.username, password: 'password1' }), 409, 'auth.username_taken');
    // Still an unclaimed guest with a working session and device.
    expect((await profile(g.player_id, g.access_token)).status).toBe(200);
    expect((await guestSignIn(s, g.device)).body.player_id).toBe(g.player_id);
  });

  it('500 guest.create_failed when the player row cannot be created', async () => {
    await sql`create or replace function refuse_guest_rows() returns trigger language plpgsql as $$
      begin raise exception 'refused by test'; end $$`.execute(s.ctx.db);
    await sql`create trigger refuse_guest_rows before insert on players for each row when (new.username like 'guest\\_%') execute function refuse_guest_rows()`.execute(s.ctx.db);
    try {
      const d = newDevice();
      expectError(await guestSignIn(s, d), 500, 'guest.create_failed');
      expect(await identitiesOf(d.device_id)).toHaveLength(0);
      expect(s.logs.some((l) => l.event === 'guest_create_denied' && l.reason === 'create_failed')).toBe(true);
    } finally {
      await sql`drop trigger refuse_guest_rows on players`.execute(s.ctx.db);
    }
  });

  it('500 internal when the device resolves to a missing player', async () => {
    const g = await createGuest();
    await s.ctx.db.transaction().execute(async (trx) => {
      await sql`set local session_replication_role = replica`.execute(trx);
      await trx.deleteFrom('player_tokens').where('user_id', '=', g.player_id).execute();
      await trx.deleteFrom('player_stats').where('player_id', '=', g.player_id).execute();
      await trx.deleteFrom('players').where('id', '=', g.player_id).execute();
    });
    try {
      expectError(await guestSignIn(s, g.device), 500, 'internal');
    } finally {
      await s.ctx.db.deleteFrom('player_identities').where('player_id', '=', g.player_id).execute();
    }
  });

  it('403 client_gate_denied from the gate, which runs before the verifier is made; nothing created', async () => {
    const calls = ((globalThis as { __guestGate?: Record<string, any>[] }).__guestGate ??= []);
    calls.splice(0);
    const d = newDevice();
    const res = await guestSignIn(s, d, { 'x-gate': 'deny' });
    expectError(res, 403, 'client_gate_denied');
    expect(res.body.error.details.reason).toBe('test_denied');
    expect(calls).toHaveLength(1);
    expect(calls[0]!.path).toBe('/api/v1/auth/guest');
    expect(JSON.stringify(calls[0])).not.toContain(d.device_secret);
    expect(await identitiesOf(d.device_id)).toHaveLength(0);
  });
});

describe('upgrade', () => {
  it('keeps id and progress, revokes every token the guest held, deletes the verifier, answers a fresh pair', async () => {
    const g = await createGuest();
    const second = await guestSignIn(s, g.device); // a second family
    await s.ctx.db.updateTable('player_stats').set({ wins: 7 }).where('player_id', '=', g.player_id).execute();
    // Cached before the upgrade: eviction, not expiry, must end it.
    expect((await profile(g.player_id, g.access_token)).status).toBe(200);

    const username = `upgraded_${Date.now() % 1e7}`;
    const res = await guestUpgrade(s, g.access_token, { username, password: 'password1' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['access_token', 'player_id', 'refresh_token', 'upgraded', 'username']);
    expect(res.body).toMatchObject({ player_id: g.player_id, username, upgraded: true });

    for (const token of [g.access_token, second.body.access_token]) expectError(await profile(g.player_id, token), 401, 'unauthenticated');
    for (const refresh of [g.refresh_token, second.body.refresh_token]) {
      expectError(await s.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: refresh } }), 401, 'unauthenticated');
    }
    const me = await profile(g.player_id, res.body.access_token);
    expect(me.status).toBe(200);
    expect(me.body.username).toBe(username);
    expect(me.body.display_name).toBe(username);
    expect((await s.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: res.body.refresh_token } })).status).toBe(200);
    const login = await s.call('POST', '/api/v1/auth/login', { body: { username, password: 'password1' } });
    expect(login.body.player_id).toBe(g.player_id);
    const stats = await s.ctx.db.selectFrom('player_stats').select('wins').where('player_id', '=', g.player_id).executeTakeFirstOrThrow();
    expect(stats.wins).toBe(7);
    const [identity] = await identitiesOf(g.device.device_id);
    expect(identity!.provider_metadata).not.toHaveProperty('verifier');
    expectError(await guestUpgrade(s, res.body.access_token, { username: `${username}x`, password: 'password1' }), 409, 'guest.not_unclaimed');
  });
});

describe('rate limits', () => {
  it('429 guest.rate_limited with retry_after from the node-wide guest_global bucket, for creation only', async () => {
    const limited = await startTestServer(
      { guest_verifier_pepper: PEPPER_V1, rate_limits: { guest_global: { limit: 2, window: 60_000 } } },
      { game: { guestAuth: () => true, registration: () => null } },
    );
    try {
      const firstDevice = newDevice();
      expect((await guestSignIn(limited, firstDevice)).status).toBe(200);
      expect((await guestSignIn(limited, newDevice())).status).toBe(200);
      const d = newDevice();
      const res = await guestSignIn(limited, d);
      expectError(res, 429, 'guest.rate_limited');
      expect(res.body.error.details.retry_after).toBeGreaterThanOrEqual(1);
      expect(res.headers.get('retry-after')).toBe(String(res.body.error.details.retry_after));
      expect(limited.logs.some((l) => l.event === 'guest_create_denied' && l.reason === 'rate_limited')).toBe(true);
      const rows = await limited.ctx.db.selectFrom('player_identities').select('id').where('provider_uid', '=', d.device_id).execute();
      expect(rows).toHaveLength(0);
      // Resuming creates nothing and is not held back by the creation bucket.
      expect((await guestSignIn(limited, firstDevice)).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  it('the per-IP auth limiter applies before anything else', async () => {
    const limited = await startTestServer(
      { guest_verifier_pepper: PEPPER_V1, rate_limits: { auth: { limit: 1, window: 60_000 } } },
      { game: { guestAuth: () => true, registration: () => null } },
    );
    try {
      expect((await guestSignIn(limited, newDevice())).status).toBe(200);
      expectError(await guestSignIn(limited, newDevice()), 429, 'rate_limited');
    } finally {
      await limited.close();
    }
  });
});

describe('pepper rotation', () => {
  it('old key ids keep resuming after rotation and are re-keyed to the current one; a dropped key strands its guests', async () => {
    const db = await freshDatabase();
    const shared = { database: { ...db, close: async () => {} }, game: { guestAuth: () => true, registration: () => null } };
    const servers: TestServer[] = [];
    try {
      const v1 = await startTestServer({ guest_verifier_pepper: { v1: PEPPER_V1 } }, shared);
      servers.push(v1);
      const resumed = await createGuest(v1);
      const idle = await createGuest(v1);

      const rotated = await startTestServer({ guest_verifier_pepper: { v1: PEPPER_V1, v2: PEPPER_V2 }, guest_verifier_key_id: 'v2' }, shared);
      servers.push(rotated);
      const fresh = await createGuest(rotated);
      const keyOf = async (deviceId: string) =>
        ((await rotated.ctx.db.selectFrom('player_identities').select('provider_metadata').where('provider_uid', '=', deviceId).executeTakeFirstOrThrow())
          .provider_metadata as Record<string, unknown>).key_id;
      expect(await keyOf(fresh.device.device_id)).toBe('v2');
      expect(await keyOf(resumed.device.device_id)).toBe('v1');
      const again = await guestSignIn(rotated, resumed.device);
      expect(again.body.player_id).toBe(resumed.player_id);
      expect(await keyOf(resumed.device.device_id)).toBe('v2');

      const retired = await startTestServer({ guest_verifier_pepper: { v2: PEPPER_V2 }, guest_verifier_key_id: 'v2' }, shared);
      servers.push(retired);
      expect((await guestSignIn(retired, resumed.device)).body.player_id).toBe(resumed.player_id);
      expect((await guestSignIn(retired, fresh.device)).body.player_id).toBe(fresh.player_id);
      expectError(await guestSignIn(retired, idle.device), 401, 'guest.invalid_device_secret');
      expect(retired.logs.some((l) => l.event === 'guest_verifier_unusable' && l.key_id === 'v1')).toBe(true);
    } finally {
      for (const server of servers) await server.close();
      await db.close();
    }
  });
});
