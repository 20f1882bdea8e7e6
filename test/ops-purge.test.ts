import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { expectError, registerPlayer } from './support/accounts';
import { guestSignIn, guestUpgrade, newDevice, PEPPER_V1 } from './support/guests';
import { expectOpsDenied, OPS_SECRET, opsPost, opsToken } from './support/ops';
import { startTestServer, type TestServer } from './support/server';

/**
 * `POST /ops/players/guests/purge`. The service's clock is the test's
 * (`offset` moves it), so inactivity is simulated, never waited for.
 */

const HOUR = 3600;
let offset = 0;
const clock = { now: () => Date.now() + offset };

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ ops_secret: OPS_SECRET, guest_verifier_pepper: PEPPER_V1 }, { game: { guestAuth: () => true, registration: () => null }, clock });
});
afterAll(async () => {
  await s.close();
});

const purge = (body?: unknown, bearer: string = OPS_SECRET) => opsPost(s, '/players/guests/purge', body, bearer);
const exists = async (id: string) => (await s.ctx.db.selectFrom('players').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;
const batches = () => s.ctx.db.selectFrom('ops_audit_entries').selectAll().where('action', '=', 'player.guest_purge').orderBy('occurred_at').orderBy('id').execute();

async function createGuest() {
  const res = await guestSignIn(s, newDevice());
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  // Distinct last-seen times, so "least recently seen first" is an order the test knows.
  offset += 1000;
  return res.body as { player_id: string; access_token: string; username: string };
}

/** Every test starts with no unclaimed guest, by the route itself. */
beforeEach(async () => {
  for (;;) {
    const dry = await purge({ inactive_for_seconds: 0, dry_run: true });
    expect(dry.status, JSON.stringify(dry.body)).toBe(200);
    if (dry.body.data.matched === 0) return;
    expect((await purge({ inactive_for_seconds: 0, confirm_count: dry.body.data.matched, limit: 5000 })).status).toBe(200);
  }
});

describe('POST /ops/players/guests/purge', () => {
  it('answers 400 ops.invalid_cutoff without a whole, non-negative inactive_for_seconds', async () => {
    const g = await createGuest();
    for (const body of [undefined, {}, { dry_run: true }, { inactive_for_seconds: -1, dry_run: true }, { inactive_for_seconds: 1.5, dry_run: true }, { inactive_for_seconds: '3600', dry_run: true }, { inactive_for_seconds: null, confirm_count: 1 }]) {
      expectError(await purge(body), 400, 'ops.invalid_cutoff');
    }
    expect(await exists(g.player_id)).toBe(true);
  });

  it('answers 400 ops.confirmation_required for a deleting call without confirm_count', async () => {
    const g = await createGuest();
    expectError(await purge({ inactive_for_seconds: 0 }), 400, 'ops.confirmation_required');
    expectError(await purge({ inactive_for_seconds: 0, dry_run: false }), 400, 'ops.confirmation_required');
    expect(await exists(g.player_id)).toBe(true);
  });

  it('counts in a dry run and deletes nothing: unclaimed guests unseen since the cutoff, no one else', async () => {
    const old = [await createGuest(), await createGuest()];
    const upgraded = await createGuest();
    expect((await guestUpgrade(s, upgraded.access_token, { username: `claimed_${Date.now() % 1e8}`, password: 'password1' })).status).toBe(200);
    await registerPlayer(s);
    offset += 2 * HOUR * 1000;
    const fresh = await createGuest();
    const before = (await batches()).length;

    const res = await purge({ inactive_for_seconds: HOUR, dry_run: true });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: { matched: 2, deleted: 0, skipped: 0, failed: 0, remaining: 2, dry_run: true } });
    // 0 selects every unclaimed guest, the one seen just now included.
    expect((await purge({ inactive_for_seconds: 0, dry_run: true })).body.data.matched).toBe(3);
    for (const g of [...old, upgraded, fresh]) expect(await exists(g.player_id)).toBe(true);
    expect(await batches()).toHaveLength(before);
  });

  it('answers 409 ops.purge_count_mismatch when confirm_count is not the live count, and deletes nothing', async () => {
    const a = await createGuest();
    await createGuest();
    offset += 2 * HOUR * 1000;
    for (const confirm_count of [1, 3, 0]) {
      const res = await purge({ inactive_for_seconds: HOUR, confirm_count });
      expectError(res, 409, 'ops.purge_count_mismatch');
      expect(res.body.error.details).toEqual({ confirm_count, matched: 2 });
    }
    expect(await exists(a.player_id)).toBe(true);
  });

  it('erases up to limit per call, least recently seen first; callers loop while deleted is above zero', async () => {
    const gs = [await createGuest(), await createGuest(), await createGuest()];
    offset += 2 * HOUR * 1000;
    const spared = await createGuest();

    const first = await purge({ inactive_for_seconds: HOUR, confirm_count: 3, limit: 2 });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body).toEqual({ data: { matched: 3, deleted: 2, skipped: 0, failed: 0, remaining: 1, dry_run: false } });
    expect(await exists(gs[0]!.player_id)).toBe(false);
    expect(await exists(gs[1]!.player_id)).toBe(false);
    expect(await exists(gs[2]!.player_id)).toBe(true);
    // Every session of an erased guest died with it.
    expectError(await s.call('GET', `/api/v1/players/${spared.player_id}`, { token: gs[0]!.access_token }), 401, 'unauthenticated');

    const second = await purge({ inactive_for_seconds: HOUR, confirm_count: 1, limit: 2 });
    expect(second.body.data).toMatchObject({ matched: 1, deleted: 1, remaining: 0 });
    const third = await purge({ inactive_for_seconds: HOUR, confirm_count: 0 });
    expect(third.body.data).toMatchObject({ matched: 0, deleted: 0, remaining: 0 });
    expect(await exists(spared.player_id)).toBe(true);

    // A limit under 1 erases one; the ceiling bounds the rest.
    const more = [await createGuest(), await createGuest()];
    expect((await purge({ inactive_for_seconds: 0, confirm_count: 3, limit: 0 })).body.data).toMatchObject({ deleted: 1, remaining: 2 });
    expect(await exists(spared.player_id)).toBe(false);
    expect((await purge({ inactive_for_seconds: 0, confirm_count: 2, limit: 1_000_000 })).body.data).toMatchObject({ deleted: 2, remaining: 0 });
    for (const g of more) expect(await exists(g.player_id)).toBe(false);
  });

  it('writes one audit row per batch naming the operator and every erased id', async () => {
    const gs = [await createGuest(), await createGuest()];
    const token = await opsToken(['erasure'], { name: 'carol', now: clock.now() });
    const before = (await batches()).length;
    expect((await purge({ inactive_for_seconds: 0, confirm_count: 2 }, token)).status).toBe(200);
    const rows = await batches();
    expect(rows).toHaveLength(before + 1);
    const row = rows.at(-1)!;
    expect(row).toMatchObject({ actor_display: 'carol', actor_source: 'ops_token', actor_attested: true, outcome: 'ok', succeeded_count: 2, failed_count: 0 });
    expect((row.details as { erased: string[] }).erased.sort()).toEqual(gs.map((g) => g.player_id).sort());
    expect(row.details).toMatchObject({ inactive_for_seconds: 0, matched: 2, skipped: 0, remaining: 0, not_erased: {} });
  });

  it('keeps the erasures when the batch row cannot be written, and logs the row at error level instead', async () => {
    const g = await createGuest();
    await sql`create or replace function refuse_batch() returns trigger language plpgsql as $$
      begin raise exception 'audit refused'; end $$`.execute(s.ctx.db);
    await sql`create trigger refuse_batch before insert on ops_audit_entries for each row when (new.action = 'player.guest_purge') execute function refuse_batch()`.execute(s.ctx.db);
    let res;
    try {
      res = await purge({ inactive_for_seconds: 0, confirm_count: 1 });
    } finally {
      await sql`drop trigger refuse_batch on ops_audit_entries`.execute(s.ctx.db);
    }
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toMatchObject({ deleted: 1 });
    expect(await exists(g.player_id)).toBe(false);
    const logged = s.logs.find((l) => l.event === 'ops_audit_write_failed' && l.level === 'error');
    expect(logged).toMatchObject({ action: 'player.guest_purge', details: { erased: [g.player_id] } });
  });

  it('skips a guest claimed between selection and its erasure', async () => {
    const first = await createGuest();
    const second = await createGuest();
    // The fault: erasing the first guest gives the second a password, as an upgrade racing the purge would.
    await sql`create or replace function claim_second() returns trigger language plpgsql as $$
      begin update players set hashed_password = 'claimed' where id = ${sql.lit(second.player_id)}; return old; end $$`.execute(s.ctx.db);
    await sql`create trigger claim_second after delete on players for each row when (old.id = ${sql.lit(first.player_id)}) execute function claim_second()`.execute(s.ctx.db);
    let res;
    try {
      res = await purge({ inactive_for_seconds: 0, confirm_count: 2 });
    } finally {
      await sql`drop trigger claim_second on players`.execute(s.ctx.db);
    }
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toEqual({ matched: 2, deleted: 1, skipped: 1, failed: 0, remaining: 0, dry_run: false });
    expect(await exists(first.player_id)).toBe(false);
    expect(await exists(second.player_id)).toBe(true);
    const row = (await batches()).at(-1)!;
    expect(row).toMatchObject({ outcome: 'ok', succeeded_count: 1, failed_count: 0 });
    expect((row.details as { not_erased: Record<string, string> }).not_erased[second.player_id]).toMatch(/^skipped/);
  });

  it('counts a guest whose erasure does not commit as failed, erases the rest, and selects it again next call', async () => {
    const [a, stuck, c] = [await createGuest(), await createGuest(), await createGuest()];
    // The fault: a row nobody registered for erasure holds the guest, so its final delete fails.
    await sql`create table purge_blocker (id uuid primary key, player_id uuid not null references players(id))`.execute(s.ctx.db);
    try {
      await sql`insert into purge_blocker values (${s.ctx.ids.uuid()}, ${stuck.player_id})`.execute(s.ctx.db);
      const res = await purge({ inactive_for_seconds: 0, confirm_count: 3 });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.data).toEqual({ matched: 3, deleted: 2, skipped: 0, failed: 1, remaining: 1, dry_run: false });
      expect(await exists(a.player_id)).toBe(false);
      expect(await exists(c.player_id)).toBe(false);
      expect(await exists(stuck.player_id)).toBe(true);
      // Its session survived with it.
      expect((await s.call('GET', `/api/v1/players/${stuck.player_id}`, { token: stuck.access_token })).status).toBe(200);
      const row = (await batches()).at(-1)!;
      expect(row).toMatchObject({ outcome: 'partial', succeeded_count: 2, failed_count: 1 });
      expect((row.details as { not_erased: Record<string, string> }).not_erased).toEqual({ [stuck.player_id]: expect.stringMatching(/^failed/) });
      expect((await purge({ inactive_for_seconds: 0, dry_run: true })).body.data.matched).toBe(1);
      const again = await purge({ inactive_for_seconds: 0, confirm_count: 1 });
      expect(again.body.data).toMatchObject({ deleted: 0, failed: 1, remaining: 1 });
      expect((await batches()).at(-1)).toMatchObject({ outcome: 'error', succeeded_count: 0, failed_count: 1 });
    } finally {
      await sql`drop table purge_blocker`.execute(s.ctx.db);
    }
  });

  it('takes the erasure class and refuses every other, and player tokens', async () => {
    const g = await createGuest();
    for (const cap of ['read', 'player_data', 'config'] as const) expectOpsDenied(await purge({ inactive_for_seconds: 0, dry_run: true }, await opsToken([cap], { now: clock.now() })));
    expectOpsDenied(await purge({ inactive_for_seconds: 0, confirm_count: 1 }, g.access_token));
    expect(await exists(g.player_id)).toBe(true);
    expect((await purge({ inactive_for_seconds: 0, confirm_count: 1 }, await opsToken(['erasure'], { now: clock.now() }))).body.data.deleted).toBe(1);
  });
});
