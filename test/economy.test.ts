import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCatalogue, syncCatalogue } from '../runtime/catalogue/catalogue';
import { grant } from '../runtime/economy/wallets';
import { expectError, registerPlayer, type TestPlayer } from './support/accounts';
import { inProcessApp, type InProcessApp } from './support/app';
import { ledgerMismatches } from './support/economy';

/**
 * Wallets, ledger history, the store and inventories over REST (in process,
 * on a fresh database). Balances come from `grant`, the service behind
 * `game.economy.grant` (REST has no way to credit a wallet); the scripts'
 * own path is tested in economy-scripts.test.ts.
 */

const DAY = 24 * 3600_000;
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

const CATALOGUE = {
  currencies: [{ code: 'gold', name: 'Gold' }, { code: 'gems' }],
  items: [
    { slug: 'sword', name: 'Iron sword', category: 'weapon', rarity: 'rare', stackable: false },
    { slug: 'potion', name: 'Potion', category: 'consumable' },
  ],
  listings: [
    { slug: 'sword_gold', item: 'sword', currency: 'gold', price: 100, metadata: { badge: 'new' } },
    { slug: 'potion_gold', item: 'potion', currency: 'gold', price: 10 },
    { slug: 'potion_gems', item: 'potion', currency: 'gems', price: 1, valid_until: iso(Date.now() + 30 * DAY) },
    { slug: 'potion_paused', item: 'potion', currency: 'gold', price: 5, active: false },
    { slug: 'potion_soon', item: 'potion', currency: 'gold', price: 5, valid_from: iso(Date.now() + DAY) },
    { slug: 'potion_over', item: 'potion', currency: 'gold', price: 5, valid_from: iso(Date.now() - 2 * DAY), valid_until: iso(Date.now() - DAY) },
  ],
};

let app: InProcessApp;
const listing: Record<string, string> = {};
let itemDefs: Record<string, string> = {};

beforeAll(async () => {
  app = await inProcessApp();
  await syncCatalogue(app.ctx, parseCatalogue(JSON.stringify(CATALOGUE)));
  for (const r of await app.ctx.db.selectFrom('store_listings').select(['id', 'slug']).execute()) listing[r.slug] = r.id;
  itemDefs = Object.fromEntries((await app.ctx.db.selectFrom('item_defs').select(['id', 'slug']).execute()).map((r) => [r.slug, r.id]));
});
afterAll(async () => {
  await app?.close();
});

type Player = TestPlayer;
const player = () => registerPlayer(app, 'correct horse', 'eco');

const credit = (p: Player, currency: string, amount: number) => grant(app.ctx, { playerId: p.player_id, currency, amount, reason: 'test_credit' });
const get = (p: Player, path: string) => app.call('GET', `/api/v1${path}`, { token: p.access_token });
const buy = (p: Player, body: unknown) => app.call('POST', '/api/v1/store/purchase', { token: p.access_token, body });
const consume = (p: Player, body: unknown) => app.call('POST', '/api/v1/inventory/consume', { token: p.access_token, body });
const balanceOf = async (p: Player, currency: string) => ((await get(p, '/wallets')).body.wallets.find((w: { currency: string }) => w.currency === currency)?.balance ?? null) as number | null;

/** A stack of `quantity` (stacks bigger than one come from grants outside the REST surface). */
async function stack(p: Player, slug: string, quantity: number): Promise<string> {
  const id = app.ctx.ids.uuid();
  await app.ctx.db
    .insertInto('player_items')
    .values({ id, item_def_id: itemDefs[slug]!, player_id: p.player_id, quantity, metadata: sql`'{}'::jsonb`, acquired_at: new Date(), updated_at: new Date() })
    .execute();
  return id;
}

describe('wallets and the ledger', () => {
  it('lists one wallet per currency held, as {currency, balance}', async () => {
    const p = await player();
    expect((await get(p, '/wallets')).body).toEqual({ wallets: [] });
    await credit(p, 'gold', 250);
    await credit(p, 'gems', 3);
    const res = await get(p, '/wallets');
    expect(res.status).toBe(200);
    expect(res.body.wallets).toHaveLength(2);
    expect(res.body.wallets).toEqual(expect.arrayContaining([{ currency: 'gold', balance: 250 }, { currency: 'gems', balance: 3 }]));
  });

  it('answers the history newest first with every field, paged by limit and before', async () => {
    const p = await player();
    for (const amount of [5, 7, 11]) await credit(p, 'gold', amount);
    expect((await buy(p, { listing_id: listing.potion_gold })).status).toBe(200);
    const res = await get(p, '/wallets/gold/history');
    expect(res.status).toBe(200);
    const rows = res.body.transactions;
    expect(rows.map((r: { amount: number }) => r.amount)).toEqual([-10, 11, 7, 5]);
    expect(rows.map((r: { balance_after: number }) => r.balance_after)).toEqual([13, 23, 12, 5]);
    expect(rows[0]).toMatchObject({ reason: 'purchase', reference_type: 'store_listing', reference_id: listing.potion_gold, metadata: {} });
    expect(rows[1]).toMatchObject({ reason: 'test_credit', reference_type: null, reference_id: null });
    expect(rows[0].inserted_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(new Set(rows.map((r: { wallet_id: string }) => r.wallet_id)).size).toBe(1);

    const first = await get(p, '/wallets/gold/history?limit=2');
    expect(first.body.transactions.map((r: { amount: number }) => r.amount)).toEqual([-10, 11]);
    const next = await get(p, `/wallets/gold/history?limit=2&before=${first.body.transactions[1].id}`);
    expect(next.body.transactions.map((r: { amount: number }) => r.amount)).toEqual([7, 5]);
    // A malformed limit means the default; out of range is clamped.
    expect((await get(p, '/wallets/gold/history?limit=zero')).body.transactions).toHaveLength(4);
    expect((await get(p, '/wallets/gold/history?limit=0')).body.transactions).toHaveLength(1);
  });

  it('opens a wallet at 0 when a declared currency history is read, and none for an undeclared one', async () => {
    const p = await player();
    expect((await get(p, '/wallets/gems/history')).body).toEqual({ transactions: [] });
    expect((await get(p, '/wallets')).body.wallets).toEqual([{ currency: 'gems', balance: 0 }]);
    expect((await get(p, '/wallets/doubloons/history')).body).toEqual({ transactions: [] });
    expect((await get(p, `/wallets/${encodeURIComponent('gold coins')}/history`)).body).toEqual({ transactions: [] });
    expect((await get(p, '/wallets')).body.wallets).toEqual([{ currency: 'gems', balance: 0 }]);
  });

  it('needs a session', async () => {
    expectError(await app.call('GET', '/api/v1/wallets'), 401, 'unauthenticated');
    expectError(await app.call('GET', '/api/v1/inventory'), 401, 'unauthenticated');
    expectError(await app.call('POST', '/api/v1/store/purchase', { body: { listing_id: listing.potion_gold } }), 401, 'unauthenticated');
  });
});

describe('the store', () => {
  it('lists the active listings with their fields, and filters on currency', async () => {
    const p = await player();
    const res = await get(p, '/store');
    expect(res.status).toBe(200);
    const slugs = Object.fromEntries(Object.entries(listing).map(([slug, id]) => [id, slug]));
    expect(res.body.listings.map((l: { id: string }) => slugs[l.id])).toEqual(['sword_gold', 'potion_gold', 'potion_gems', 'potion_soon', 'potion_over']);
    expect(res.body.listings[0]).toEqual({
      id: listing.sword_gold,
      item_def_id: itemDefs.sword,
      currency: 'gold',
      price: 100,
      active: true,
      valid_from: null,
      valid_until: null,
      metadata: { badge: 'new' },
    });
    expect(res.body.listings[2].valid_until).toMatch(/Z$/);
    const gems = await get(p, '/store?currency=gems');
    expect(gems.body.listings.map((l: { id: string }) => l.id)).toEqual([listing.potion_gems]);
    expect((await get(p, '/store?currency=doubloons')).body).toEqual({ listings: [] });
  });

  it('sells one item: debits the price, writes the ledger row and adds a new inventory row', async () => {
    const p = await player();
    await credit(p, 'gold', 120);
    const res = await buy(p, { listing_id: listing.potion_gold, quantity: 5 });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.success).toBe(true);
    expect(res.body.item).toMatchObject({ item_def_id: itemDefs.potion, player_id: p.player_id, quantity: 1, metadata: {} });
    expect(res.body.item.acquired_at).toMatch(/Z$/);
    // Never merged into a stack, stackable or not; a `quantity` key buys one.
    const again = await buy(p, { listing_id: listing.potion_gold!.toUpperCase() });
    expect(again.status).toBe(200);
    expect(again.body.item.id).not.toBe(res.body.item.id);
    expect(await balanceOf(p, 'gold')).toBe(100);
    const items = (await get(p, '/inventory')).body.items;
    expect(items.map((i: { id: string }) => i.id)).toEqual([again.body.item.id, res.body.item.id]);
  });

  it('answers 402 economy.insufficient_funds and changes nothing', async () => {
    const p = await player();
    await credit(p, 'gold', 99);
    const res = await buy(p, { listing_id: listing.sword_gold });
    expectError(res, 402, 'economy.insufficient_funds');
    expect(await balanceOf(p, 'gold')).toBe(99);
    expect((await get(p, '/inventory')).body.items).toEqual([]);
    expect((await get(p, '/wallets/gold/history')).body.transactions).toHaveLength(1);
    // A buyer without a wallet in the currency has 0.
    const broke = await player();
    expectError(await buy(broke, { listing_id: listing.potion_gems }), 402, 'economy.insufficient_funds');
    expect((await get(broke, '/wallets')).body.wallets).toEqual([]);
  });

  it('answers 400 economy.listing_inactive for a paused listing and outside the validity window', async () => {
    const p = await player();
    await credit(p, 'gold', 100);
    for (const slug of ['potion_paused', 'potion_soon', 'potion_over']) {
      const res = await buy(p, { listing_id: listing[slug] });
      expectError(res, 400, 'economy.listing_inactive');
    }
    expect(await balanceOf(p, 'gold')).toBe(100);
  });

  it('answers 404 economy.listing_not_found for an unknown listing and 400 missing_field without one', async () => {
    const p = await player();
    expectError(await buy(p, { listing_id: crypto.randomUUID() }), 404, 'economy.listing_not_found');
    expectError(await buy(p, { listing_id: 'sword_gold' }), 404, 'economy.listing_not_found');
    const missing = await buy(p, {});
    expectError(missing, 400, 'missing_field');
    expect(missing.body.error.details.field).toBe('listing_id');
    expectError(await buy(p, { listing_id: 7 }), 400, 'missing_field');
    expectError(await buy(p, '[1]'), 400, 'invalid_payload');
  });

  it('answers 500 economy.purchase_failed when the database refuses the item, and charges nothing', async () => {
    const p = await player();
    await credit(p, 'gold', 100);
    // The database refuses this player's new items, as a broken constraint or a full disk would.
    await sql`create function refuse_item() returns trigger language plpgsql as $$
      begin if new.player_id = ${sql.lit(p.player_id)}::uuid then raise exception 'refused'; end if; return new; end $$`.execute(app.ctx.db);
    await sql`create trigger refuse_item before insert on player_items for each row execute function refuse_item()`.execute(app.ctx.db);
    try {
      expectError(await buy(p, { listing_id: listing.potion_gold }), 500, 'economy.purchase_failed');
      expect(await balanceOf(p, 'gold')).toBe(100);
      expect((await get(p, '/wallets/gold/history')).body.transactions).toHaveLength(1);
      expect((await get(p, '/inventory')).body.items).toEqual([]);
    } finally {
      await sql`drop trigger refuse_item on player_items`.execute(app.ctx.db);
      await sql`drop function refuse_item()`.execute(app.ctx.db);
    }
    expect((await buy(p, { listing_id: listing.potion_gold })).status).toBe(200);
    expect(await ledgerMismatches(app.ctx.db)).toEqual([]);
  });
});

describe('inventory', () => {
  it('lists the items newest first, paged by limit', async () => {
    const p = await player();
    const ids = [await stack(p, 'potion', 3), await stack(p, 'sword', 1), await stack(p, 'potion', 9)];
    const res = await get(p, '/inventory');
    expect(res.status).toBe(200);
    expect(res.body.items.map((i: { id: string }) => i.id)).toEqual([...ids].reverse());
    expect(res.body.items[0]).toMatchObject({ item_def_id: itemDefs.potion, player_id: p.player_id, quantity: 9 });
    expect((await get(p, '/inventory?limit=1')).body.items.map((i: { id: string }) => i.id)).toEqual([ids[2]]);
    const other = await player();
    expect((await get(other, '/inventory')).body.items).toEqual([]);
  });

  it('consumes part of a stack, then the rest, which deletes the row', async () => {
    const p = await player();
    const id = await stack(p, 'potion', 5);
    const res = await consume(p, { item_id: id, quantity: 2 });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ success: true, remaining_quantity: 3 });
    expect((await get(p, '/inventory')).body.items[0].quantity).toBe(3);
    expect((await consume(p, { item_id: id, quantity: 3 })).body).toEqual({ success: true, remaining_quantity: 0 });
    expect((await get(p, '/inventory')).body.items).toEqual([]);
    expectError(await consume(p, { item_id: id, quantity: 1 }), 404, 'inventory.item_not_found');
  });

  it('refuses every quantity that is not a JSON integer in [1, 1000000] with inventory.invalid_quantity, losing nothing', async () => {
    const p = await player();
    const id = await stack(p, 'potion', 5);
    const raw = (text: string) => consume(p, `{"item_id": "${id}", ${text}}`);
    for (const text of ['"quantity": 1.0', '"quantity": 1e0', '"quantity": 1E0', '"quantity": 2.50', '"quantity": "1"', '"quantity": 0', '"quantity": -1', '"quantity": 1000001', '"quantity": null', '"quantity": true', '"other": 1']) {
      const res = await raw(text);
      expectError(res, 400, 'inventory.invalid_quantity');
    }
    // The last value of a repeated key counts, as parsing reads it.
    expectError(await raw('"quantity": 1, "quantity": 1.0'), 400, 'inventory.invalid_quantity');
    expect((await raw('"quantity": 1.0, "quantity": 1')).status).toBe(200);
    // Nested look-alikes do not confuse the top-level reading.
    expect((await raw('"meta": {"quantity": 1.0, "s": "\\"quantity\\": 2.0"}, "quantity" : 1')).body).toEqual({ success: true, remaining_quantity: 3 });
    expect((await consume(p, { quantity: 1 })).body.error.code).toBe('inventory.invalid_quantity');
    expect((await consume(p, { item_id: id, quantity: 1_000_000 })).body.error.code).toBe('inventory.insufficient_quantity');
    expect((await get(p, '/inventory')).body.items[0].quantity).toBe(3);
  });

  it('answers 404 for an unknown item, 403 for another player’s, 400 for more than the stack holds', async () => {
    const [p, q] = [await player(), await player()];
    const id = await stack(p, 'potion', 2);
    expectError(await consume(p, { item_id: crypto.randomUUID(), quantity: 1 }), 404, 'inventory.item_not_found');
    expectError(await consume(p, { item_id: 'potion', quantity: 1 }), 404, 'inventory.item_not_found');
    expectError(await consume(q, { item_id: id, quantity: 1 }), 403, 'forbidden');
    expectError(await consume(p, { item_id: id, quantity: 3 }), 400, 'inventory.insufficient_quantity');
    expect((await get(p, '/inventory')).body.items[0].quantity).toBe(2);
  });
});

describe('under concurrency', () => {
  it('50 purchases against a balance that covers 20: exactly 20 succeed, 30 answer 402, the ledger sums to the balance', async () => {
    const p = await player();
    await credit(p, 'gold', 200);
    const answers = await Promise.all(Array.from({ length: 50 }, () => buy(p, { listing_id: listing.potion_gold })));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(20);
    expect(statuses.filter((s) => s === 402)).toHaveLength(30);
    for (const a of answers.filter((x) => x.status === 402)) expect(a.body.error.code).toBe('economy.insufficient_funds');
    expect(await balanceOf(p, 'gold')).toBe(0);
    expect((await get(p, '/inventory?limit=200')).body.items).toHaveLength(20);
    expect(await ledgerMismatches(app.ctx.db)).toEqual([]);
  });

  it('racing consumers of one stack never take it below zero and delete it exactly once', async () => {
    const p = await player();
    const id = await stack(p, 'potion', 10);
    const ones = await Promise.all(Array.from({ length: 25 }, () => consume(p, { item_id: id, quantity: 1 })));
    const ok = ones.filter((a) => a.status === 200);
    expect(ok).toHaveLength(10);
    expect(ok.map((a) => a.body.remaining_quantity).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    for (const a of ones.filter((x) => x.status !== 200)) expectError(a, 404, 'inventory.item_not_found');
    expect((await get(p, '/inventory')).body.items).toEqual([]);

    const other = await stack(p, 'potion', 10);
    const threes = await Promise.all(Array.from({ length: 8 }, () => consume(p, { item_id: other, quantity: 3 })));
    expect(threes.filter((a) => a.status === 200).map((a) => a.body.remaining_quantity).sort((a, b) => a - b)).toEqual([1, 4, 7]);
    for (const a of threes.filter((x) => x.status !== 200)) expectError(a, 400, 'inventory.insufficient_quantity');
    expect((await get(p, '/inventory')).body.items.map((i: { quantity: number }) => i.quantity)).toEqual([1]);
  });
});
