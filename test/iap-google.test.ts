import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, registerPlayer, type TestPlayer as Player } from './support/accounts';
import type { InProcessApp } from './support/app';
import { Deployments } from './support/deployments';
import { FakeGooglePlay, type FakeAnswer } from './support/fake-google-play';

/**
 * `POST /iap/google` against a local fake of the store's token endpoint and
 * publisher API (test/support/fake-google-play.ts). Deployments that differ
 * only in settings share one database.
 */

const PACKAGE = 'com.example.svc_game';
const TIMEOUT_MS = 300;

let deployments: Deployments;
let fake: FakeGooglePlay;
let app: InProcessApp;
const dir = mkdtempSync(path.join(tmpdir(), 'svc-iap-google-'));

function settings(key: unknown) {
  return {
    google_package_name: PACKAGE,
    google_service_account_key: key as Record<string, unknown>,
    google_token_url: fake.tokenUrl,
    google_play_api_base: fake.base,
    provider_timeout_ms: TIMEOUT_MS,
  };
}

beforeAll(async () => {
  deployments = await Deployments.open();
  fake = await FakeGooglePlay.start();
  app = await deployments.start(settings(fake.serviceAccount()));
});
afterAll(async () => {
  await deployments?.close();
  await fake?.close();
  rmSync(dir, { recursive: true, force: true });
});

const player = () => registerPlayer(app);

let serial = 0;
/** A purchase the fake knows under a fresh token; returns the token. */
function purchase(overrides: Record<string, unknown> = {}, answer: Omit<FakeAnswer, 'body'> = {}): string {
  const token = `token-${Date.now().toString(36)}-${++serial}`;
  fake.purchases.set(token, {
    ...answer,
    body: {
      kind: 'androidpublisher#productPurchase',
      purchaseTimeMillis: '1700000000000',
      purchaseState: 0,
      consumptionState: 0,
      orderId: `GPA.3300-0000-0000-${String(serial).padStart(5, '0')}`,
      acknowledgementState: 1,
      purchaseType: 0,
      regionCode: 'DE',
      ...overrides,
    },
  });
  return token;
}

const submit = (p: Player, body: unknown, on: InProcessApp = app) => on.call('POST', '/api/v1/iap/google', { token: p.access_token, body });
const rows = (orderId: string) => deployments.database.db.selectFrom('iap_transactions').selectAll().where('provider', '=', 'google').where('transaction_id', '=', orderId).execute();

async function refused(p: Player, body: unknown, reason: string, on: InProcessApp = app): Promise<void> {
  const res = await submit(p, body, on);
  expectError(res, 422, 'iap.verification_failed');
  expect(res.body.error.details).toEqual({ reason });
}

describe('POST /iap/google', () => {
  it("reads the purchase with a service-account token, answers its fields and records the order once for the caller", async () => {
    const p = await player();
    const token = purchase();
    const reads = fake.reads.length;
    const res = await submit(p, { product_id: 'gems 100/pack', purchase_token: token });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const orderId = `GPA.3300-0000-0000-${String(serial).padStart(5, '0')}`;
    expect(res.body).toEqual({
      product_id: 'gems 100/pack',
      order_id: orderId,
      purchase_time: '1700000000000',
      consumption_state: 0,
      acknowledged: true,
      valid: true,
      duplicate: false,
    });
    const read = fake.reads[reads]!;
    expect(read.path).toBe(`/androidpublisher/v3/applications/${PACKAGE}/purchases/products/gems%20100%2Fpack/tokens/${token}`);
    expect(read.authorization).toMatch(/^Bearer access-\d+$/);
    const [row, ...more] = await rows(orderId);
    expect(more).toEqual([]);
    expect(row).toMatchObject({ player_id: p.player_id, product_id: 'gems 100/pack', original_transaction_id: null });

    const again = await submit(p, { product_id: 'gems 100/pack', purchase_token: token });
    expect(again.body).toEqual({ ...res.body, duplicate: true });
    expect(await rows(orderId)).toHaveLength(1);
  });

  it('buys one access token and reuses it while it lasts', async () => {
    const p = await player();
    await submit(p, { product_id: 'gems', purchase_token: purchase() });
    const issued = fake.tokensIssued;
    for (let i = 0; i < 3; i++) expect((await submit(p, { product_id: 'gems', purchase_token: purchase() })).status).toBe(200);
    expect(fake.tokensIssued).toBe(issued);
  });

  it('answers "undefined" for what the purchase lacks, and the consumption and acknowledgement states it has', async () => {
    const p = await player();
    const sparse = await submit(p, { product_id: 'gems', purchase_token: purchase({ purchaseTimeMillis: undefined, consumptionState: undefined, acknowledgementState: undefined }) });
    expect(sparse.status, JSON.stringify(sparse.body)).toBe(200);
    expect(sparse.body).toMatchObject({ purchase_time: 'undefined', consumption_state: 'undefined', acknowledged: 'undefined', valid: true });
    const consumed = await submit(p, { product_id: 'gems', purchase_token: purchase({ consumptionState: 1, acknowledgementState: 0 }) });
    expect(consumed.body).toMatchObject({ consumption_state: 1, acknowledged: false });
  });

  it("answers 422 iap.missing_transaction_id for a purchase without an order id (a licence tester's)", async () => {
    const p = await player();
    expectError(await submit(p, { product_id: 'gems', purchase_token: purchase({ orderId: undefined }) }), 422, 'iap.missing_transaction_id');
  });

  it('answers 409 iap.transaction_already_claimed to another player; of two at the same moment exactly one wins', async () => {
    const [a, b] = [await player(), await player()];
    const token = purchase();
    const orderId = `GPA.3300-0000-0000-${String(serial).padStart(5, '0')}`;
    const answers = await Promise.all([submit(a, { product_id: 'gems', purchase_token: token }), submit(b, { product_id: 'gems', purchase_token: token })]);
    expect(answers.map((r) => r.status).sort()).toEqual([200, 409]);
    const winner = answers[0]!.status === 200 ? a : b;
    expectError(answers.find((r) => r.status === 409)!, 409, 'iap.transaction_already_claimed');
    expect((await rows(orderId)).map((r) => r.player_id)).toEqual([winner.player_id]);
  });

  it('refuses a purchase in any state but purchased, and every store failure, with its reason', async () => {
    const p = await player();
    const cases: [string, string][] = [
      ['purchase_cancelled', purchase({ purchaseState: 1 })],
      ['purchase_pending', purchase({ purchaseState: 2 })],
      ['invalid_google_response', purchase({ purchaseState: 7 })],
      ['invalid_google_response', purchase({ purchaseState: undefined })],
      ['purchase_not_found', 'nobody-issued-this'],
      ['purchase_not_found', purchase({}, { status: 410 })],
      ['google_api_unavailable', purchase({}, { status: 503 })],
      ['google_api_error', purchase({}, { status: 403 })],
      ['google_api_error', purchase({}, { status: 400 })],
      ['google_api_unavailable', 'drop'],
    ];
    for (const [reason, token] of cases) await refused(p, { product_id: 'gems', purchase_token: token }, reason);
    for (const body of ['<html>', '[1, 2]', 'null']) {
      const token = `raw-${++serial}`;
      fake.purchases.set(token, { body });
      await refused(p, { product_id: 'gems', purchase_token: token }, 'invalid_google_response');
    }
  });

  it('gives up on a publisher API that does not answer within provider_timeout_ms', async () => {
    const p = await player();
    const started = Date.now();
    await refused(p, { product_id: 'gems', purchase_token: 'hang' }, 'google_api_unavailable');
    expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS + 2000);
  });

  it('answers google_token_exchange_failed when the token endpoint refuses, stalls or answers garbage; no purchase is read', async () => {
    const p = await player();
    for (const who of ['refused', 'hangs', 'garbled']) {
      const other = await deployments.start(settings(fake.serviceAccount(who)));
      const reads = fake.reads.length;
      const started = Date.now();
      await refused(p, { product_id: 'gems', purchase_token: purchase() }, 'google_token_exchange_failed', other);
      expect(Date.now() - started).toBeLessThan(TIMEOUT_MS + 2000);
      expect(fake.reads.length).toBe(reads);
    }
    // A key the store does not know is refused the same way.
    const stranger = { ...fake.serviceAccount('stranger'), client_email: 'unknown@svc-test.iam.gserviceaccount.example' };
    await refused(p, { product_id: 'gems', purchase_token: purchase() }, 'google_token_exchange_failed', await deployments.start(settings(stranger)));
  });

  it('answers missing_required_fields (422, not missing_field) when product_id or purchase_token is absent, empty or not a string', async () => {
    const p = await player();
    const reads = fake.reads.length;
    for (const body of [{}, { product_id: 'gems' }, { purchase_token: 'x' }, { product_id: '', purchase_token: 'x' }, { product_id: 'gems', purchase_token: 7 }]) {
      await refused(p, body, 'missing_required_fields');
    }
    expect(fake.reads.length).toBe(reads);
  });

  it('answers 400 missing_field to a body that is not an object', async () => {
    const p = await player();
    for (const body of ['[]', '"gems"', '42', 'null']) {
      expectError(await app.call('POST', '/api/v1/iap/google', { token: p.access_token, body, headers: { 'content-type': 'application/json' } }), 400, 'missing_field');
    }
  });

  it('answers google_iap_not_configured without a package name, service_account_key_not_found without a key', async () => {
    const p = await player();
    const token = purchase();
    await refused(p, { product_id: 'gems', purchase_token: token }, 'google_iap_not_configured', await deployments.start({}));
    await refused(p, { product_id: 'gems', purchase_token: token }, 'service_account_key_not_found', await deployments.start({ google_package_name: PACKAGE }));
  });

  it('takes the key from a file (google_service_account_key_path) or as JSON text as well', async () => {
    const p = await player();
    const file = path.join(dir, 'key.json');
    writeFileSync(file, JSON.stringify(fake.serviceAccount('from-file')));
    const { google_service_account_key: _, ...rest } = settings(null);
    const fromFile = await deployments.start({ ...rest, google_service_account_key_path: file });
    expect((await submit(p, { product_id: 'gems', purchase_token: purchase() }, fromFile)).status).toBe(200);
    const fromText = await deployments.start(settings(JSON.stringify(fake.serviceAccount('from-text'))));
    expect((await submit(p, { product_id: 'gems', purchase_token: purchase() }, fromText)).status).toBe(200);
  });

  it('needs a session', async () => {
    expectError(await app.call('POST', '/api/v1/iap/google', { body: { product_id: 'gems', purchase_token: purchase() } }), 401, 'unauthenticated');
  });

  it('never writes the purchase token, the access token or the key to the log', async () => {
    const p = await player();
    const token = purchase();
    await submit(p, { product_id: 'gems', purchase_token: token });
    await refused(p, { product_id: 'gems', purchase_token: 'hang' }, 'google_api_unavailable');
    const text = JSON.stringify(app.logs);
    expect(text).not.toContain(token);
    expect(text).not.toMatch(/access-\d+/);
    expect(text).not.toContain('PRIVATE KEY');
  });
});
