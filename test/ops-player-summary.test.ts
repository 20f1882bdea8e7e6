import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCatalogue, syncCatalogue } from '../runtime/catalogue/catalogue';
import { addItem } from '../runtime/economy/inventory';
import { grant } from '../runtime/economy/wallets';
import { recordFinishedMatch } from '../runtime/matches/matches';
import { RECENT_MATCHES } from '../runtime/schemas/ops';
import { expectError, registerPlayer, type TestPlayer } from './support/accounts';
import { guestSignIn, newDevice, PEPPER_V1 } from './support/guests';
import { expectOpsDenied, OPS_SECRET, opsGet, opsToken } from './support/ops';
import { startTestServer, type TestServer } from './support/server';

/** `GET /ops/players/:id/summary`: the console's player page, read without the export. */

let s: TestServer;
let gem: string;
beforeAll(async () => {
  s = await startTestServer({ ops_secret: OPS_SECRET, guest_verifier_pepper: { v1: PEPPER_V1 } }, { game: { guestAuth: () => true, registration: () => null } });
  await syncCatalogue(s.ctx, parseCatalogue(JSON.stringify({ currencies: [{ code: 'gold' }, { code: 'gems' }], items: [{ slug: 'gem', name: 'Gem', category: 'loot' }], listings: [] })));
  gem = (await s.ctx.db.selectFrom('item_defs').select('id').where('slug', '=', 'gem').executeTakeFirstOrThrow()).id;
});
afterAll(async () => {
  await s.close();
});

const summaryOf = (id: string, bearer: string = OPS_SECRET) => opsGet(s, `/players/${id}/summary`, bearer);

async function call(method: string, path: string, token: string, body?: unknown): Promise<void> {
  const res = await s.call(method, path, { token, ...(body !== undefined ? { body } : {}) });
  expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).toBe(200);
}

/** A player with something in every table the page summarises, and two others sharing some rows. */
async function seededPlayer(): Promise<{ p: TestPlayer; friend: TestPlayer; pending: TestPlayer }> {
  const p = await registerPlayer(s);
  const friend = await registerPlayer(s);
  const pending = await registerPlayer(s);
  // One accepted friendship (asked by the other side), one still pending.
  await call('POST', '/api/v1/friends', friend.access_token, { friend_id: p.player_id });
  await call('POST', '/api/v1/friends', p.access_token, { friend_id: friend.player_id });
  await call('POST', '/api/v1/friends', p.access_token, { friend_id: pending.player_id });
  await call('POST', '/api/v1/groups', p.access_token, { name: `g-${p.username}`, open: true });
  await call('PUT', '/api/v1/saves/slot1', p.access_token, { data: { level: 3 } });
  await call('PUT', '/api/v1/saves/slot1', p.access_token, { data: { level: 4 }, version: 1 });
  await call('PUT', '/api/v1/saves/slot2', p.access_token, { data: {} });
  for (const [collection, key] of [['prefs', 'theme'], ['prefs', 'sound'], ['progress', 'map']]) await call('PUT', `/api/v1/storage/${collection}/${key}`, p.access_token, { value: { x: 1 } });
  await call('PUT', '/api/v1/storage/prefs/theme', friend.access_token, { value: { x: 2 } });
  await grant(s.ctx, { playerId: p.player_id, currency: 'gold', amount: 7, reason: 'test_grant' });
  await grant(s.ctx, { playerId: p.player_id, currency: 'gems', amount: 2, reason: 'test_grant' });
  await grant(s.ctx, { playerId: friend.player_id, currency: 'gold', amount: 99, reason: 'test_grant' });
  await addItem(s.ctx.db, s.ctx.ids, { playerId: p.player_id, itemDefId: gem, quantity: 3 });
  return { p, friend, pending };
}

describe('GET /ops/players/:id/summary', () => {
  it("answers what the player page draws, the player's rows only, and agrees with the export", async () => {
    const { p, friend } = await seededPlayer();
    const now = Date.now();
    // More matches than the page lists, each recorded later than the one before; one the player did not play.
    for (let i = 0; i < RECENT_MATCHES + 2; i++) {
      await recordFinishedMatch(s.ctx.db, {
        id: s.ctx.ids.uuid(),
        mode: `mode-${i}`,
        status: 'finished',
        players: [p.player_id, friend.player_id],
        result: i % 2 === 0 ? { winner: p.player_id } : { winner: friend.player_id },
        startedAt: new Date(now - 60_000),
        finishedAt: new Date(now),
      });
    }
    await recordFinishedMatch(s.ctx.db, { id: s.ctx.ids.uuid(), mode: 'elsewhere', status: 'finished', players: [friend.player_id], result: {}, startedAt: null, finishedAt: new Date() });

    const res = await summaryOf(p.player_id);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const d = res.body.data;
    expect(d).toMatchObject({
      player_id: p.player_id,
      providers: [],
      friends: 1,
      groups: 1,
      stats: { games_played: RECENT_MATCHES + 2, wins: (RECENT_MATCHES + 2) / 2 },
      wallets: [
        { currency: 'gold', balance: 7 },
        { currency: 'gems', balance: 2 },
      ],
      items: [{ item_def_id: gem, quantity: 3, acquired_at: expect.stringMatching(/Z$/) }],
      saves: [
        { slot: 'slot1', version: 2, updated_at: expect.stringMatching(/Z$/) },
        { slot: 'slot2', version: 1, updated_at: expect.stringMatching(/Z$/) },
      ],
      storage: { objects: 3, collections: 2 },
    });
    expect(d.recent_matches).toHaveLength(RECENT_MATCHES);
    expect(d.recent_matches.map((m: { mode: string }) => m.mode)).toEqual(Array.from({ length: RECENT_MATCHES }, (_, i) => `mode-${RECENT_MATCHES + 1 - i}`));
    // The roster is searched, never given out.
    expect(JSON.stringify(res.body)).not.toContain(friend.player_id);

    // The same picture the export gives, in far fewer columns.
    const t = (await opsGet(s, `/players/${p.player_id}/export`)).body.data.tables;
    expect(d.friends).toBe(t.friendships.filter((f: { status: string }) => f.status === 'accepted').length);
    expect(d.groups).toBe(t.group_members.length);
    expect(d.wallets).toEqual(t.wallets.map((w: { currency: string; balance: number }) => ({ currency: w.currency, balance: w.balance })));
    expect(d.saves.map((x: { slot: string }) => x.slot)).toEqual(t.cloud_saves.map((x: { slot: string }) => x.slot));
    expect(d.storage.objects).toBe(t.storage.length);
    expect(d.stats).toEqual({ games_played: t.player_stats[0].games_played, wins: t.player_stats[0].wins });
  });

  it('names a guest its provider, and answers empty lists for a player with nothing held', async () => {
    const guest = await guestSignIn(s, newDevice());
    expect(guest.status).toBe(200);
    const res = await summaryOf(guest.body.player_id);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toEqual({
      player_id: guest.body.player_id,
      providers: ['guest'],
      friends: 0,
      groups: 0,
      stats: res.body.data.stats === null ? null : { games_played: 0, wins: 0 },
      wallets: [],
      items: [],
      saves: [],
      storage: { objects: 0, collections: 0 },
      recent_matches: [],
    });
    // Never the device verifier or its salt.
    expect(JSON.stringify(res.body)).not.toMatch(/verifier|salt/);
  });

  it('is 400 ops.invalid_id for an id that is not a UUID and 404 ops.not_found for nobody', async () => {
    expectError(await summaryOf('not-a-uuid'), 400, 'ops.invalid_id');
    expectError(await summaryOf('00000000-0000-7000-8000-000000000000'), 404, 'ops.not_found');
  });

  it('needs the player_data class, as the export does', async () => {
    const p = await registerPlayer(s);
    expectOpsDenied(await opsGet(s, `/players/${p.player_id}/summary`, null));
    expectOpsDenied(await summaryOf(p.player_id, await opsToken(['read'])));
    expectOpsDenied(await summaryOf(p.player_id, p.access_token));
    expect((await summaryOf(p.player_id, await opsToken(['player_data']))).status).toBe(200);
  });
});
