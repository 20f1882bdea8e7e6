import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCatalogue, syncCatalogue } from '../runtime/catalogue/catalogue';
import { grant } from '../runtime/economy/wallets';
import { recordFinishedMatch } from '../runtime/matches/matches';
import { EXPORT_TABLES } from '../runtime/ops/export';
import { erasableColumns } from '../runtime/changes/erasure';
import { jsonb } from '../runtime/platform/database';
import { expectError, registerPlayer, type TestPlayer } from './support/accounts';
import { guestSignIn, newDevice, PEPPER_V1 } from './support/guests';
import { expectOpsDenied, OPS_SECRET, opsGet, opsToken } from './support/ops';
import { startTestServer, type TestServer } from './support/server';

/** `GET /ops/players/:id/export`: the player's data by table, through an allowlist, all or nothing. */

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ ops_secret: OPS_SECRET, guest_verifier_pepper: { v1: PEPPER_V1 } }, { game: { guestAuth: () => true, registration: () => null } });
  await syncCatalogue(s.ctx, parseCatalogue(JSON.stringify({ currencies: [{ code: 'gold' }], items: [{ slug: 'gem', name: 'Gem', category: 'loot' }], listings: [] })));
});
afterAll(async () => {
  await s.close();
});

const exportOf = (id: string, bearer: string = OPS_SECRET) => opsGet(s, `/players/${id}/export`, bearer);

/** A player with something in most tables, and a bystander sharing some rows with them. */
async function seededPlayer(): Promise<{ p: TestPlayer; other: TestPlayer; secrets: string[] }> {
  const p = await registerPlayer(s);
  const other = await registerPlayer(s);
  const call = (method: string, path: string, token: string, body?: unknown) => s.call(method, path, { token, ...(body !== undefined ? { body } : {}) });
  expect((await call('POST', '/api/v1/friends', p.access_token, { friend_id: other.player_id })).status).toBe(200);
  expect((await call('POST', '/api/v1/dm', p.access_token, { recipient_id: other.player_id, content: 'hello there' })).status).toBe(200);
  expect((await call('PUT', '/api/v1/storage/prefs/theme', p.access_token, { value: { dark: true } })).status).toBe(200);
  expect((await call('PUT', '/api/v1/storage/prefs/theme', other.access_token, { value: { dark: false } })).status).toBe(200);
  expect((await call('PUT', '/api/v1/saves/slot1', p.access_token, { data: { level: 3 } })).status).toBe(200);
  await grant(s.ctx, { playerId: p.player_id, currency: 'gold', amount: 7, reason: 'test_grant' });
  await s.ctx.db.insertInto('notifications').values({ id: s.ctx.ids.uuid(), player_id: p.player_id, type: 'welcome', subject: 'Hi', content: jsonb({ x: 1 }), sent_at: new Date() }).execute();
  await s.ctx.db.insertInto('leaderboard_entries').values({ id: s.ctx.ids.uuid(), leaderboard_id: 'arena', player_id: p.player_id, score: '42', sub_score: '0', metadata: jsonb({}), updated_at: new Date() }).execute();
  await s.ctx.db.insertInto('iap_transactions').values({ id: s.ctx.ids.uuid(), player_id: p.player_id, provider: 'apple', transaction_id: `tx-${randomUUID()}`, original_transaction_id: null, product_id: 'gems' }).execute();
  await recordFinishedMatch(s.ctx.db, { id: s.ctx.ids.uuid(), mode: 'duo', status: 'finished', players: [p.player_id, other.player_id], result: { winner: p.player_id }, startedAt: new Date(), finishedAt: new Date() });
  await s.ctx.db
    .insertInto('votes')
    .values({
      id: s.ctx.ids.uuid(),
      match_id: s.ctx.ids.uuid(),
      template: 'map',
      method: 'plurality',
      options: jsonb([{ id: 'a', label: 'A' }]),
      votes_cast: jsonb({ [p.player_id]: 'a', [other.player_id]: 'b' }),
      result: jsonb({}),
      distribution: jsonb({}),
      turnout: 2,
      eligible_count: 2,
      window_ms: 1000,
      visibility: 'live',
      status: 'resolved',
      opened_at: new Date(),
      closed_at: new Date(),
    })
    .execute();
  const hash = await s.ctx.db.selectFrom('players').select('hashed_password').where('id', '=', p.player_id).executeTakeFirstOrThrow();
  const tokens = await s.ctx.db.selectFrom('player_tokens').select('token').where('user_id', '=', p.player_id).execute();
  return { p, other, secrets: [hash.hashed_password!, p.access_token, p.refresh_token, p.password, ...tokens.map((t) => t.token)] };
}

describe('GET /ops/players/:id/export', () => {
  it("answers every table of the player, the player's rows only, allowlisted columns only", async () => {
    const { p, other, secrets } = await seededPlayer();
    const res = await exportOf(p.player_id);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const d = res.body.data;
    expect(d.player_id).toBe(p.player_id);
    expect(d.exported_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(d.extensions).toEqual({});
    expect(Object.keys(d.tables).sort()).toEqual(EXPORT_TABLES.map((t) => t.table).sort());
    const t = d.tables;

    expect(t.players).toEqual([expect.objectContaining({ id: p.player_id, username: p.username })]);
    expect(t.players[0]).not.toHaveProperty('hashed_password');
    // Sessions: that they existed, never the token or its hash.
    expect(t.player_tokens.length).toBeGreaterThanOrEqual(2);
    for (const row of t.player_tokens) {
      expect(Object.keys(row).sort()).toEqual(['context', 'expires_at', 'family_id', 'id', 'inserted_at', 'used_at']);
    }
    expect(t.player_tokens.map((r: { context: string }) => r.context).sort()).toEqual(expect.arrayContaining(['access', 'refresh']));
    expect(t.friendships).toEqual([expect.objectContaining({ player_id: p.player_id, friend_id: other.player_id, status: 'pending' })]);
    expect(t.chat_messages).toEqual([expect.objectContaining({ sender_id: p.player_id, recipient_id: other.player_id, content: 'hello there' })]);
    expect(t.storage).toEqual([expect.objectContaining({ collection: 'prefs', key: 'theme', value: { dark: true } })]);
    expect(t.cloud_saves).toEqual([expect.objectContaining({ slot: 'slot1', data: { level: 3 }, version: 1 })]);
    expect(t.wallets).toEqual([expect.objectContaining({ currency: 'gold', balance: 7 })]);
    expect(t.transactions).toEqual([expect.objectContaining({ wallet_id: t.wallets[0].id, amount: 7, balance_after: 7, reason: 'test_grant' })]);
    expect(t.notifications).toEqual([expect.objectContaining({ type: 'welcome', subject: 'Hi', content: { x: 1 }, read: false })]);
    expect(t.leaderboard_entries).toEqual([expect.objectContaining({ leaderboard_id: 'arena', score: 42, sub_score: 0 })]);
    expect(t.iap_transactions).toEqual([expect.objectContaining({ provider: 'apple', product_id: 'gems' })]);
    // The match list without its roster, and the player's own ballot without anyone else's.
    expect(t.match_records).toHaveLength(1);
    expect(t.match_records[0]).not.toHaveProperty('players');
    expect(t.votes).toEqual([expect.objectContaining({ template: 'map', choice: 'a' })]);
    expect(JSON.stringify(t.votes)).not.toContain(other.player_id);
    // The finished match counted as a win.
    expect(t.player_stats).toEqual([expect.objectContaining({ games_played: 1, wins: 1, losses: 0 })]);
    expect(t.groups).toEqual([]);

    const text = JSON.stringify(res.body);
    for (const secret of secrets) expect(text).not.toContain(secret);
    for (const word of ['hashed_password', '"token"', 'verifier', 'salt', 'provider_metadata']) expect(text).not.toContain(word);
    // The bystander's own storage object is not in it.
    expect(text).not.toContain('"dark":false');
  });

  it("leaves out a guest's device verifier and salt", async () => {
    const guest = await guestSignIn(s, newDevice());
    expect(guest.status).toBe(200);
    const stored = await s.ctx.db.selectFrom('player_identities').select('provider_metadata').where('player_id', '=', guest.body.player_id).executeTakeFirstOrThrow();
    const { verifier, salt } = stored.provider_metadata as { verifier: string; salt: string };
    const res = await exportOf(guest.body.player_id);
    expect(res.status).toBe(200);
    expect(res.body.data.tables.player_identities).toEqual([expect.objectContaining({ provider: 'guest' })]);
    expect(res.body.data.tables.player_identities[0]).not.toHaveProperty('provider_metadata');
    const text = JSON.stringify(res.body);
    expect(text).not.toContain(verifier);
    expect(text).not.toContain(salt);
  });

  it('covers every table the erasure deletes or severs', () => {
    const exported = new Set(EXPORT_TABLES.map((t) => t.table as string));
    const erasable = [...new Set(erasableColumns().map((c) => c.table))];
    expect(erasable.length).toBeGreaterThan(10);
    expect(erasable.filter((table) => !exported.has(table))).toEqual([]);
  });

  it('answers 400 ops.invalid_id for a non-UUID and 404 ops.not_found for nobody', async () => {
    expectError(await exportOf('not-a-uuid'), 400, 'ops.invalid_id');
    expectError(await exportOf(randomUUID()), 404, 'ops.not_found');
  });

  it('takes the player_data class and refuses every other', async () => {
    const p = await registerPlayer(s);
    expect((await exportOf(p.player_id, await opsToken(['player_data']))).status).toBe(200);
    for (const cap of ['read', 'config', 'erasure'] as const) expectOpsDenied(await exportOf(p.player_id, await opsToken([cap])));
    expectOpsDenied(await exportOf(p.player_id, p.access_token));
  });

  it('answers 500 ops.export_incomplete and no partial artefact when one table cannot be read', async () => {
    const { p } = await seededPlayer();
    // The fault: one table of the export gone from under it.
    await sql`alter table cloud_saves rename to cloud_saves_away`.execute(s.ctx.db);
    let res;
    try {
      res = await exportOf(p.player_id);
    } finally {
      await sql`alter table cloud_saves_away rename to cloud_saves`.execute(s.ctx.db);
    }
    expectError(res, 500, 'ops.export_incomplete');
    expect(Object.keys(res.body)).toEqual(['error']);
    expect(JSON.stringify(res.body)).not.toContain(p.username);
    expect(s.logs.some((l) => l.event === 'ops_export_failed' && l.player_id === p.player_id && l.table === 'cloud_saves')).toBe(true);
    // With the table back, the same export is whole.
    expect((await exportOf(p.player_id)).status).toBe(200);
  });
});
