import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHost } from '../bench/_children';
import { BootRefusal, createHost } from '../host/host';
import { parseSettings } from '../runtime/contracts/settings';
import { parseCatalogue, syncCatalogue } from '../runtime/catalogue/catalogue';
import { debit, grant } from '../runtime/economy/wallets';
import { silentLogger } from '../runtime/platform/log';
import { freshUsername } from './support/accounts';
import { inProcessApp, type InProcessApp } from './support/app';
import { gameDir, matchScript } from './support/game-dir';

/**
 * The economy catalogue: what refuses the boot (and how the refusal names
 * the entry), and what a sync keeps, changes and deactivates.
 */

const GOOD = {
  currencies: [{ code: 'gold' }],
  items: [{ slug: 'sword', name: 'Sword', category: 'weapon' }],
  listings: [{ slug: 'sword_gold', item: 'sword', currency: 'gold', price: 10 }],
};

/** The message a catalogue refuses the boot with, through the production createHost (no database is opened). */
async function refusal(catalogue: string): Promise<string> {
  const game = gameDir({ 'match.lua': matchScript('match_size = 1'), 'catalogue.json': catalogue });
  try {
    await createHost({
      settings: parseSettings({}).settings,
      database: async () => {
        throw new Error('the database must not be opened for a game that cannot serve');
      },
      gameDir: game.dir,
      log: silentLogger,
    });
  } catch (err) {
    expect(err).toBeInstanceOf(BootRefusal);
    return (err as Error).message;
  } finally {
    game.remove();
  }
  throw new Error('the boot was not refused');
}

const withListing = (listing: Record<string, unknown>) => JSON.stringify({ ...GOOD, listings: [GOOD.listings[0], { slug: 'bad', item: 'sword', currency: 'gold', price: 1, ...listing }] });

describe('a catalogue that cannot be used stops the boot, naming the entry', () => {
  it.each([
    ['not JSON', '{"currencies": [', /^catalogue\.json: not valid JSON/],
    ['an unknown key (a typo)', withListing({ prise: 5 }), /^catalogue\.json: listings\[1\] "bad": .*prise/],
    ['an undeclared item', withListing({ item: 'axe' }), /^catalogue\.json: listings\[1\] "bad": item "axe" is not declared under items$/],
    ['an undeclared currency', withListing({ currency: 'gems' }), /^catalogue\.json: listings\[1\] "bad": currency "gems" is not declared under currencies$/],
    ['a price that is not a positive integer', withListing({ price: 1.5 }), /^catalogue\.json: listings\[1\] "bad"\.price: /],
    ['a free listing', withListing({ price: 0 }), /^catalogue\.json: listings\[1\] "bad"\.price: /],
    ['a window that ends before it starts', withListing({ valid_from: '2026-02-01T00:00:00Z', valid_until: '2026-01-01T00:00:00Z' }), /listings\[1\] "bad"\.valid_until: valid_until must be later than valid_from/],
    ['a date that is not ISO 8601', withListing({ valid_from: 'tomorrow' }), /listings\[1\] "bad"\.valid_from: /],
    ['a slug declared twice', JSON.stringify({ ...GOOD, items: [...GOOD.items, { slug: 'sword', name: 'Other', category: 'x' }] }), /^catalogue\.json: items\[1\] "sword": declared twice$/],
    ['an unknown rarity', JSON.stringify({ ...GOOD, items: [{ ...GOOD.items[0], rarity: 'mythic' }] }), /^catalogue\.json: items\[0\] "sword"\.rarity: /],
    ['a currency code with a space', JSON.stringify({ ...GOOD, currencies: [{ code: 'gold coins' }] }), /^catalogue\.json: currencies\[0\] "gold coins"\.code: /],
  ])('%s', async (_what, text, message) => {
    expect(await refusal(text)).toMatch(message);
  });

  it('from the production entry: exit 2, one line naming the file and the entry', async () => {
    const game = gameDir({ 'match.lua': matchScript('match_size = 1'), 'catalogue.json': withListing({ item: 'axe' }) });
    try {
      const h = await startHost({ GAME_DIR: game.dir, SVC_DATA_DIR: path.join(mkdtempSync(path.join(tmpdir(), 'svc-catalogue-')), 'data') }, [], { from: 'sources' });
      expect(await h.exited).toBe(2);
      const lines = h.stderr().trim().split('\n');
      expect(lines).toEqual(['svc: catalogue.json: listings[1] "bad": item "axe" is not declared under items']);
    } finally {
      game.remove();
    }
  }, 60_000);
});

describe('syncing the catalogue into the tables', () => {
  let app: InProcessApp;
  beforeAll(async () => {
    app = await inProcessApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  const sync = (catalogue: unknown) => syncCatalogue(app.ctx, parseCatalogue(JSON.stringify(catalogue)));
  const listings = () => app.ctx.db.selectFrom('store_listings').select(['id', 'slug', 'active', 'price']).orderBy('slug').execute();
  async function player(): Promise<{ player_id: string; access_token: string }> {
    return (await app.call('POST', '/api/v1/auth/register', { body: { username: freshUsername('cat'), password: 'correct horse' } })).body;
  }

  it('writes nothing when nothing changed, and keeps every id across syncs', async () => {
    const first = await sync(GOOD);
    expect(first).toMatchObject({ currencies: 1, items: 1, listings: 1 });
    const before = await listings();
    expect(await sync(GOOD)).toMatchObject({ currencies: 0, items: 0, listings: 0, deactivated: 0 });
    expect(await sync({ ...GOOD, listings: [{ ...GOOD.listings[0], price: 12 }] })).toMatchObject({ currencies: 0, items: 0, listings: 1, deactivated: 0 });
    expect((await listings()).map((l) => [l.id, l.price])).toEqual([[before[0]!.id, 12]]);
  });

  it('deactivates what the file drops, never deletes what wallets, the ledger or inventories hold, and revives it with its id', async () => {
    await sync({ currencies: [{ code: 'gold' }, { code: 'gems' }], items: [...GOOD.items, { slug: 'gem', name: 'Gem', category: 'loot' }], listings: [...GOOD.listings, { slug: 'gem_gems', item: 'gem', currency: 'gems', price: 2 }] });
    const p = await player();
    await grant(app.ctx, { playerId: p.player_id, currency: 'gems', amount: 5, reason: 'test_credit' });
    const gemListing = (await listings()).find((l) => l.slug === 'gem_gems')!;
    expect((await app.call('POST', '/api/v1/store/purchase', { token: p.access_token, body: { listing_id: gemListing.id } })).status).toBe(200);

    // The next version of the game drops gems and the gem entirely.
    const counts = await sync(GOOD);
    expect(counts.deactivated).toBe(2);
    expect((await listings()).find((l) => l.slug === 'gem_gems')).toMatchObject({ id: gemListing.id, active: false });
    expect(await app.ctx.db.selectFrom('item_defs').select('slug').where('slug', '=', 'gem').executeTakeFirst()).toBeDefined();
    const store = await app.call('GET', '/api/v1/store', { token: p.access_token });
    expect(store.body.listings.map((l: { id: string }) => l.id)).not.toContain(gemListing.id);
    expect((await app.call('POST', '/api/v1/store/purchase', { token: p.access_token, body: { listing_id: gemListing.id } })).body.error.code).toBe('economy.listing_inactive');
    // Balances in a dropped currency stay readable and spendable; nobody opens a new wallet in it.
    expect((await app.call('GET', '/api/v1/wallets', { token: p.access_token })).body.wallets).toEqual([{ currency: 'gems', balance: 3 }]);
    expect((await debit(app.ctx, { playerId: p.player_id, currency: 'gems', amount: 1, reason: 'test_debit' })).balance).toBe(2);
    const q = await player();
    await expect(grant(app.ctx, { playerId: q.player_id, currency: 'gems', amount: 1, reason: 'test_credit' })).rejects.toMatchObject({ details: { reason: 'unknown_currency' } });
    expect((await app.call('GET', '/api/v1/wallets/gems/history', { token: q.access_token })).body.transactions).toEqual([]);
    expect((await app.call('GET', '/api/v1/wallets', { token: q.access_token })).body.wallets).toEqual([]);
    expect((await app.call('GET', '/api/v1/inventory', { token: p.access_token })).body.items).toHaveLength(1);

    // Declared again, it is on sale again under the same id.
    await sync({ ...GOOD, currencies: [{ code: 'gold' }, { code: 'gems' }], items: [...GOOD.items, { slug: 'gem', name: 'Gem', category: 'loot' }], listings: [...GOOD.listings, { slug: 'gem_gems', item: 'gem', currency: 'gems', price: 2 }] });
    expect((await listings()).find((l) => l.slug === 'gem_gems')).toMatchObject({ id: gemListing.id, active: true });
  });

  it('lets nodes sync at once (one after the other, never a half-written catalogue)', async () => {
    const a = { ...GOOD, listings: [...GOOD.listings, { slug: 'race_a', item: 'sword', currency: 'gold', price: 1 }] };
    const b = { ...GOOD, listings: [...GOOD.listings, { slug: 'race_b', item: 'sword', currency: 'gold', price: 2 }] };
    await Promise.all([sync(a), sync(b), sync(a), sync(b)]);
    const active = (await listings()).filter((l) => l.active).map((l) => l.slug);
    expect(active.length).toBe(2);
    expect(active[1]).toBe('sword_gold');
    expect(['race_a', 'race_b']).toContain(active[0]);
  });
});
