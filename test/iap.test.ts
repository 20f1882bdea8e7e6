import { CompactSign, importPKCS8 } from 'jose';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, registerPlayer, type TestPlayer as Player } from './support/accounts';
import type { InProcessApp } from './support/app';
import { Deployments } from './support/deployments';
import { StoreCertificates, type ChainName } from './support/store-certificates';

/**
 * `POST /iap/apple` against certificates minted for the test: the operator's
 * root, an intermediate and a receipt-signing leaf, and every broken variant
 * the verifier must refuse. Several deployments (configured, unconfigured,
 * roots without a bundle id) share one database, so a player of one is a
 * player of all.
 */

const BUNDLE = 'com.example.svc-game';
const HOUR = 3600_000;

let deployments: Deployments;
let pki: StoreCertificates;
let app: InProcessApp;

beforeAll(async () => {
  deployments = await Deployments.open();
  pki = StoreCertificates.make();
  app = await deployments.start({ apple_root_cert_path: pki.rootFile, apple_bundle_id: BUNDLE });
});
afterAll(async () => {
  await deployments?.close();
  pki?.remove();
});

const player = (on: InProcessApp = app) => registerPlayer(on);
let serial = 0;
function transaction(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const id = `${2000000000 + Date.now() % 1e8}${++serial}`;
  return {
    transactionId: id,
    originalTransactionId: id,
    bundleId: BUNDLE,
    productId: 'gems_100',
    purchaseDate: Date.now() - 60_000,
    signedDate: Date.now(),
    quantity: 1,
    type: 'Consumable',
    environment: 'Sandbox',
    ...overrides,
  };
}

const submit = (p: Player, signed_transaction: unknown, on: InProcessApp = app) =>
  on.call('POST', '/api/v1/iap/apple', { token: p.access_token, body: { signed_transaction } });

const rows = (transactionId: unknown) =>
  deployments.database.db.selectFrom('iap_transactions').selectAll().where('provider', '=', 'apple').where('transaction_id', '=', String(transactionId)).execute();

async function refused(p: Player, signed: string, reason: string, on: InProcessApp = app): Promise<void> {
  const res = await submit(p, signed, on);
  expectError(res, 422, 'iap.verification_failed');
  expect(res.body.error.details).toEqual({ reason });
}

/** A compact JWS made by hand: any header, any payload, signed with the valid leaf's key as ES256. */
async function handMade(header: Record<string, unknown>, payload: unknown): Promise<string> {
  const encode = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const signingInput = `${encode(header)}.${encode(payload)}`;
  const reference = await new CompactSign(new TextEncoder().encode(JSON.stringify(payload)))
    .setProtectedHeader({ alg: 'ES256' })
    .sign(await importPKCS8(pki.chain().key, 'ES256'));
  return `${signingInput}.${reference.split('.')[2]}`;
}

describe('POST /iap/apple', () => {
  it('verifies a signed transaction, answers its fields and records it once for the caller', async () => {
    const p = await player();
    const payload = transaction({ expiresDate: Date.now() + HOUR, type: 'Auto-Renewable Subscription', quantity: 2 });
    const signed = await pki.sign(payload);
    const res = await submit(p, signed);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({
      product_id: 'gems_100',
      transaction_id: payload.transactionId,
      original_transaction_id: payload.originalTransactionId,
      purchase_date: payload.purchaseDate,
      expires_date: payload.expiresDate,
      quantity: 2,
      type: 'Auto-Renewable Subscription',
      valid: true,
      duplicate: false,
    });
    const [row, ...more] = await rows(payload.transactionId);
    expect(more).toEqual([]);
    expect(row).toMatchObject({ player_id: p.player_id, provider: 'apple', product_id: 'gems_100', original_transaction_id: payload.originalTransactionId });

    const again = await submit(p, signed);
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ ...res.body, duplicate: true });
    expect(await rows(payload.transactionId)).toHaveLength(1);
  });

  it('answers valid: false for a past expires_date, and nothing else makes it false', async () => {
    const p = await player();
    const expired = await submit(p, await pki.sign(transaction({ expiresDate: Date.now() - 1000 })));
    expect(expired.status).toBe(200);
    expect(expired.body.valid).toBe(false);
    // A lapsed subscription is still recorded: the answer reports, it does not refuse.
    expect(await rows(expired.body.transaction_id)).toHaveLength(1);
    const live = await submit(p, await pki.sign(transaction({ expiresDate: Date.now() + HOUR })));
    expect(live.body.valid).toBe(true);
    const lifetime = await submit(p, await pki.sign(transaction()));
    expect(lifetime.body).toMatchObject({ valid: true, expires_date: 'undefined' });
  });

  it('answers "undefined" for what the payload lacks, quantity 1 and type "unknown" by default', async () => {
    const p = await player();
    const res = await submit(p, await pki.sign({ transactionId: `bare-${++serial}`, bundleId: BUNDLE }));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({
      product_id: 'undefined',
      transaction_id: `bare-${serial}`,
      original_transaction_id: 'undefined',
      purchase_date: 'undefined',
      expires_date: 'undefined',
      quantity: 1,
      type: 'unknown',
      valid: true,
      duplicate: false,
    });
    const [row] = await rows(`bare-${serial}`);
    expect(row).toMatchObject({ product_id: null, original_transaction_id: null });
  });

  it('accepts a numeric transaction id as its digits', async () => {
    const p = await player();
    const id = 4000000000 + serial++;
    const res = await submit(p, await pki.sign(transaction({ transactionId: id })));
    expect(res.status).toBe(200);
    expect(res.body.transaction_id).toBe(String(id));
  });

  it('answers 409 iap.transaction_already_claimed to another player; the claim stays with the first', async () => {
    const [first, second] = [await player(), await player()];
    const payload = transaction();
    const signed = await pki.sign(payload);
    expect((await submit(first, signed)).status).toBe(200);
    expectError(await submit(second, signed), 409, 'iap.transaction_already_claimed');
    const [row, ...more] = await rows(payload.transactionId);
    expect(more).toEqual([]);
    expect(row!.player_id).toBe(first.player_id);
    expect((await submit(first, signed)).body.duplicate).toBe(true);
  });

  it('of two players submitting one receipt at the same moment, exactly one wins', async () => {
    for (let round = 0; round < 5; round++) {
      const [a, b] = [await player(), await player()];
      const payload = transaction();
      const signed = await pki.sign(payload);
      const answers = await Promise.all([submit(a, signed), submit(b, signed)]);
      expect(answers.map((r) => r.status).sort()).toEqual([200, 409]);
      const winner = answers[0]!.status === 200 ? a : b;
      const loser = winner === a ? answers[1]! : answers[0]!;
      expectError(loser, 409, 'iap.transaction_already_claimed');
      const recorded = await rows(payload.transactionId);
      expect(recorded.map((r) => r.player_id)).toEqual([winner.player_id]);
    }
  });

  it('answers 422 iap.missing_transaction_id for a verified receipt without a transaction id, recording nothing', async () => {
    const p = await player();
    const before = await deployments.database.db.selectFrom('iap_transactions').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
    for (const transactionId of [undefined, '', null, { id: 1 }, 'x'.repeat(256)]) {
      expectError(await submit(p, await pki.sign(transaction({ transactionId }))), 422, 'iap.missing_transaction_id');
    }
    const after = await deployments.database.db.selectFrom('iap_transactions').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
    expect(Number(after.n)).toBe(Number(before.n));
  });

  it('answers 500 iap.record_failed when the row cannot be written and none exists', async () => {
    const p = await player();
    const payload = transaction();
    // The database refuses this one transaction id, as a full disk or a broken constraint would.
    await sql`create function refuse_receipt() returns trigger language plpgsql as $$
      begin if new.transaction_id = ${sql.lit(String(payload.transactionId))} then raise exception 'refused'; end if; return new; end $$`.execute(deployments.database.db);
    await sql`create trigger refuse_receipt before insert on iap_transactions for each row execute function refuse_receipt()`.execute(deployments.database.db);
    try {
      expectError(await submit(p, await pki.sign(payload)), 500, 'iap.record_failed');
      expect(await rows(payload.transactionId)).toEqual([]);
    } finally {
      await sql`drop trigger refuse_receipt on iap_transactions`.execute(deployments.database.db);
      await sql`drop function refuse_receipt()`.execute(deployments.database.db);
    }
    expect((await submit(p, await pki.sign(payload))).status).toBe(200);
  });

  it('trusts roots given inline (apple_root_certs) like a root file, with or without the root copy in the chain', async () => {
    const inline = await deployments.start({ apple_root_certs: [pki.rootPem], apple_bundle_id: BUNDLE });
    const p = await player(inline);
    for (const chain of ['valid', 'withoutRoot'] as ChainName[]) {
      const res = await submit(p, await pki.sign(transaction(), chain), inline);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
  });

  it('refuses every broken receipt with 422 iap.verification_failed and its reason, recording nothing', async () => {
    const p = await player();
    const valid = await pki.sign(transaction());
    const [header, body] = valid.split('.');
    const otherPayload = Buffer.from(JSON.stringify(transaction({ productId: 'gems_10000' }))).toString('base64url');
    const cases: [string, Promise<string> | string][] = [
      // Not a compact JWS, or a header that cannot carry a chain.
      ['invalid_jws_format', 'not a jws'],
      ['invalid_jws_format', `${header}.${body}`],
      ['invalid_jws_format', `bm90IGpzb24.${body}.c2ln`],
      ['invalid_jws_format', 'x'.repeat(70_000) + '.a.b'],
      ['invalid_jws_format', handMade({ alg: 'ES256' }, transaction())],
      ['invalid_jws_format', handMade({ alg: 'ES256', x5c: 'MIIB' }, transaction())],
      ['invalid_jws_format', handMade({ alg: 'ES256', x5c: [pki.chain().x5c[0], 'bm90IGEgY2VydGlmaWNhdGU'] }, transaction())],
      ['invalid_jws_format', pki.sign(transaction(), 'leafOnly')],
      // ES256 only, and the signature must hold over these very bytes.
      ['invalid_jws', handMade({ alg: 'HS256', x5c: pki.chain().x5c }, transaction())],
      ['invalid_jws', handMade({ alg: 'none', x5c: pki.chain().x5c }, transaction())],
      ['invalid_jws', `${header}.${otherPayload}.${valid.split('.')[2]}`],
      ['invalid_jws', pki.sign(transaction()).then((t) => `${t.slice(0, -6)}AAAAAA`)],
      ['invalid_jws', handMade({ alg: 'ES256', x5c: pki.chain().x5c }, ['not', 'an', 'object'])],
      // The chain.
      ['apple_root_cert_not_found', pki.sign(transaction(), 'unknownRoot')],
      ['apple_root_cert_invalid', pki.sign(transaction({ signedDate: Date.parse('2001-01-01') }))],
      ['certificate_chain_invalid', pki.sign(transaction(), 'forgedLink')],
      ['certificate_chain_invalid', pki.sign(transaction(), 'issuerNotCa')],
      ['certificate_expired', pki.sign(transaction({ signedDate: Date.now() + 36 * HOUR }))],
      ['certificate_purpose_invalid', pki.sign(transaction(), 'unmarkedLeaf')],
      // Someone else's app.
      ['bundle_id_mismatch', pki.sign(transaction({ bundleId: 'com.example.other' }))],
      ['bundle_id_mismatch', pki.sign(transaction({ bundleId: undefined }))],
    ];
    const before = await deployments.database.db.selectFrom('iap_transactions').select('id').execute();
    for (const [reason, signed] of cases) await refused(p, await signed, reason);
    expect(await deployments.database.db.selectFrom('iap_transactions').select('id').execute()).toHaveLength(before.length);
  });

  it('answers apple_root_cert_not_configured without roots, apple_iap_not_configured without a bundle id', async () => {
    const bare = await deployments.start({});
    const rootsOnly = await deployments.start({ apple_root_cert_path: pki.rootFile });
    const p = await player();
    const signed = await pki.sign(transaction());
    await refused(p, signed, 'apple_root_cert_not_configured', bare);
    await refused(p, signed, 'apple_iap_not_configured', rootsOnly);
  });

  it('answers 400 missing_field when signed_transaction is absent or not a string', async () => {
    const p = await player();
    for (const body of [{}, { signed_transaction: 42 }, { signed_transaction: null }]) {
      const res = await app.call('POST', '/api/v1/iap/apple', { token: p.access_token, body });
      expectError(res, 400, 'missing_field');
      expect(res.body.error.details.field).toBe('signed_transaction');
    }
  });

  it('needs a session', async () => {
    expectError(await app.call('POST', '/api/v1/iap/apple', { body: { signed_transaction: await pki.sign(transaction()) } }), 401, 'unauthenticated');
  });

  it('spends the iap bucket, keyed on the player', async () => {
    const tight = await deployments.start({ apple_root_cert_path: pki.rootFile, apple_bundle_id: BUNDLE, rate_limits: { iap: { limit: 2, window: 60_000 } } });
    const [p, other] = [await player(tight), await player(tight)];
    for (let i = 0; i < 2; i++) expect((await submit(p, await pki.sign(transaction()), tight)).status).toBe(200);
    expectError(await submit(p, await pki.sign(transaction()), tight), 429, 'rate_limited');
    expect((await submit(other, await pki.sign(transaction()), tight)).status).toBe(200);
  });

  it("keeps an erased player's receipt, severed, and still claimed", async () => {
    const [gone, next] = [await player(), await player()];
    const payload = transaction();
    const signed = await pki.sign(payload);
    expect((await submit(gone, signed)).status).toBe(200);
    const erased = await app.call('POST', '/api/v1/players/me/erase', { token: gone.access_token, body: { password: gone.password } });
    expect(erased.status, JSON.stringify(erased.body)).toBe(200);
    const [row, ...more] = await rows(payload.transactionId);
    expect(more).toEqual([]);
    expect(row).toMatchObject({ player_id: null, product_id: 'gems_100', transaction_id: payload.transactionId });
    expectError(await submit(next, signed), 409, 'iap.transaction_already_claimed');
  });

  it('never writes the receipt or the signature to the log', async () => {
    const p = await player();
    const signed = await pki.sign(transaction());
    await submit(p, signed);
    await refused(p, await pki.sign(transaction({ bundleId: 'com.example.other' })), 'bundle_id_mismatch');
    const text = JSON.stringify(app.logs);
    expect(text).not.toContain(signed.split('.')[2]);
    expect(text).not.toContain(signed.split('.')[1]!.slice(0, 40));
  });
});
