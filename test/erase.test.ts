import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../runtime/accounts/passwords';
import { parseCatalogue, syncCatalogue } from '../runtime/catalogue/catalogue';
import { grant } from '../runtime/economy/wallets';
import { findObject, putObject } from '../runtime/storage/storage';
import { expectError, registerPlayer, type TestPlayer } from './support/accounts';
import { startTestServer, type TestServer } from './support/server';
import { TestSocket } from './support/ws-client';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ rate_limits: { erase: { limit: 5, window: 60_000 }, ws_connect: { limit: 1000, window: 1000 } }, leaderboard_client_submit: ['erase_test'] });
});
afterAll(async () => {
  await s.close();
});

const erase = (token: string | undefined, body?: unknown) =>
  s.call('POST', '/api/v1/players/me/erase', { ...(token ? { token } : {}), ...(body !== undefined ? { body } : {}) });
const profile = (p: TestPlayer, token = p.access_token) => s.call('GET', `/api/v1/players/${p.player_id}`, { token });
const exists = async (id: string) => (await s.ctx.db.selectFrom('players').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;
const login = (p: TestPlayer) => s.call('POST', '/api/v1/auth/login', { body: { username: p.username, password: p.password } });

describe('POST /players/me/erase', () => {
  it('erases a password account confirmed by its password; every session dies at once', async () => {
    const p = await registerPlayer(s);
    const second = await login(p);
    const bystander = await registerPlayer(s);
    // Both sessions are resolved (and cached) before the erase.
    expect((await profile(p)).status).toBe(200);
    expect((await profile(p, second.body.access_token)).status).toBe(200);

    const res = await erase(p.access_token, { password: p.password });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ deleted: true });

    expect(await exists(p.player_id)).toBe(false);
    expectError(await profile(bystander, p.access_token), 401, 'unauthenticated');
    expectError(await profile(bystander, second.body.access_token), 401, 'unauthenticated');
    expectError(await s.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: p.refresh_token } }), 401, 'unauthenticated');
    expectError(await login(p), 401, 'auth.invalid_credentials');
    // A repeated call (a client retrying after a timeout) answers 401.
    expectError(await erase(p.access_token, { password: p.password }), 401, 'unauthenticated');
    // Others are untouched.
    expect((await profile(bystander)).status).toBe(200);
    // The username is free again.
    expect((await s.call('POST', '/api/v1/auth/register', { body: { username: p.username, password: 'another one' } })).status).toBe(200);
  });

  it("closes the erased player's live sockets, and the token no longer opens one", async () => {
    const p = await registerPlayer(s);
    const other = await registerPlayer(s);
    const mine = await TestSocket.open(s);
    const theirs = await TestSocket.open(s);
    expect((await mine.request('session.connect', { token: p.access_token })).type).toBe('session.connected');
    expect((await theirs.request('session.connect', { token: other.access_token })).type).toBe('session.connected');

    expect((await erase(p.access_token, { password: p.password })).status).toBe(200);
    await mine.closed;

    const again = await TestSocket.open(s);
    expect((await again.request('session.connect', { token: p.access_token })).type).toBe('error');
    again.ws.close();
    // Another player's socket stays up.
    expect((await theirs.request('session.heartbeat')).type).toBe('session.heartbeat');
    theirs.ws.close();
  });

  it('writes an audit row with the player as actor, in the same transaction', async () => {
    const p = await registerPlayer(s);
    expect((await erase(p.access_token, { password: p.password })).status).toBe(200);
    const rows = await s.ctx.db.selectFrom('ops_audit_entries').selectAll().where('target_id', '=', p.player_id).execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      actor_id: p.player_id,
      actor_source: 'player',
      actor_attested: false,
      action: 'player.erase',
      target_type: 'player',
      outcome: 'ok',
      succeeded_count: 1,
      failed_count: 0,
    });
    expect(rows[0]!.details).toMatchObject({ via: 'self', rows: { players: 1 } });
    expect(JSON.stringify(rows[0])).not.toContain(p.password);
  });

  it('keeps the store receipts of the player, with the player reference nulled', async () => {
    const p = await registerPlayer(s);
    const id = s.ctx.ids.uuid();
    const receipt = { id, player_id: p.player_id, provider: 'apple' as const, transaction_id: `erase-${id}`, original_transaction_id: null, product_id: 'gems_100' };
    await s.ctx.db.insertInto('iap_transactions').values(receipt).execute();
    const res = await erase(p.access_token, { password: p.password });
    expect(res.status).toBe(200);
    expect(await exists(p.player_id)).toBe(false);
    const kept = await s.ctx.db.selectFrom('iap_transactions').selectAll().where('id', '=', id).executeTakeFirst();
    expect(kept).toMatchObject({ ...receipt, player_id: null });
  });

  it('answers 400 missing_field when a password account sends no password', async () => {
    const p = await registerPlayer(s);
    for (const body of [undefined, {}, { password: 12345678 }, { password: null }]) {
      const res = await erase(p.access_token, body);
      expectError(res, 400, 'missing_field');
      expect(res.body.error.details.field).toBe('password');
    }
    expect(await exists(p.player_id)).toBe(true);
  });

  it('answers 403 player.confirmation_failed on a wrong password; nothing deleted, session still valid', async () => {
    const p = await registerPlayer(s);
    expectError(await erase(p.access_token, { password: 'not my password' }), 403, 'player.confirmation_failed');
    expect(await exists(p.player_id)).toBe(true);
    expect((await profile(p)).status).toBe(200);
  });

  it('takes the session alone as confirmation for an account without a password', async () => {
    const p = await registerPlayer(s);
    await s.ctx.db.updateTable('players').set({ hashed_password: null }).where('id', '=', p.player_id).execute();
    const res = await erase(p.access_token, {});
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ deleted: true });
    expect(await exists(p.player_id)).toBe(false);
  });

  it('answers 409 player.credentials_changed when the password changes between the check and the delete', async () => {
    const p = await registerPlayer(s);
    const changed = await hashPassword('a brand new password', s.ctx.settings.pbkdf2_iterations);
    s.ctx.seams = {
      async eraseAfterCheck(playerId) {
        await s.ctx.db.updateTable('players').set({ hashed_password: changed }).where('id', '=', playerId).execute();
      },
    };
    try {
      expectError(await erase(p.access_token, { password: p.password }), 409, 'player.credentials_changed');
    } finally {
      s.ctx.seams = undefined;
    }
    expect(await exists(p.player_id)).toBe(true);
    expect((await profile(p)).status).toBe(200);
    // A retry with the current password goes through.
    expectError(await erase(p.access_token, { password: p.password }), 403, 'player.confirmation_failed');
    expect((await erase(p.access_token, { password: 'a brand new password' })).status).toBe(200);
  });

  it('answers 401 when the account is erased between the check and the delete', async () => {
    const p = await registerPlayer(s);
    const twin = await login(p);
    s.ctx.seams = {
      async eraseAfterCheck() {
        // The other session erases the account first.
        s.ctx.seams = undefined;
        expect((await erase(twin.body.access_token, { password: p.password })).status).toBe(200);
      },
    };
    try {
      expectError(await erase(p.access_token, { password: p.password }), 401, 'unauthenticated');
    } finally {
      s.ctx.seams = undefined;
    }
  });

  it('answers 500 player.erase_failed and keeps everything when the transaction rolls back', async () => {
    const p = await registerPlayer(s);
    // A table nobody registered for erasure: its foreign key makes the final delete fail.
    await sql`create table erase_blocker (id uuid primary key, player_id uuid not null references players(id))`.execute(s.ctx.db);
    try {
      await sql`insert into erase_blocker values (${s.ctx.ids.uuid()}, ${p.player_id})`.execute(s.ctx.db);
      expect((await profile(p)).status).toBe(200);
      expectError(await erase(p.access_token, { password: p.password }), 500, 'player.erase_failed');
      expect(await exists(p.player_id)).toBe(true);
      expect((await profile(p)).status).toBe(200);
      const tokens = await s.ctx.db.selectFrom('player_tokens').select('id').where('user_id', '=', p.player_id).execute();
      expect(tokens.length).toBeGreaterThan(0);
      const audit = await s.ctx.db.selectFrom('ops_audit_entries').select('id').where('target_id', '=', p.player_id).execute();
      expect(audit).toHaveLength(0);
    } finally {
      await sql`drop table erase_blocker`.execute(s.ctx.db);
    }
  });

  it('has its own tight bucket per player, spent before the password hash', async () => {
    const p = await registerPlayer(s);
    const other = await registerPlayer(s);
    for (let i = 0; i < 5; i++) expectError(await erase(p.access_token, { password: 'wrong password' }), 403, 'player.confirmation_failed');
    const limited = await erase(p.access_token, { password: p.password });
    expectError(limited, 429, 'rate_limited');
    expect(limited.body.error.details.retry_after).toBeGreaterThan(0);
    expect(limited.headers.get('retry-after')).toBe(String(limited.body.error.details.retry_after));
    expect(await exists(p.player_id)).toBe(true);
    // Other routes and other players are unaffected.
    expect((await profile(p)).status).toBe(200);
    expect((await erase(other.access_token, { password: other.password })).status).toBe(200);
  });

  it("takes the player's wallets, ledger and inventory along, and nobody else's", async () => {
    await syncCatalogue(s.ctx, parseCatalogue(JSON.stringify({ currencies: [{ code: 'gold' }], items: [{ slug: 'gem', name: 'Gem', category: 'loot' }], listings: [{ slug: 'gem_gold', item: 'gem', currency: 'gold', price: 3 }] })));
    const listing = await s.ctx.db.selectFrom('store_listings').select('id').where('slug', '=', 'gem_gold').executeTakeFirstOrThrow();
    const [p, other] = [await registerPlayer(s), await registerPlayer(s)];
    for (const who of [p, other]) {
      await grant(s.ctx, { playerId: who.player_id, currency: 'gold', amount: 10, reason: 'test_credit' });
      expect((await s.call('POST', '/api/v1/store/purchase', { token: who.access_token, body: { listing_id: listing.id } })).status).toBe(200);
    }
    const holdings = async (playerId: string) => {
      const wallets = await s.ctx.db.selectFrom('wallets').select('id').where('player_id', '=', playerId).execute();
      const ledger = wallets.length === 0 ? [] : await s.ctx.db.selectFrom('transactions').select('id').where('wallet_id', 'in', wallets.map((w) => w.id)).execute();
      const items = await s.ctx.db.selectFrom('player_items').select('id').where('player_id', '=', playerId).execute();
      return { wallets: wallets.length, ledger: ledger.length, items: items.length };
    };
    expect(await holdings(p.player_id)).toEqual({ wallets: 1, ledger: 2, items: 1 });
    expect((await erase(p.access_token, { password: p.password })).status).toBe(200);
    expect(await holdings(p.player_id)).toEqual({ wallets: 0, ledger: 0, items: 0 });
    expect(await holdings(other.player_id)).toEqual({ wallets: 1, ledger: 2, items: 1 });
  });

  it("takes the player's saves and storage objects along; other players' rows and the scripts' shared namespace stay", async () => {
    const [p, other] = [await registerPlayer(s), await registerPlayer(s)];
    for (const who of [p, other]) {
      expect((await s.call('PUT', '/api/v1/saves/main', { token: who.access_token, body: { data: { level: 2 } } })).status).toBe(200);
      expect((await s.call('PUT', '/api/v1/storage/erase_test/k', { token: who.access_token, body: { value: 1, read_perm: 'public' } })).status).toBe(200);
    }
    await putObject(s.ctx, { owner: null, collection: 'erase_test', key: 'k' }, 'shared');
    const held = async (playerId: string) => ({
      saves: (await s.ctx.db.selectFrom('cloud_saves').select('id').where('player_id', '=', playerId).execute()).length,
      objects: (await s.ctx.db.selectFrom('storage').select('id').where('player_id', '=', playerId).execute()).length,
    });
    expect(await held(p.player_id)).toEqual({ saves: 1, objects: 1 });
    expect((await erase(p.access_token, { password: p.password })).status).toBe(200);
    expect(await held(p.player_id)).toEqual({ saves: 0, objects: 0 });
    expect(await held(other.player_id)).toEqual({ saves: 1, objects: 1 });
    expect(await findObject(s.ctx.db, { owner: null, collection: 'erase_test', key: 'k' })).toMatchObject({ value: 'shared' });
  });

  it("takes the player's leaderboard entries along, from the table and from the boards in memory", async () => {
    const [p, other] = [await registerPlayer(s), await registerPlayer(s)];
    const submit = (who: TestPlayer, score: number) => s.call('POST', '/api/v1/leaderboards/erase_test', { token: who.access_token, body: { score } });
    expect((await submit(p, 10)).status).toBe(200);
    expect((await submit(other, 5)).status).toBe(200);
    await s.leaderboardFlush.flush();
    // A better score after the flush is in memory only, waiting for the next one.
    expect((await submit(p, 20)).status).toBe(200);
    const rows = async (playerId: string) => (await s.ctx.db.selectFrom('leaderboard_entries').select('id').where('player_id', '=', playerId).execute()).length;
    expect(await rows(p.player_id)).toBe(1);
    expect((await erase(p.access_token, { password: p.password })).status).toBe(200);
    expect(await rows(p.player_id)).toBe(0);
    const board = await s.call('GET', '/api/v1/leaderboards/erase_test', { token: other.access_token });
    expect(board.body.entries.map((e: { player_id: string; rank: number }) => [e.player_id, e.rank])).toEqual([[other.player_id, 1]]);
    // The next flush does not write the erased player back.
    await s.leaderboardFlush.flush();
    expect(await rows(p.player_id)).toBe(0);
    expect(await rows(other.player_id)).toBe(1);
  });

  it('needs a session; the subject is never taken from the request', async () => {
    expectError(await erase(undefined, { password: 'whatever1' }), 401, 'unauthenticated');
    const p = await registerPlayer(s);
    const victim = await registerPlayer(s);
    const res = await s.call('POST', '/api/v1/players/me/erase', {
      token: p.access_token,
      body: { password: p.password, player_id: victim.player_id, id: victim.player_id },
    });
    expect(res.status).toBe(200);
    expect(await exists(p.player_id)).toBe(false);
    expect(await exists(victim.player_id)).toBe(true);
  });
});
