import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { eraseInactiveGuest, REAP_BATCH } from '../runtime/accounts/guests';
import { parseSettings } from '../runtime/contracts/settings';
import { expectError, registerPlayer } from './support/accounts';
import { guestSignIn, guestUpgrade, newDevice, PEPPER_V1 } from './support/guests';
import { startTestServer, type TestServer } from './support/server';

/**
 * The unclaimed-guest cap and the reaper. The service's clock is the test's
 * (`offset` moves it), so inactivity is simulated, never waited for.
 */

const HOUR = 3600;
let offset = 0;
const clock = { now: () => Date.now() + offset };
const game = { game: { guestAuth: () => true, registration: () => null }, clock };

async function createGuest(s: TestServer) {
  const device = newDevice();
  const res = await guestSignIn(s, device);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { device, ...res.body } as { device: ReturnType<typeof newDevice>; player_id: string; access_token: string; username: string };
}
const exists = async (s: TestServer, id: string) => (await s.ctx.db.selectFrom('players').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;

describe('guest_unlinked_cap', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ guest_verifier_pepper: PEPPER_V1, guest_unlinked_cap: 2 }, game);
  });
  afterAll(async () => {
    await s.close();
  });

  it('accepts an integer or "infinity" and nothing else', () => {
    expect(parseSettings({}).settings.guest_unlinked_cap).toBe('infinity');
    expect(parseSettings({ guest_unlinked_cap: 'infinity' }).settings.guest_unlinked_cap).toBe('infinity');
    expect(parseSettings({ guest_unlinked_cap: 0 }).settings.guest_unlinked_cap).toBe(0);
    for (const bad of ['10', -1, 1.5, 'Infinity']) expect(() => parseSettings({ guest_unlinked_cap: bad })).toThrow(/guest_unlinked_cap/);
  });

  it('503 guest.capacity_reached at the cap, logged with count and cap; resume still works; claimed guests free a slot', async () => {
    const a = await createGuest(s);
    await createGuest(s);
    await registerPlayer(s); // password accounts do not count
    const d = newDevice();
    expectError(await guestSignIn(s, d), 503, 'guest.capacity_reached');
    const denied = s.logs.find((l) => l.event === 'guest_create_denied' && l.reason === 'cap_reached');
    expect(denied).toMatchObject({ count: 2, cap: 2 });
    expect(await s.ctx.db.selectFrom('player_identities').select('id').where('provider_uid', '=', d.device_id).execute()).toHaveLength(0);
    expect((await guestSignIn(s, a.device)).body.player_id).toBe(a.player_id);

    expect((await guestUpgrade(s, a.access_token, { username: `capfree_${Date.now() % 1e6}`, password: 'password1' })).status).toBe(200);
    expect((await guestSignIn(s, d)).status).toBe(200);
    expectError(await guestSignIn(s, newDevice()), 503, 'guest.capacity_reached');
  });

  it('503 guest.unavailable when guests cannot be counted, logged, nothing created', async () => {
    s.ctx.seams = {
      async guestBeforeCount() {
        throw new Error('simulated database fault while counting');
      },
    };
    try {
      const d = newDevice();
      expectError(await guestSignIn(s, d), 503, 'guest.unavailable');
      expect(s.logs.some((l) => l.event === 'guest_create_denied' && l.reason === 'count_failed')).toBe(true);
      expect(await s.ctx.db.selectFrom('player_identities').select('id').where('provider_uid', '=', d.device_id).execute()).toHaveLength(0);
    } finally {
      s.ctx.seams = undefined;
    }
  });
});

describe('guest reaper', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ guest_verifier_pepper: PEPPER_V1, guest_reap_after: HOUR, guest_reap_interval_ms: 60 * 60 * 1000 }, game);
  });
  afterAll(async () => {
    await s.close();
  });

  it('erases guests unseen past guest_reap_after (inactivity, not age), and only unclaimed ones; no audit row', async () => {
    const idle = await createGuest(s);
    const active = await createGuest(s);
    const claimed = await createGuest(s);
    const linkedLater = await createGuest(s);
    const password = await registerPlayer(s);
    expect((await guestUpgrade(s, claimed.access_token, { username: `reap_claimed_${Date.now() % 1e6}`, password: 'password1' })).status).toBe(200);
    await s.ctx.db
      .insertInto('player_identities')
      .values({ id: s.ctx.ids.uuid(), player_id: linkedLater.player_id, provider: 'google', provider_uid: `g-${linkedLater.player_id}`, provider_metadata: sql`'{}'::jsonb`, updated_at: new Date(clock.now()) })
      .execute();
    // Cached now, so only eviction can stop it resolving.
    expect((await s.call('GET', `/api/v1/players/${idle.player_id}`, { token: idle.access_token })).status).toBe(200);

    offset += (HOUR / 2) * 1000;
    expect((await guestSignIn(s, active.device)).status).toBe(200);
    offset += (HOUR / 2 + 60) * 1000;

    const pass = await s.guestReaper.sweep();
    expect(pass).toEqual({ deleted: 1, skipped: 0, failed: 0 });
    expect(await exists(s, idle.player_id)).toBe(false);
    for (const kept of [active.player_id, claimed.player_id, linkedLater.player_id, password.player_id]) expect(await exists(s, kept)).toBe(true);
    expectError(await s.call('GET', `/api/v1/players/${active.player_id}`, { token: idle.access_token }), 401, 'unauthenticated');
    expect(await s.ctx.db.selectFrom('player_identities').select('id').where('player_id', '=', idle.player_id).execute()).toHaveLength(0);
    expect(s.logs.find((l) => l.event === 'guests_reaped')).toMatchObject({ count: 1 });
    expect(await s.ctx.db.selectFrom('ops_audit_entries').select('id').where('target_id', '=', idle.player_id).execute()).toHaveLength(0);
    // The same device now creates a new guest.
    const again = await guestSignIn(s, idle.device);
    expect(again.body.created).toBe(true);
    expect(again.body.player_id).not.toBe(idle.player_id);
  });

  it('re-checks inside the delete: a guest claimed or seen after selection is skipped', async () => {
    const g = await createGuest(s);
    const cutoff = new Date(clock.now() + 1000);
    expect((await guestUpgrade(s, g.access_token, { username: `reap_race_${Date.now() % 1e6}`, password: 'password1' })).status).toBe(200);
    expect(await eraseInactiveGuest(s.ctx, g.player_id, cutoff)).toBe('skipped');
    expect(await exists(s, g.player_id)).toBe(true);

    const seen = await createGuest(s);
    expect(await eraseInactiveGuest(s.ctx, seen.player_id, new Date(clock.now() - 1000))).toBe('skipped');
    expect(await exists(s, seen.player_id)).toBe(true);
  });

  it(`erases at most ${REAP_BATCH} per pass`, async () => {
    const marker = `bulk${Date.now() % 1e6}`;
    const seenAt = new Date(clock.now() - 2 * HOUR * 1000);
    await sql`insert into players (id, username, metadata, updated_at)
      select gen_random_uuid(), ${marker} || '_' || i, '{}'::jsonb, now() from generate_series(1, ${REAP_BATCH + 1}) i`.execute(s.ctx.db);
    await sql`insert into player_identities (id, player_id, provider, provider_uid, provider_metadata, updated_at)
      select gen_random_uuid(), id, 'guest', 'dev-' || username, '{}'::jsonb, ${seenAt} from players where username like ${marker + '_%'}`.execute(s.ctx.db);
    const left = async () => (await s.ctx.db.selectFrom('players').select('id').where('username', 'like', `${marker}_%`).execute()).length;
    expect(await left()).toBe(REAP_BATCH + 1);
    expect((await s.guestReaper.sweep()).deleted).toBe(REAP_BATCH);
    expect(await left()).toBe(1);
    expect((await s.guestReaper.sweep()).deleted).toBe(1);
    expect(await left()).toBe(0);
  });
});

describe('reaper on its interval', () => {
  it('runs by itself when guest_reap_after is set', async () => {
    const s = await startTestServer({ guest_verifier_pepper: PEPPER_V1, guest_reap_after: 60, guest_reap_interval_ms: 50 }, game);
    try {
      const g = await createGuest(s);
      offset += 61_000;
      await vi.waitFor(async () => expect(await exists(s, g.player_id)).toBe(false), { timeout: 10_000, interval: 50 });
    } finally {
      await s.close();
    }
  });

  it('never runs without guest_reap_after', async () => {
    const s = await startTestServer({ guest_verifier_pepper: PEPPER_V1, guest_reap_interval_ms: 50 }, game);
    try {
      const g = await createGuest(s);
      offset += 365 * 24 * HOUR * 1000;
      expect(await s.guestReaper.sweep()).toEqual({ deleted: 0, skipped: 0, failed: 0 });
      expect(await exists(s, g.player_id)).toBe(true);
    } finally {
      await s.close();
    }
  });
});
