import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, registerPlayer, type TestPlayer } from './support/accounts';
import { inProcessApp, type InProcessApp } from './support/app';

/**
 * Storage objects over REST (`read_perm` and `write_perm`, each `public` or `owner`, are the
 * perms): rows per player, `?owner=` for another player's rows as their
 * perms allow, the bounds, concurrent writers, and the `storage` switch.
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
const player = (on = app) => registerPlayer(on, 'correct horse', 'st');

const path = (collection: string, key?: string, owner?: Player) =>
  `/api/v1/storage/${encodeURIComponent(collection)}${key === undefined ? '' : `/${encodeURIComponent(key)}`}${owner ? `?owner=${owner.player_id}` : ''}`;
const put = (p: Player, c: string, k: string, body: unknown, owner?: Player, on = app) => on.call('PUT', path(c, k, owner), { token: p.access_token, body });
const get = (p: Player, c: string, k: string, owner?: Player, on = app) => on.call('GET', path(c, k, owner), { token: p.access_token });
const del = (p: Player, c: string, k: string, owner?: Player, on = app) => on.call('DELETE', path(c, k, owner), { token: p.access_token });
const list = (p: Player, c: string, query = '', on = app) => on.call('GET', `${path(c)}${query}`, { token: p.access_token });
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

describe('the owner’s objects', () => {
  it('creates at version 1 with owner/owner perms, counts every write, and reads back the object', async () => {
    const p = await player();
    const res = await put(p, 'profile', 'settings', { value: { volume: 7 } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({
      id: expect.any(String),
      collection: 'profile',
      key: 'settings',
      player_id: p.player_id,
      value: { volume: 7 },
      version: 1,
      read_perm: 'owner',
      write_perm: 'owner',
      updated_at: expect.stringMatching(ISO),
    });
    const again = await put(p, 'profile', 'settings', { value: { volume: 3 }, read_perm: 'public' });
    expect(again.body).toMatchObject({ id: res.body.id, value: { volume: 3 }, version: 2, read_perm: 'public', write_perm: 'owner' });
    expect((await get(p, 'profile', 'settings')).body).toEqual(again.body);
  });

  it('replaces the perms on every owner write: an omitted one resets to owner', async () => {
    const p = await player();
    await put(p, 'c', 'k', { value: 1, read_perm: 'public', write_perm: 'public' });
    expect((await put(p, 'c', 'k', { value: 2 })).body).toMatchObject({ value: 2, version: 2, read_perm: 'owner', write_perm: 'owner' });
  });

  it('stores {} without a value, and scalars and arrays as given', async () => {
    const p = await player();
    expect((await put(p, 'c', 'none', {})).body.value).toEqual({});
    expect((await put(p, 'c', 'n', { value: 42 })).body.value).toBe(42);
    expect((await put(p, 'c', 'a', { value: [1, { b: 'two' }] })).body.value).toEqual([1, { b: 'two' }]);
  });

  it('deletes: {success: true}, then 404 storage.not_found for reads and deletes', async () => {
    const p = await player();
    await put(p, 'c', 'gone', { value: { x: 1 } });
    const res = await del(p, 'c', 'gone');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true });
    expectError(await get(p, 'c', 'gone'), 404, 'storage.not_found');
    expectError(await del(p, 'c', 'gone'), 404, 'storage.not_found');
  });

  it('keeps each player’s rows apart: the same collection and key are two objects', async () => {
    const [a, b] = [await player(), await player()];
    await put(a, 'shared_name', 'k', { value: 'a' });
    expectError(await get(b, 'shared_name', 'k'), 404, 'storage.not_found');
    expect((await put(b, 'shared_name', 'k', { value: 'b' })).body).toMatchObject({ player_id: b.player_id, version: 1 });
    expect((await get(a, 'shared_name', 'k')).body).toMatchObject({ value: 'a', version: 1 });
    expect((await list(a, 'shared_name')).body.objects.map((o: { value: unknown }) => o.value)).toEqual(['a']);
    expectError(await del(b, 'shared_name', 'nothing'), 404, 'storage.not_found');
  });
});

describe('the collection list', () => {
  it('lists the caller’s objects of one collection, newest first, paged by limit and before', async () => {
    const p = await player();
    for (const k of ['k1', 'k2', 'k3', 'k4']) await put(p, 'items', k, { value: { k } });
    await put(p, 'other', 'x', {});
    const all = await list(p, 'items');
    expect(all.status).toBe(200);
    expect(all.body.objects.map((o: { key: string }) => o.key)).toEqual(['k4', 'k3', 'k2', 'k1']);
    const first = await list(p, 'items', '?limit=2');
    expect(first.body.objects.map((o: { key: string }) => o.key)).toEqual(['k4', 'k3']);
    const next = await list(p, 'items', `?limit=2&before=${first.body.objects[1].id}`);
    expect(next.body.objects.map((o: { key: string }) => o.key)).toEqual(['k2', 'k1']);
    // A malformed limit means the default; an out-of-range one is clamped.
    expect((await list(p, 'items', '?limit=abc')).body.objects).toHaveLength(4);
    expect((await list(p, 'items', '?limit=0')).body.objects).toHaveLength(1);
    expect((await list(p, 'empty')).body).toEqual({ objects: [] });
  });
});

describe('another player’s objects (?owner=)', () => {
  it('reads a public row, and answers a private one as absent', async () => {
    const [owner, other] = [await player(), await player()];
    await put(owner, 'card', 'public', { value: { title: 'hi' }, read_perm: 'public' });
    await put(owner, 'card', 'private', { value: { secret: true } });
    expect((await get(other, 'card', 'public', owner)).body).toMatchObject({ player_id: owner.player_id, value: { title: 'hi' } });
    expectError(await get(other, 'card', 'private', owner), 404, 'storage.not_found');
    expectError(await get(other, 'card', 'nothing', owner), 404, 'storage.not_found');
    expect((await list(other, 'card', `?owner=${owner.player_id}`)).body.objects.map((o: { key: string }) => o.key)).toEqual(['public']);
    // Naming yourself is the same as naming nobody.
    expect((await get(owner, 'card', 'private', owner)).body.value).toEqual({ secret: true });
    expectError(await app.call('GET', '/api/v1/storage/card/public?owner=not-a-uuid', { token: other.access_token }), 404, 'storage.not_found');
  });

  it('writes and deletes a row whose write_perm is public, keeping the owner’s perms; never creates one', async () => {
    const [owner, other] = [await player(), await player()];
    await put(owner, 'board', 'notes', { value: ['first'], read_perm: 'public', write_perm: 'public' });
    const written = await put(other, 'board', 'notes', { value: ['first', 'second'], read_perm: 'owner', write_perm: 'owner' }, owner);
    expect(written.status, JSON.stringify(written.body)).toBe(200);
    expect(written.body).toMatchObject({ player_id: owner.player_id, value: ['first', 'second'], version: 2, read_perm: 'public', write_perm: 'public' });
    expectError(await put(other, 'board', 'new_key', { value: 1 }, owner), 404, 'storage.not_found');
    expect(await app.ctx.db.selectFrom('storage').select('id').where('key', '=', 'new_key').execute()).toEqual([]);
    expect((await del(other, 'board', 'notes', owner)).body).toEqual({ success: true });
    expectError(await get(owner, 'board', 'notes'), 404, 'storage.not_found');
  });

  it('refuses writes to a row whose write_perm is owner: 403 storage.forbidden when readable, 404 when not', async () => {
    const [owner, other] = [await player(), await player()];
    await put(owner, 'w', 'readable', { value: 1, read_perm: 'public' });
    await put(owner, 'w', 'hidden', { value: 2 });
    expectError(await put(other, 'w', 'readable', { value: 'x' }, owner), 403, 'storage.forbidden');
    expectError(await del(other, 'w', 'readable', owner), 403, 'storage.forbidden');
    expectError(await put(other, 'w', 'hidden', { value: 'x' }, owner), 404, 'storage.not_found');
    expectError(await del(other, 'w', 'hidden', owner), 404, 'storage.not_found');
    expect((await get(owner, 'w', 'readable')).body).toMatchObject({ value: 1, version: 1 });
    expect((await get(owner, 'w', 'hidden')).body).toMatchObject({ value: 2, version: 1 });
  });
});

describe('bounds and bad input', () => {
  it('accepts a value of exactly 262144 bytes encoded and refuses one more with 413 storage.value_too_large, before the perms', async () => {
    const p = await player();
    const exact = 'ü'.repeat(100) + 'a'.repeat(262_144 - 2 - 200);
    expect(Buffer.byteLength(JSON.stringify(exact))).toBe(262_144);
    expect((await put(p, 'big', 'k', { value: exact })).status).toBe(200);
    expectError(await put(p, 'big', 'k', { value: exact + 'a' }), 413, 'storage.value_too_large');
    expectError(await put(p, 'big', 'k', { value: exact + 'a', read_perm: 'everyone' }), 413, 'storage.value_too_large');
    expect((await get(p, 'big', 'k')).body.version).toBe(1);
  });

  it('answers 400 storage.invalid_perm for any perm but exactly public or owner, non-strings included', async () => {
    const p = await player();
    for (const bad of ['Public', 'everyone', '', 1, true, null, ['public'], { public: true }]) {
      expectError(await put(p, 'perm', 'k', { value: 1, read_perm: bad }), 400, 'storage.invalid_perm');
      expectError(await put(p, 'perm', 'k', { value: 1, write_perm: bad }), 400, 'storage.invalid_perm');
    }
    expectError(await get(p, 'perm', 'k'), 404, 'storage.not_found');
  });

  it('answers 400 storage.invalid_request for a body that is not an object', async () => {
    const p = await player();
    expectError(await put(p, 'c', 'k', '[1]'), 400, 'storage.invalid_request');
    expectError(await put(p, 'c', 'k', '"text"'), 400, 'storage.invalid_request');
    expectError(await put(p, 'c', 'k', 'null'), 400, 'storage.invalid_request');
  });

  it('refuses names over 255 characters with 422, and needs a session everywhere', async () => {
    const p = await player();
    expectError(await put(p, 'c'.repeat(256), 'k', {}), 422, 'validation_failed');
    expectError(await put(p, 'c', 'k'.repeat(256), {}), 422, 'validation_failed');
    expect((await put(p, 'c'.repeat(255), 'k'.repeat(255), {})).status).toBe(200);
    expectError(await app.call('GET', '/api/v1/storage/c'), 401, 'unauthenticated');
    expectError(await app.call('GET', '/api/v1/storage/c/k'), 401, 'unauthenticated');
    expectError(await app.call('PUT', '/api/v1/storage/c/k', { body: {} }), 401, 'unauthenticated');
    expectError(await app.call('DELETE', '/api/v1/storage/c/k'), 401, 'unauthenticated');
  });
});

describe('concurrent writers', () => {
  it('of one new key: one row, every write counted in its version', async () => {
    const p = await player();
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => put(p, 'race', 'k', { value: { i } })));
    expect(answers.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(answers.map((r) => r.body.version).sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const rows = await app.ctx.db.selectFrom('storage').selectAll().where('player_id', '=', p.player_id).where('collection', '=', 'race').execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]!.version).toBe(10);
  });
});

describe('with the storage setting off', () => {
  it('answers 404 storage.not_found on all four storage routes', async () => {
    const p = await player(off);
    expectError(await list(p, 'c', '', off), 404, 'storage.not_found');
    expectError(await get(p, 'c', 'k', undefined, off), 404, 'storage.not_found');
    expectError(await put(p, 'c', 'k', { value: 1 }, undefined, off), 404, 'storage.not_found');
    expectError(await del(p, 'c', 'k', undefined, off), 404, 'storage.not_found');
    expect(await off.ctx.db.selectFrom('storage').select('id').execute()).toEqual([]);
  });
});
