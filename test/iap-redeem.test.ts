import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { registerPlayer, type TestPlayer } from './support/accounts';
import { freshDatabase } from './support/database';
import { ledgerMismatches } from './support/economy';
import { FakeGooglePlay } from './support/fake-google-play';
import { gameDir, matchScript } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { TestSocket } from './support/ws-client';

/**
 * `game.receipts.get` / `game.receipts.redeem` from real Lua scripts:
 * receipts recorded through `POST /iap/google` against the local fake store,
 * then read and redeemed by rpc.lua methods and a match script's `join`. Two
 * nodes share one database, so redemptions racing from two RPC VMs really
 * meet in the database.
 */

const CATALOGUE = { currencies: [{ code: 'coins' }, { code: 'gems' }] };
const MAX = 2_147_483_647;

const RPC = `
rpc = {}
local function address(pid, p) return p.player or pid, p.provider or "google", p.transaction_id end
function rpc.get(pid, p)
  local player, provider, tx = address(pid, p)
  return { r = game.receipts.get(player, provider, tx) }
end
function rpc.redeem(pid, p)
  local player, provider, tx = address(pid, p)
  return { r = game.receipts.redeem(player, provider, tx, p.grants, p.reason) }
end
function rpc.grant(pid, p) return { r = game.economy.grant(pid, p.currency, p.amount) } end
function rpc.misuse(pid, p)
  local tx = p.transaction_id
  return {
    get_no_args = game.receipts.get(),
    get_provider = game.receipts.get(pid, "Google", tx),
    get_tx_number = game.receipts.get(pid, "google", 7),
    redeem_no_grants = game.receipts.redeem(pid, "google", tx),
    redeem_grants_number = game.receipts.redeem(pid, "google", tx, 5),
    redeem_grants_string = game.receipts.redeem(pid, "google", tx, "gems"),
    redeem_grants_list = game.receipts.redeem(pid, "google", tx, { 5 }),
    redeem_grants_empty = game.receipts.redeem(pid, "google", tx, {}),
    redeem_zero = game.receipts.redeem(pid, "google", tx, { gems = 0 }),
    redeem_negative = game.receipts.redeem(pid, "google", tx, { gems = -5 }),
    redeem_fraction = game.receipts.redeem(pid, "google", tx, { gems = 1.5 }),
    redeem_string_amount = game.receipts.redeem(pid, "google", tx, { gems = "5" }),
    redeem_past_ceiling = game.receipts.redeem(pid, "google", tx, { gems = ${MAX + 1} }),
    redeem_reason_number = game.receipts.redeem(pid, "google", tx, { gems = 5 }, 7),
    redeem_reason_long = game.receipts.redeem(pid, "google", tx, { gems = 5 }, string.rep("x", 65)),
    redeem_provider = game.receipts.redeem(pid, "steam", tx, { gems = 5 }),
  }
end
`;

const game = gameDir({
  // join redeems the receipt the test recorded under "match-<player id>".
  'match.lua': matchScript(
    'match_size = 2\nmin_players = 1\nquick_play = true',
    'function join(player_id, state) state.redeemed = game.receipts.redeem(player_id, "google", "match-" .. player_id, { coins = 5 }, "join_redeem") return state end\nfunction get_state(player_id, state) return { redeemed = state.redeemed } end',
  ),
  'rpc.lua': RPC,
  'catalogue.json': JSON.stringify(CATALOGUE),
});

let fake: FakeGooglePlay;
let a: TestServer;
let b: TestServer;

function googleSettings() {
  return {
    google_package_name: 'com.example.svc_game',
    google_service_account_key: fake.serviceAccount() as unknown as Record<string, unknown>,
    google_token_url: fake.tokenUrl,
    google_play_api_base: fake.base,
  };
}

beforeAll(async () => {
  fake = await FakeGooglePlay.start();
  const database = await freshDatabase();
  const settings = { ...googleSettings(), match_workers: 1, rate_limits: { ws_connect: { limit: 1000, window: 1000 } } };
  // Two nodes on one database; the second closes it.
  a = await startTestServer(settings, { gameDir: game.dir, database: { ...database, close: async () => {} } });
  b = await startTestServer(settings, { gameDir: game.dir, database });
});
afterAll(async () => {
  await a?.close();
  await b?.close();
  await fake?.close();
  game.remove();
});
afterEach(async () => {
  expect(await ledgerMismatches(a.ctx.db)).toEqual([]);
});

let serial = 0;
/** Buys `productId` at the fake store and records it for the player; returns the order id (the Google transaction id). */
async function recordPurchase(p: TestPlayer, productId = 'gems_100', orderId = `GPA.redeem-${process.pid}-${++serial}`): Promise<string> {
  const token = `token-redeem-${++serial}`;
  fake.purchases.set(token, { body: { purchaseTimeMillis: '1700000000000', purchaseState: 0, consumptionState: 0, orderId, acknowledgementState: 1 } });
  const res = await a.call('POST', '/api/v1/iap/google', { token: p.access_token, body: { product_id: productId, purchase_token: token } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body).toMatchObject({ order_id: orderId, duplicate: false });
  return orderId;
}

async function rpc(p: TestPlayer, method: string, params: Record<string, unknown>, on: TestServer = a) {
  const res = await on.call('POST', `/api/v1/rpc/game.${method}`, { token: p.access_token, body: { params } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.payload.result.r ?? res.body.payload.result;
}
const wallets = async (p: TestPlayer) => (await a.call('GET', '/api/v1/wallets', { token: p.access_token })).body.wallets as { currency: string; balance: number }[];
const history = async (p: TestPlayer, currency: string) => (await a.call('GET', `/api/v1/wallets/${currency}/history`, { token: p.access_token })).body.transactions;
const ledgerRows = (reference: string) => a.ctx.db.selectFrom('transactions').selectAll().where('reference_type', '=', 'iap').where('reference_id', '=', reference).execute();
const receiptRow = (orderId: string) => a.ctx.db.selectFrom('iap_transactions').selectAll().where('provider', '=', 'google').where('transaction_id', '=', orderId).executeTakeFirstOrThrow();

describe('game.receipts.get', () => {
  it('reads a receipt recorded for the player, without id or timestamps of the record, and says whether it was redeemed', async () => {
    const p = await registerPlayer(a);
    const tx = await recordPurchase(p, 'gems_100');
    expect(await rpc(p, 'get', { transaction_id: tx })).toEqual({
      ok: { player_id: p.player_id, provider: 'google', transaction_id: tx, product_id: 'gems_100', redeemed: false },
    });
    await rpc(p, 'redeem', { transaction_id: tx, grants: { gems: 100 } });
    const after = await rpc(p, 'get', { transaction_id: tx });
    expect(after).toEqual({
      ok: { player_id: p.player_id, provider: 'google', transaction_id: tx, product_id: 'gems_100', redeemed: true, redeemed_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/), redeemed_reason: 'iap_redeem' },
    });
  });

  it("answers not_found for an unknown receipt, another player's, and one under the other store", async () => {
    const [owner, other] = [await registerPlayer(a), await registerPlayer(a)];
    const tx = await recordPurchase(owner);
    expect(await rpc(other, 'get', { transaction_id: tx })).toEqual({ error: 'not_found' });
    expect(await rpc(owner, 'get', { transaction_id: 'GPA.never-bought' })).toEqual({ error: 'not_found' });
    expect(await rpc(owner, 'get', { transaction_id: tx, provider: 'apple' })).toEqual({ error: 'not_found' });
    expect(await rpc(owner, 'get', { transaction_id: tx, player: 'not-a-uuid' })).toEqual({ error: 'not_found' });
    expect(await rpc(owner, 'get', { transaction_id: '' })).toEqual({ error: 'not_found' });
  });
});

describe('game.receipts.redeem', () => {
  it('credits every grant once with ledger rows referencing the receipt, and refuses a second redemption', async () => {
    const p = await registerPlayer(a);
    const tx = await recordPurchase(p);
    await rpc(p, 'grant', { currency: 'coins', amount: 7 });
    expect(await rpc(p, 'redeem', { transaction_id: tx, grants: { gems: 100, coins: 50 } })).toEqual({
      ok: [
        { currency: 'coins', balance: 57 },
        { currency: 'gems', balance: 100 },
      ],
    });
    expect(await wallets(p)).toEqual([
      { currency: 'coins', balance: 57 },
      { currency: 'gems', balance: 100 },
    ]);
    expect(await history(p, 'gems')).toMatchObject([{ amount: 100, balance_after: 100, reason: 'iap_redeem', reference_type: 'iap', reference_id: `google:${tx}` }]);
    expect((await history(p, 'coins'))[0]).toMatchObject({ amount: 50, balance_after: 57, reason: 'iap_redeem', reference_type: 'iap', reference_id: `google:${tx}` });
    expect(await receiptRow(tx)).toMatchObject({ player_id: p.player_id, redeemed_at: expect.any(Date), redeemed_reason: 'iap_redeem' });

    expect(await rpc(p, 'redeem', { transaction_id: tx, grants: { gems: 100 } })).toEqual({ error: 'already_redeemed' });
    expect(await rpc(p, 'redeem', { transaction_id: tx, grants: { gems: 100 }, reason: 'again' })).toEqual({ error: 'already_redeemed' });
    expect(await wallets(p)).toEqual([
      { currency: 'coins', balance: 57 },
      { currency: 'gems', balance: 100 },
    ]);
    expect(await ledgerRows(`google:${tx}`)).toHaveLength(2);
  });

  it('puts a given reason on the ledger rows and the receipt', async () => {
    const p = await registerPlayer(a);
    const tx = await recordPurchase(p);
    expect(await rpc(p, 'redeem', { transaction_id: tx, grants: { gems: 3 }, reason: 'starter_pack' })).toEqual({ ok: [{ currency: 'gems', balance: 3 }] });
    expect((await history(p, 'gems'))[0]).toMatchObject({ reason: 'starter_pack', reference_id: `google:${tx}` });
    expect(await receiptRow(tx)).toMatchObject({ redeemed_reason: 'starter_pack' });
  });

  it("answers not_found for another player's receipt and an unknown one, changing nothing", async () => {
    const [owner, other] = [await registerPlayer(a), await registerPlayer(a)];
    const tx = await recordPurchase(owner);
    expect(await rpc(other, 'redeem', { transaction_id: tx, grants: { gems: 100 } })).toEqual({ error: 'not_found' });
    expect(await rpc(other, 'redeem', { transaction_id: 'GPA.never-bought', grants: { gems: 100 } })).toEqual({ error: 'not_found' });
    expect(await rpc(owner, 'redeem', { transaction_id: tx, provider: 'apple', grants: { gems: 100 } })).toEqual({ error: 'not_found' });
    expect(await wallets(other)).toEqual([]);
    expect(await wallets(owner)).toEqual([]);
    expect(await receiptRow(tx)).toMatchObject({ redeemed_at: null, redeemed_reason: null });
    // The owner still can.
    expect(await rpc(owner, 'redeem', { transaction_id: tx, grants: { gems: 100 } })).toEqual({ ok: [{ currency: 'gems', balance: 100 }] });
  });

  it('refuses bad grants and arguments before touching anything', async () => {
    const p = await registerPlayer(a);
    const tx = await recordPurchase(p);
    const misuse = await rpc(p, 'misuse', { transaction_id: tx });
    expect(Object.keys(misuse)).toHaveLength(16);
    for (const [name, answer] of Object.entries(misuse)) {
      expect(answer, name).toEqual({ error: expect.stringMatching(/^game\.receipts\.(get|redeem)\(/) });
    }
    expect(misuse.redeem_zero.error).toContain('grants must be a table of 1-16 currency = whole amount from 1 to 2147483647');
    expect(await wallets(p)).toEqual([]);
    expect(await receiptRow(tx)).toMatchObject({ redeemed_at: null });
  });

  it('rolls every grant back on an unknown currency or a balance past the ceiling; the receipt stays redeemable', async () => {
    const p = await registerPlayer(a);
    const tx = await recordPurchase(p);
    expect(await rpc(p, 'redeem', { transaction_id: tx, grants: { coins: 5, doubloons: 1 } })).toEqual({ error: 'unknown_currency' });
    expect(await rpc(p, 'redeem', { transaction_id: tx, grants: { ['x'.repeat(33)]: 1 } })).toEqual({ error: 'unknown_currency' });
    expect(await wallets(p)).toEqual([]);
    // coins sorts first and is credited before gems overflows: both go.
    expect(await rpc(p, 'grant', { currency: 'gems', amount: MAX })).toMatchObject({ ok: { balance: MAX } });
    expect(await rpc(p, 'redeem', { transaction_id: tx, grants: { coins: 5, gems: 1 } })).toEqual({ error: 'balance_overflow' });
    expect(await wallets(p)).toEqual([{ currency: 'gems', balance: MAX }]);
    expect(await ledgerRows(`google:${tx}`)).toEqual([]);
    expect(await receiptRow(tx)).toMatchObject({ redeemed_at: null });
    expect(await rpc(p, 'redeem', { transaction_id: tx, grants: { coins: 5 } })).toEqual({ ok: [{ currency: 'coins', balance: 5 }] });
  });

  it('pays a receipt exactly once when two nodes redeem it at the same moment', async () => {
    for (let round = 0; round < 3; round++) {
      const p = await registerPlayer(a);
      const tx = await recordPurchase(p);
      const calls = Array.from({ length: 8 }, (_, i) => rpc(p, 'redeem', { transaction_id: tx, grants: { gems: 100, coins: 1 } }, i % 2 === 0 ? a : b));
      const answers = await Promise.all(calls);
      expect(answers.filter((r) => r.ok)).toHaveLength(1);
      expect(answers.filter((r) => r.error === 'already_redeemed'), JSON.stringify(answers)).toHaveLength(7);
      expect(await wallets(p)).toEqual([
        { currency: 'coins', balance: 1 },
        { currency: 'gems', balance: 100 },
      ]);
      expect(await ledgerRows(`google:${tx}`)).toHaveLength(2);
    }
  });

  it("finds nothing to redeem in an erased player's receipt, which stays severed and unredeemed", async () => {
    const [gone, other] = [await registerPlayer(a), await registerPlayer(a)];
    const tx = await recordPurchase(gone);
    const erased = await a.call('POST', '/api/v1/players/me/erase', { token: gone.access_token, body: { password: gone.password } });
    expect(erased.status, JSON.stringify(erased.body)).toBe(200);
    expect(await rpc(other, 'get', { transaction_id: tx, player: gone.player_id })).toEqual({ error: 'not_found' });
    expect(await rpc(other, 'get', { transaction_id: tx })).toEqual({ error: 'not_found' });
    expect(await rpc(other, 'redeem', { transaction_id: tx, player: gone.player_id, grants: { gems: 100 } })).toEqual({ error: 'not_found' });
    expect(await rpc(other, 'redeem', { transaction_id: tx, grants: { gems: 100 } })).toEqual({ error: 'not_found' });
    expect(await receiptRow(tx)).toMatchObject({ player_id: null, redeemed_at: null });
    expect(await wallets(other)).toEqual([]);
  });

  it('works from a match script (join redeems the receipt recorded for the joining player)', async () => {
    const p = await registerPlayer(a);
    await recordPurchase(p, 'coins_pack', `match-${p.player_id}`);
    const socket = await TestSocket.open(a);
    try {
      expect((await socket.request('session.connect', { token: p.access_token })).type).toBe('session.connected');
      expect((await socket.request('match.find_or_create', { mode: 'default' })).type).toBe('match.joined');
      const state = await socket.next((f) => f.type === 'match.state' && f.payload.redeemed !== undefined);
      expect(state.payload.redeemed).toEqual({ ok: [{ currency: 'coins', balance: 5 }] });
    } finally {
      socket.close();
    }
    expect((await history(p, 'coins'))[0]).toMatchObject({ amount: 5, reason: 'join_redeem', reference_id: `google:match-${p.player_id}` });
  });
});

describe('the demo game', () => {
  it('claims a recorded pack once: the gems come from the product of the recorded receipt', async () => {
    const demo = await startTestServer({ ...googleSettings(), match_workers: 1 }, { gameDir: path.resolve(__dirname, '../examples/demo-game') });
    try {
      const p = await registerPlayer(demo);
      const token = `token-demo-${++serial}`;
      const orderId = `GPA.demo-${process.pid}-${serial}`;
      fake.purchases.set(token, { body: { purchaseTimeMillis: '1700000000000', purchaseState: 0, consumptionState: 0, orderId, acknowledgementState: 1 } });
      const recorded = await demo.call('POST', '/api/v1/iap/google', { token: p.access_token, body: { product_id: 'gems_550', purchase_token: token } });
      expect(recorded.status, JSON.stringify(recorded.body)).toBe(200);
      const claim = (transactionId: string) => demo.call('POST', '/api/v1/rpc/game.claim_pack', { token: p.access_token, body: { params: { provider: 'google', transaction_id: transactionId } } });
      const first = await claim(recorded.body.order_id);
      expect(first.status, JSON.stringify(first.body)).toBe(200);
      expect(first.body.payload.result).toEqual({ gems: 550 });
      const again = await claim(recorded.body.order_id);
      expect(again.status).toBe(422);
      expect(again.body.error).toMatchObject({ code: 'validation_failed', details: { reason: 'already_redeemed' } });
      const forged = await claim('GPA.never-bought');
      expect(forged.body.error).toMatchObject({ code: 'validation_failed', details: { reason: 'not_found' } });
      const wallet = await demo.call('GET', '/api/v1/wallets/gems/history', { token: p.access_token });
      expect(wallet.body.transactions).toMatchObject([{ amount: 550, balance_after: 550, reason: 'iap_redeem', reference_type: 'iap', reference_id: `google:${orderId}` }]);
      expect(await ledgerMismatches(demo.ctx.db)).toEqual([]);
    } finally {
      await demo.close();
    }
  });
});
