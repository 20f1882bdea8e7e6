import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './support/accounts';
import { ledgerMismatches } from './support/economy';
import { gameDir, matchScript } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, registerPlayer, type Frame } from './support/ws-client';

/**
 * `game.economy.*` from real Lua scripts (rpc.lua methods called over REST,
 * a match script's `join`), the catalogue read from the game directory at
 * boot and on change, and script and REST changes racing on one wallet.
 */

const CATALOGUE = {
  currencies: [{ code: 'coins', name: 'Coins' }, { code: 'gems' }],
  items: [{ slug: 'boots', name: 'Boots', category: 'gear', stackable: false }],
  listings: [
    { slug: 'boots_coins', item: 'boots', currency: 'coins', price: 30 },
    { slug: 'boots_paused', item: 'boots', currency: 'coins', price: 1, active: false },
  ],
};

const RPC = `
rpc = {}
function rpc.grant(pid, p) return { r = game.economy.grant(p.player or pid, p.currency, p.amount, p.reason) } end
function rpc.debit(pid, p) return { r = game.economy.debit(p.player or pid, p.currency, p.amount, p.reason) } end
function rpc.balance(pid, p) return { r = game.economy.balance(p.player or pid) } end
function rpc.buy(pid, p) return { r = game.economy.purchase(pid, p.listing) } end
function rpc.misuse(pid, p)
  return {
    no_args = game.economy.grant(),
    amount_string = game.economy.grant(pid, "coins", "5"),
    zero = game.economy.grant(pid, "coins", 0.9),
    negative = game.economy.debit(pid, "coins", -3),
    reason_number = game.economy.grant(pid, "coins", 1, 7),
    balance_number = game.economy.balance(5),
    purchase_table = game.economy.purchase(pid, {}),
  }
end
`;

const game = gameDir({
  'match.lua': matchScript(
    'match_size = 2\nmin_players = 1\nquick_play = true',
    'function join(player_id, state) state.bonus = game.economy.grant(player_id, "gems", 3, "join_bonus") return state end\nfunction get_state(player_id, state) return { bonus = state.bonus } end',
  ),
  'rpc.lua': RPC,
  'catalogue.json': JSON.stringify(CATALOGUE),
});

let s: TestServer;
let listing: Record<string, string>;

beforeAll(async () => {
  s = await startTestServer({ match_workers: 2, rate_limits: { ws_connect: { limit: 1000, window: 1000 } } }, { gameDir: game.dir });
  listing = Object.fromEntries((await s.ctx.db.selectFrom('store_listings').select(['id', 'slug']).execute()).map((r) => [r.slug, r.id]));
});
afterAll(async () => {
  await s.close();
  game.remove();
});

const rpc = async (token: string, method: string, params: Record<string, unknown> = {}) => {
  const res = await s.call('POST', `/api/v1/rpc/game.${method}`, { token, body: { params } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.payload.result.r ?? res.body.payload.result;
};
const wallets = async (token: string) => (await s.call('GET', '/api/v1/wallets', { token })).body.wallets as { currency: string; balance: number }[];
const history = async (token: string, currency: string) => (await s.call('GET', `/api/v1/wallets/${currency}/history`, { token })).body.transactions;

describe('the catalogue of the game directory', () => {
  it('is synced at boot: its listings are on sale, the paused one is not', async () => {
    const p = await registerPlayer(s);
    const res = await s.call('GET', '/api/v1/store', { token: p.token });
    expect(res.body.listings.map((l: { id: string }) => l.id)).toEqual([listing.boots_coins]);
    expect(res.body.listings[0]).toMatchObject({ currency: 'coins', price: 30, active: true });
  });

  it('follows edits of the file; a broken edit is logged and the last good catalogue stays', async () => {
    const p = await registerPlayer(s);
    const store = async () => (await s.call('GET', '/api/v1/store', { token: p.token })).body.listings as { id: string; price: number }[];
    game.write('catalogue.json', JSON.stringify({ ...CATALOGUE, listings: [{ ...CATALOGUE.listings[0], price: 25 }, { slug: 'boots_gems', item: 'boots', currency: 'gems', price: 2 }] }));
    await expect.poll(async () => (await store()).map((l) => l.price), { timeout: 10_000 }).toEqual([25, 2]);
    // The same listing keeps its id across edits; the one the file dropped is inactive, not deleted.
    expect((await store())[0]!.id).toBe(listing.boots_coins);
    const paused = await s.ctx.db.selectFrom('store_listings').select('active').where('slug', '=', 'boots_paused').executeTakeFirstOrThrow();
    expect(paused.active).toBe(false);

    game.write('catalogue.json', JSON.stringify({ ...CATALOGUE, listings: [{ slug: 'orphan', item: 'no_such_item', currency: 'coins', price: 1 }] }));
    await expect.poll(() => s.logs.some((l) => l.event === 'catalogue_reload_failed'), { timeout: 10_000 }).toBe(true);
    const failure = s.logs.find((l) => l.event === 'catalogue_reload_failed')!;
    expect(String(failure.error)).toContain('listings[0] "orphan"');
    expect((await store()).map((l) => l.price)).toEqual([25, 2]);

    game.write('catalogue.json', JSON.stringify(CATALOGUE));
    await expect.poll(async () => (await store()).map((l) => l.id), { timeout: 10_000 }).toEqual([listing.boots_coins]);
  });
});

describe('game.economy from a script', () => {
  it('grants: {ok = wallet}, the reason on the ledger row (admin_grant by default), the amount truncated', async () => {
    const p = await registerPlayer(s);
    expect(await rpc(p.token, 'grant', { currency: 'coins', amount: 40, reason: 'quest_reward' })).toEqual({ ok: { player_id: p.playerId, currency: 'coins', balance: 40 } });
    expect(await rpc(p.token, 'grant', { currency: 'coins', amount: 2.9 })).toEqual({ ok: { player_id: p.playerId, currency: 'coins', balance: 42 } });
    const rows = await history(p.token, 'coins');
    expect(rows.map((r: { amount: number; reason: string }) => [r.amount, r.reason])).toEqual([
      [2, 'admin_grant'],
      [40, 'quest_reward'],
    ]);
  });

  it('debits: insufficient_funds leaves the balance, purchase is the default reason', async () => {
    const p = await registerPlayer(s);
    await rpc(p.token, 'grant', { currency: 'coins', amount: 10 });
    expect(await rpc(p.token, 'debit', { currency: 'coins', amount: 11 })).toEqual({ error: 'insufficient_funds' });
    expect(await rpc(p.token, 'debit', { currency: 'gems', amount: 1 })).toEqual({ error: 'insufficient_funds' });
    expect(await rpc(p.token, 'debit', { currency: 'coins', amount: 4 })).toEqual({ ok: { player_id: p.playerId, currency: 'coins', balance: 6 } });
    expect((await history(p.token, 'coins'))[0]).toMatchObject({ amount: -4, balance_after: 6, reason: 'purchase' });
    expect(await wallets(p.token)).toEqual([{ currency: 'coins', balance: 6 }]);
  });

  it('reads every wallet with balance', async () => {
    const p = await registerPlayer(s);
    expect(await rpc(p.token, 'balance')).toEqual({ ok: [] });
    await rpc(p.token, 'grant', { currency: 'coins', amount: 3 });
    await rpc(p.token, 'grant', { currency: 'gems', amount: 1 });
    expect(await rpc(p.token, 'balance')).toEqual({ ok: [{ currency: 'coins', balance: 3 }, { currency: 'gems', balance: 1 }] });
  });

  it('names what it refuses: unknown currency, unknown player, bad arguments', async () => {
    const p = await registerPlayer(s);
    expect(await rpc(p.token, 'grant', { currency: 'doubloons', amount: 1 })).toEqual({ error: 'unknown_currency' });
    expect(await rpc(p.token, 'grant', { currency: 'coins', amount: 1, player: '0190c1f2-aaaa-7000-8000-000000000001' })).toEqual({ error: 'player_not_found' });
    expect(await rpc(p.token, 'grant', { currency: 'coins', amount: 1, player: 'bob' })).toEqual({ error: 'player_not_found' });
    expect(await rpc(p.token, 'grant', { currency: 'coins', amount: 2_147_483_647 })).toMatchObject({ ok: { balance: 2_147_483_647 } });
    expect(await rpc(p.token, 'grant', { currency: 'coins', amount: 1 })).toEqual({ error: 'balance_overflow' });
    const misuse = await rpc(p.token, 'misuse');
    for (const [name, answer] of Object.entries(misuse)) {
      expect(answer, name).toEqual({ error: expect.stringMatching(/^game\.economy\.\w+\(/) });
    }
    expect(await wallets(p.token)).toEqual([{ currency: 'coins', balance: 2_147_483_647 }]);
    expect(await ledgerMismatches(s.ctx.db)).toEqual([]);
  });

  it('purchases through the store: the item lands in the inventory, refusals are reasons', async () => {
    const p = await registerPlayer(s);
    await rpc(p.token, 'grant', { currency: 'coins', amount: 45 });
    const bought = await rpc(p.token, 'buy', { listing: listing.boots_coins });
    expect(bought.ok).toMatchObject({ player_id: p.playerId, quantity: 1, metadata: {} });
    expect(bought.ok.id).toBeUndefined();
    expect(bought.ok.updated_at).toBeUndefined();
    expect(await rpc(p.token, 'buy', { listing: listing.boots_coins })).toEqual({ error: 'insufficient_funds' });
    expect(await rpc(p.token, 'buy', { listing: listing.boots_paused })).toEqual({ error: 'listing_inactive' });
    expect(await rpc(p.token, 'buy', { listing: '0190c1f2-aaaa-7000-8000-000000000001' })).toEqual({ error: 'listing_not_found' });
    const items = (await s.call('GET', '/api/v1/inventory', { token: p.token })).body.items;
    expect(items).toHaveLength(1);
    expect(items[0].item_def_id).toBe(bought.ok.item_def_id);
    expect((await history(p.token, 'coins'))[0]).toMatchObject({ amount: -30, reason: 'purchase', reference_type: 'store_listing', reference_id: listing.boots_coins });
  });

  it('works from a match script too (join grants a bonus)', async () => {
    const { socket, token, playerId } = await connectPlayer(s, 'eco');
    const joined = await socket.request('match.find_or_create', { mode: 'default' });
    expect(joined.type).toBe('match.joined');
    const state = await socket.next((f) => f.type === 'match.state' && f.payload.bonus !== undefined);
    expect(state.payload.bonus).toEqual({ ok: { player_id: playerId, currency: 'gems', balance: 3 } });
    expect(await wallets(token)).toEqual([{ currency: 'gems', balance: 3 }]);
    expect((await history(token, 'gems'))[0]).toMatchObject({ reason: 'join_bonus', amount: 3 });
    socket.close();
  });

  it('loses no update when script grants and debits race REST purchases on one wallet', async () => {
    const p = await registerPlayer(s);
    await rpc(p.token, 'grant', { currency: 'coins', amount: 600 });
    const buys = Array.from({ length: 10 }, () => s.call('POST', '/api/v1/store/purchase', { token: p.token, body: { listing_id: listing.boots_coins } }));
    const grants = Array.from({ length: 20 }, () => rpc(p.token, 'grant', { currency: 'coins', amount: 7 }));
    const debits = Array.from({ length: 20 }, () => rpc(p.token, 'debit', { currency: 'coins', amount: 5 }));
    const [bought, granted, debited] = await Promise.all([Promise.all(buys), Promise.all(grants), Promise.all(debits)]);
    expect(bought.map((b) => b.status)).toEqual(Array(10).fill(200));
    expect(granted.every((g) => g.ok)).toBe(true);
    expect(debited.every((d) => d.ok)).toBe(true);
    // 600 - 10·30 + 20·7 - 20·5: every change applied exactly once.
    expect(await wallets(p.token)).toEqual([{ currency: 'coins', balance: 340 }]);
    expect(await history(p.token, 'coins')).toHaveLength(50);
    expect(await ledgerMismatches(s.ctx.db)).toEqual([]);
  });

  it('rolls a change back when the script stopped waiting for it (its deadline passed first)', async () => {
    const p = await registerPlayer(s);
    await rpc(p.token, 'grant', { currency: 'coins', amount: 10 });
    const wallet = await s.ctx.db.selectFrom('wallets').select('id').where('player_id', '=', p.playerId).executeTakeFirstOrThrow();
    // Hold the wallet (on the embedded database, the one connection) past the RPC deadline (200 ms here).
    let release!: () => void;
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = s.ctx.db.transaction().execute(async (trx) => {
      await trx.selectFrom('wallets').select('id').where('id', '=', wallet.id).forUpdate().execute();
      locked();
      await new Promise<void>((r) => (release = r));
    });
    await isLocked;
    try {
      const late = await s.call('POST', '/api/v1/rpc/game.grant', { token: p.token, body: { params: { currency: 'coins', amount: 5 } } });
      // The callback fails on its deadline, or (reaching it on the very millisecond) sees the binding give up.
      expect(late.body.type === 'rpc.error' || late.body.payload.result.r?.error === 'binding_timeout', JSON.stringify(late.body)).toBe(true);
    } finally {
      release();
      await holder;
    }
    // The abandoned grant queued on the wallet ahead of this one; only this one may land.
    expect(await rpc(p.token, 'grant', { currency: 'coins', amount: 1 })).toMatchObject({ ok: { balance: 11 } });
    expect((await history(p.token, 'coins')).map((r: { amount: number }) => r.amount)).toEqual([1, 10]);
  });

  it('is absent when scripts run on the main thread (match_workers 0), which cannot wait for the database', async () => {
    const inline = await startTestServer({ match_workers: 0 }, { gameDir: game.dir });
    try {
      const p = await registerPlayer(inline);
      const res = await inline.call('POST', '/api/v1/rpc/game.balance', { token: p.token, body: { params: {} } });
      expectError(res, 500, 'internal');
      expect(inline.logs.some((l) => l.event === 'script_bindings_unavailable')).toBe(true);
    } finally {
      await inline.close();
    }
  });
});

describe('an awaited binding inside tick', () => {
  const paying = gameDir({
    'match.lua': matchScript(
      'match_size = 1\nmin_players = 1\nquick_play = true',
      `function handle_input(player_id, input, state) state.pay = player_id return state end
function tick(state)
  if state.pay then
    state.attempts = (state.attempts or 0) + 1
    state.paid = game.economy.grant(state.pay, "coins", 5, "prize")
    state.pay = nil
  end
  return state
end
function get_state(player_id, state) return { paid = state.paid, attempts = state.attempts } end`,
    ),
    'catalogue.json': JSON.stringify(CATALOGUE),
  });
  afterAll(() => paying.remove());

  /**
   * Holds the player's wallet from before the paying tick until 600 ms after
   * the input that asks for the payment. The tick comes within 100 ms of the
   * input (400 ms on a badly loaded machine), so its grant waits well past
   * the tick's 200 ms deadline, which is wide enough that scheduling alone
   * cannot pass it.
   */
  async function payWhileHeld(waitMs: number) {
    const t = await startTestServer({ match_workers: 1, lua_time_budget_ms: { init_tick: 200, other: 200 }, lua_binding_wait_ms: waitMs }, { gameDir: paying.dir });
    try {
      const { socket, token, playerId } = await connectPlayer(t, 'hold');
      const wallet = await t.ctx.db.insertInto('wallets').values({ id: randomUUID(), player_id: playerId, currency: 'coins', balance: 0, updated_at: new Date() }).returning('id').executeTakeFirstOrThrow();
      expect((await socket.request('match.find_or_create', { mode: 'default' })).type).toBe('match.joined');
      let release!: () => void;
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => (locked = r));
      const holder = t.ctx.db.transaction().execute(async (trx) => {
        await trx.selectFrom('wallets').select('id').where('id', '=', wallet.id).forUpdate().execute();
        locked();
        await new Promise<void>((r) => (release = r));
      });
      await isLocked;
      socket.send({ type: 'match.input', payload: { go: true } });
      await new Promise((r) => setTimeout(r, 600));
      release();
      await holder;
      const settled = await until(() => t.logs.some((l) => l.event === 'lua_callback_failed'), socket.next((f) => f.type === 'match.state' && f.payload.paid !== undefined));
      const history = (await t.call('GET', '/api/v1/wallets/coins/history', { token })).body.transactions;
      socket.close();
      return { playerId, state: settled?.payload, history, failed: t.logs.filter((l) => l.event === 'lua_callback_failed') };
    } finally {
      await t.close();
    }
  }

  /** The first of: a failed callback logged (undefined), or the frame. */
  async function until(failed: () => boolean, frame: Promise<Frame>): Promise<Frame | undefined> {
    let done = false;
    const polled = (async () => {
      while (!done && !failed()) await new Promise((r) => setTimeout(r, 20));
      return undefined;
    })();
    try {
      return await Promise.race([frame, polled]);
    } finally {
      done = true;
      frame.catch(() => undefined);
    }
  }

  it('excuses the wait: the grant lands on the first try and the tick that made it does not fail', async () => {
    // A generous allowance, so that this machine's load cannot decide the test; the hold is what passes the deadline.
    const { playerId, state, history, failed } = await payWhileHeld(2000);
    expect(state).toEqual({ paid: { ok: { player_id: playerId, currency: 'coins', balance: 5 } }, attempts: 1 });
    expect(history).toHaveLength(1);
    expect(failed).toEqual([]);
  });

  it('counts the wait against the deadline once the allowance is spent (here none): the grant is given up and does not land', async () => {
    const { state, failed, history } = await payWhileHeld(0);
    // Given up at the deadline: the script either reads binding_timeout (finishing within that millisecond) or is stopped.
    if (state) expect(state.paid).toEqual({ error: 'binding_timeout' });
    else expect(failed[0]).toMatchObject({ callback: 'tick', reason_class: 'timeout' });
    // Given up before it could commit, so it rolled back; only a retry by the script could land one.
    expect(history.length).toBeLessThanOrEqual(1);
  });
});

describe('the demo game', () => {
  it('sells its catalogue and pays the arena winner 10 coins', async () => {
    const demo = await startTestServer({ matchmaker_tick_ms: 50, match_workers: 1 }, { gameDir: path.resolve(__dirname, '../examples/demo-game') });
    try {
      const [a, b] = [await connectPlayer(demo), await connectPlayer(demo)];
      const store = await demo.call('GET', '/api/v1/store', { token: a.token });
      expect(store.body.listings.map((l: { currency: string; price: number }) => `${l.price} ${l.currency}`)).toEqual(['50 coins', '10 coins', '5 gems']);
      await a.socket.request('matchmaker.add', { mode: 'arena' });
      await b.socket.request('matchmaker.add', { mode: 'arena' });
      await a.socket.next('match.matched');
      await b.socket.next('match.matched');
      // b walks away: a wins by forfeit.
      await b.socket.request('match.leave');
      expect((await a.socket.next('match.finished')).payload.result).toEqual({ winner: a.playerId, reason: 'forfeit' });
      const wallet = await demo.call('GET', '/api/v1/wallets/coins/history', { token: a.token });
      expect(wallet.body.transactions).toMatchObject([{ amount: 10, balance_after: 10, reason: 'arena_win' }]);
      a.socket.close();
      b.socket.close();
    } finally {
      await demo.close();
    }
  });
});
