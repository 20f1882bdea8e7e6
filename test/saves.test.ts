import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, registerPlayer, type TestPlayer } from './support/accounts';
import { inProcessApp, type InProcessApp } from './support/app';

/**
 * Cloud saves over REST (ten versioned slots per player): the version rules, the bounds,
 * concurrent writers, and the `storage` switch. In process, on the embedded
 * database or, with DATABASE_URL, on a PostgreSQL server where concurrent
 * requests really run on separate connections.
 */

let app: InProcessApp;
let off: InProcessApp;

beforeAll(async () => {
  app = await inProcessApp();
  off = await inProcessApp({ storage: false });
});
afterAll(async () => {
  await app?.close();
  await off?.close();
});

type Player = TestPlayer;
const player = (on = app) => registerPlayer(on, 'correct horse', 'save');

const put = (p: Player, slot: string, body: unknown, on = app) => on.call('PUT', `/api/v1/saves/${encodeURIComponent(slot)}`, { token: p.access_token, body });
const get = (p: Player, slot: string, on = app) => on.call('GET', `/api/v1/saves/${encodeURIComponent(slot)}`, { token: p.access_token });
const list = (p: Player, on = app) => on.call('GET', '/api/v1/saves', { token: p.access_token });
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

describe('writing and reading a slot', () => {
  it('creates a slot at version 1 and answers the whole save; reads answer the same', async () => {
    const p = await player();
    const res = await put(p, 'main', { data: { level: 3, inventory: ['sword'] } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ id: expect.any(String), player_id: p.player_id, slot: 'main', data: { level: 3, inventory: ['sword'] }, version: 1, updated_at: expect.stringMatching(ISO) });
    expect((await get(p, 'main')).body).toEqual(res.body);
  });

  it('follows every version rule: match writes V+1, mismatch is 409 with the current version and writes nothing, none overwrites', async () => {
    const p = await player();
    // Creation ignores the version sent.
    expect((await put(p, 's', { data: { n: 1 }, version: 7 })).body.version).toBe(1);
    expect((await put(p, 's', { data: { n: 2 }, version: 1 })).body).toMatchObject({ data: { n: 2 }, version: 2 });

    const stale = await put(p, 's', { data: { n: 'lost' }, version: 1 });
    expectError(stale, 409, 'save.version_conflict');
    expect(stale.body.error.details).toEqual({ current_version: 2 });
    expectError(await put(p, 's', { data: { n: 'lost' }, version: 3 }), 409, 'save.version_conflict');
    expect((await get(p, 's')).body).toMatchObject({ data: { n: 2 }, version: 2 });

    // Without a version the write wins whatever is stored.
    expect((await put(p, 's', { data: { n: 3 } })).body).toMatchObject({ data: { n: 3 }, version: 3 });
    expect((await put(p, 's', { data: { n: 4 }, version: null })).body).toMatchObject({ data: { n: 4 }, version: 4 });
  });

  it('stores {} for a body without data, and any JSON value as data', async () => {
    const p = await player();
    expect((await put(p, 'empty', {})).body.data).toEqual({});
    expect((await put(p, 'text', { data: 'just a string' })).body.data).toBe('just a string');
    expect((await put(p, 'list', { data: [1, 'two', { three: 3 }] })).body.data).toEqual([1, 'two', { three: 3 }]);
    expect((await get(p, 'list')).body.data).toEqual([1, 'two', { three: 3 }]);
  });

  it('takes any path segment as a slot name, escapes included', async () => {
    const p = await player();
    const slot = 'auto save #1 — été';
    expect((await put(p, slot, { data: { ok: true } })).body.slot).toBe(slot);
    expect((await get(p, slot)).body.data).toEqual({ ok: true });
    expectError(await put(p, 'x'.repeat(256), {}), 422, 'validation_failed');
  });

  it('answers 404 save.not_found for a slot never written, and for another player’s slot', async () => {
    const [a, b] = [await player(), await player()];
    expectError(await get(a, 'nothing'), 404, 'save.not_found');
    await put(b, 'mine', { data: { secret: 1 } });
    expectError(await get(a, 'mine'), 404, 'save.not_found');
    // a's write creates a's own slot; b's stays as it was.
    expect((await put(a, 'mine', { data: { other: 1 }, version: 9 })).body).toMatchObject({ player_id: a.player_id, version: 1 });
    expect((await get(b, 'mine')).body).toMatchObject({ player_id: b.player_id, data: { secret: 1 }, version: 1 });
  });
});

describe('bounds and bad input', () => {
  it('accepts data of exactly 262144 bytes encoded and refuses one byte more with 413 save.too_large', async () => {
    const p = await player();
    // {"x":"…"} is 8 bytes around the string; é is two bytes in UTF-8.
    const exact = { x: 'é'.repeat(10) + 'a'.repeat(262_144 - 8 - 20) };
    expect(Buffer.byteLength(JSON.stringify(exact))).toBe(262_144);
    expect((await put(p, 'big', { data: exact })).status).toBe(200);
    const over = { x: exact.x + 'a' };
    expectError(await put(p, 'big', { data: over }), 413, 'save.too_large');
    expectError(await put(p, 'other', { data: over }), 413, 'save.too_large');
    expect((await get(p, 'big')).body.version).toBe(1);
    expectError(await get(p, 'other'), 404, 'save.not_found');
  });

  it('keeps 10 slots: the 11th is 409 save.slot_limit_reached, while writing an existing slot still works', async () => {
    const p = await player();
    for (let i = 0; i < 10; i++) expect((await put(p, `slot${i}`, { data: { i } })).status).toBe(200);
    const refused = await put(p, 'slot10', { data: {} });
    expectError(refused, 409, 'save.slot_limit_reached');
    expect((await put(p, 'slot3', { data: { i: 'again' } })).body.version).toBe(2);
    expectError(await get(p, 'slot10'), 404, 'save.not_found');
  });

  it('refuses a version that is not an integer (422) and a body that is not an object (400 invalid_payload)', async () => {
    const p = await player();
    expectError(await put(p, 'v', { data: {}, version: 'one' }), 422, 'validation_failed');
    expectError(await put(p, 'v', { data: {}, version: 1.5 }), 422, 'validation_failed');
    expectError(await put(p, 'v', '[1,2]'), 400, 'invalid_payload');
    expectError(await put(p, 'v', '{"data":'), 400, 'invalid_json');
    expectError(await get(p, 'v'), 404, 'save.not_found');
  });

  it('needs a session on every route', async () => {
    expectError(await app.call('GET', '/api/v1/saves'), 401, 'unauthenticated');
    expectError(await app.call('GET', '/api/v1/saves/a'), 401, 'unauthenticated');
    expectError(await app.call('PUT', '/api/v1/saves/a', { body: {} }), 401, 'unauthenticated');
  });
});

describe('the list', () => {
  it('lists {slot, version, updated_at} of the caller’s slots only, without data', async () => {
    const [a, b] = [await player(), await player()];
    expect((await list(a)).body).toEqual({ saves: [] });
    await put(a, 'beta', { data: { big: 'x' } });
    await put(a, 'alpha', {});
    await put(a, 'alpha', {});
    await put(b, 'gamma', {});
    const res = await list(a);
    expect(res.status).toBe(200);
    expect(res.body.saves).toHaveLength(2);
    const bySlot = Object.fromEntries(res.body.saves.map((s: { slot: string }) => [s.slot, s]));
    expect(bySlot.alpha).toEqual({ slot: 'alpha', version: 2, updated_at: expect.stringMatching(ISO) });
    expect(bySlot.beta).toEqual({ slot: 'beta', version: 1, updated_at: expect.stringMatching(ISO) });
  });
});

describe('concurrent writers', () => {
  it('of the same version: exactly one wins, every other answers 409 with the winner’s version', async () => {
    const p = await player();
    await put(p, 'race', { data: { who: 'start' } });
    for (let round = 1; round <= 3; round++) {
      const writers = Array.from({ length: 8 }, (_, i) => put(p, 'race', { data: { who: i }, version: round }));
      const answers = await Promise.all(writers);
      const won = answers.filter((r) => r.status === 200);
      expect(won, JSON.stringify(answers.map((r) => r.body))).toHaveLength(1);
      for (const lost of answers.filter((r) => r.status !== 200)) {
        expectError(lost, 409, 'save.version_conflict');
        expect(lost.body.error.details.current_version).toBe(round + 1);
      }
      const stored = (await get(p, 'race')).body;
      expect(stored).toMatchObject({ version: round + 1, data: won[0]!.body.data });
    }
  });

  it('creating slots: never more than 10, however many race for the last one', async () => {
    const p = await player();
    for (let i = 0; i < 9; i++) await put(p, `have${i}`, {});
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => put(p, `new${i}`, { data: { i } })));
    expect(answers.filter((r) => r.status === 200)).toHaveLength(1);
    for (const r of answers.filter((x) => x.status !== 200)) expectError(r, 409, 'save.slot_limit_reached');
    expect((await list(p)).body.saves).toHaveLength(10);
  });

  it('creating one slot at once: one creation, the others write over it in turn', async () => {
    const p = await player();
    const answers = await Promise.all(Array.from({ length: 5 }, (_, i) => put(p, 'fresh', { data: { i } })));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(answers.map((r) => r.body.version).sort()).toEqual([1, 2, 3, 4, 5]);
    expect(new Set(answers.map((r) => r.body.id)).size).toBe(1);
  });
});

describe('with the storage setting off', () => {
  it('answers 404 save.not_found on every saves route, before the session is looked at', async () => {
    const p = await player(off);
    expectError(await list(p, off), 404, 'save.not_found');
    expectError(await get(p, 'main', off), 404, 'save.not_found');
    expectError(await put(p, 'main', { data: {} }, off), 404, 'save.not_found');
    expectError(await off.call('GET', '/api/v1/saves'), 404, 'save.not_found');
    const rows = await off.ctx.db.selectFrom('cloud_saves').select('id').where('player_id', '=', p.player_id).execute();
    expect(rows).toEqual([]);
  });
});
