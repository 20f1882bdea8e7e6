import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allRoutes } from '../handlers/routes';
import { writeAudit } from '../runtime/changes/audit';
import { expectError, registerPlayer, type TestPlayer } from './support/accounts';
import { allPages, opsGet, OPS_SECRET } from './support/ops';
import { startTestServer, type TestServer } from './support/server';

/**
 * The shared list rules, through the players and audit lists: limits,
 * pages and offsets, sort and order, literal search, filters, stable ties;
 * and a fuzz over every list route that never gets a 500.
 */

let s: TestServer;
let players: TestPlayer[];
const NAMES = ['Zed', 'amy', 'Amy', '100% real', 'under_score', 'underXscore', 'same', 'same', 'same', 'same', 'back\\slash', 'last'];

beforeAll(async () => {
  s = await startTestServer({ ops_secret: OPS_SECRET });
  players = [];
  for (const name of NAMES) {
    const p = await registerPlayer(s);
    const res = await s.call('PUT', `/api/v1/players/${p.player_id}`, { token: p.access_token, body: { display_name: name } });
    expect(res.status).toBe(200);
    players.push(p);
  }
  const base = Date.now() - 60_000;
  for (let i = 0; i < 30; i++) {
    const at = base + i * 1000;
    await writeAudit(s.ctx.db, { ids: s.ctx.ids, clock: { now: () => at } }, {
      actor: { id: i % 3 === 0 ? 'ops_secret' : `ops_token:${i % 2}`, display: i % 5 === 0 ? 'Alice_%' : 'bob', source: i % 3 === 0 ? 'ops_secret' : 'ops_token' },
      action: i % 2 === 0 ? 'player.erase' : 'ext.demo.grant',
      targetType: 'player',
      targetId: players[i % players.length]!.player_id,
      outcome: i % 7 === 0 ? 'error' : 'ok',
      succeeded: i % 7 === 0 ? 0 : 1,
      failed: i % 7 === 0 ? 1 : 0,
      details: { n: i },
    });
  }
});
afterAll(async () => {
  await s.close();
});

const ids = (res: { body: { data: { id: string }[] } }) => res.body.data.map((r) => r.id);
const sortedIds = () => players.map((p) => p.player_id).sort();

describe('limit, page and offset', () => {
  it('defaults to 50 and clamps the limit to 1-200; a malformed number means the default', async () => {
    const limits = async (q: string) => (await opsGet(s, `/players${q}`)).body.page.limit;
    expect(await limits('')).toBe(50);
    expect(await limits('?limit=0')).toBe(1);
    expect(await limits('?limit=-4')).toBe(1);
    expect(await limits('?limit=500')).toBe(200);
    expect(await limits('?limit=abc')).toBe(50);
    expect(await limits('?limit=7.5')).toBe(50);
    expect(await limits('?limit=99999999999999999999')).toBe(50);
    const res = await opsGet(s, '/players?limit=3');
    expect(res.body.data).toHaveLength(3);
    expect(res.body.page).toEqual({ limit: 3, offset: 0, total: NAMES.length });
  });

  it('snaps the offset down to a multiple of the limit and answers the one it used', async () => {
    const all = sortedIds();
    const res = await opsGet(s, '/players?limit=5&offset=7');
    expect(res.body.page).toEqual({ limit: 5, offset: 5, total: NAMES.length });
    expect(ids(res)).toEqual(all.slice(5, 10));
    expect((await opsGet(s, '/players?limit=5&offset=-3')).body.page.offset).toBe(0);
    expect((await opsGet(s, '/players?limit=5&offset=x')).body.page.offset).toBe(0);
  });

  it('never opens a window past row 100000', async () => {
    const deep = await opsGet(s, '/players?offset=100000');
    expect(deep.body.page).toEqual({ limit: 50, offset: 99_950, total: NAMES.length });
    expect(deep.body.data).toEqual([]);
    expect((await opsGet(s, '/players?offset=99999999&limit=30')).body.page.offset).toBe(99_960);
    expect((await opsGet(s, '/players?page=10000&limit=200')).body.page.offset).toBe(99_800);
    // The page ceiling (10000) binds first when it ends the window sooner.
    expect((await opsGet(s, '/players?page=20000&limit=7')).body.page.offset).toBe(69_993);
  });

  it('takes a 1-based page, which wins over offset', async () => {
    const all = sortedIds();
    expect(ids(await opsGet(s, '/players?limit=5&page=2'))).toEqual(all.slice(5, 10));
    const both = await opsGet(s, '/players?limit=5&page=1&offset=10');
    expect(both.body.page.offset).toBe(0);
    expect((await opsGet(s, '/players?limit=5&page=0')).body.page.offset).toBe(0);
    expect((await opsGet(s, '/players?limit=5&page=nope&offset=5')).body.page.offset).toBe(5);
  });
});

describe('sort and order', () => {
  it('refuses a field the list does not offer with details.field, and a bad order with details.order', async () => {
    for (const [q, key, value] of [
      ['sort=password', 'field', 'password'],
      ['sort=USERNAME', 'field', 'USERNAME'],
      ['sort=hashed_password&order=asc', 'field', 'hashed_password'],
      ['order=sideways', 'order', 'sideways'],
      ['sort=username&order=up', 'order', 'up'],
    ] as const) {
      const res = await opsGet(s, `/players?${q}`);
      expectError(res, 400, 'ops.invalid_sort');
      expect(res.body.error.details).toEqual({ [key]: value });
      // Repeated at the top level, where older clients read it.
      expect(res.body[key]).toBe(value);
    }
  });

  it('orders by the route’s default, by a named field ascending, and either way, any case', async () => {
    expect(ids(await opsGet(s, '/players'))).toEqual(sortedIds());
    expect(ids(await opsGet(s, '/players?order=DESC'))).toEqual(sortedIds().reverse());
    expect(ids(await opsGet(s, '/players?sort='))).toEqual(sortedIds());
    const byName = (await opsGet(s, '/players?sort=username')).body.data.map((p: { username: string }) => p.username);
    expect(byName).toEqual([...byName].sort());
  });

  it('ends every order on the unique id, so pages of any size neither repeat nor skip tied rows', async () => {
    for (const order of ['asc', 'desc']) {
      const whole = (await opsGet(s, `/players?sort=display_name&order=${order}&limit=200`)).body.data.map((p: { id: string; display_name: string }) => [p.display_name, p.id]);
      const same = whole.filter(([name]: [string]) => name === 'same').map(([, id]: [string, string]) => id);
      expect(same).toEqual(order === 'asc' ? [...same].sort() : [...same].sort().reverse());
      for (const size of [1, 2, 3]) {
        const paged = await allPages(s, `/players?sort=display_name&order=${order}`, size);
        expect(paged.map((p) => p.id)).toEqual(whole.map(([, id]: [string, string]) => id));
      }
    }
  });
});

describe('search and filters', () => {
  const names = async (q: string) => (await opsGet(s, `/players?q=${q}&sort=display_name`)).body.data.map((p: { display_name: string }) => p.display_name);

  it('searches case-insensitively for a substring, with % and _ matching only themselves', async () => {
    expect(await names('AMY')).toEqual(['Amy', 'amy']);
    expect(await names('%25')).toEqual(['100% real']);
    expect(await names('_')).toEqual(expect.arrayContaining(['under_score']));
    expect((await names('r_s'))).toEqual(['under_score']);
    expect(await names('%5C')).toEqual(['back\\slash']);
    // Usernames are searched too.
    expect((await opsGet(s, `/players?q=${players[0]!.username}`)).body.data.map((p: { id: string }) => p.id)).toEqual([players[0]!.player_id]);
  });

  it('ignores an empty, overlong or unstorable search and text filter (the superset answers)', async () => {
    for (const q of ['', 'x'.repeat(256), '%00', `a%00b`]) {
      expect((await opsGet(s, `/players?q=${q}`)).body.page.total, q).toBe(NAMES.length);
    }
    expect((await opsGet(s, `/audit?action=${'a'.repeat(256)}`)).body.page.total).toBe(30);
    expect((await opsGet(s, '/audit?action=')).body.page.total).toBe(30);
  });
});

describe('GET /ops/audit', () => {
  it('lists every row newest first, in the audit projection', async () => {
    const rows = await allPages(s, '/audit', 7);
    expect(rows).toHaveLength(30);
    const times = rows.map((r) => r.occurred_at as string);
    expect(times).toEqual([...times].sort().reverse());
    expect(rows[0]).toEqual({
      id: expect.any(String),
      actor_id: expect.any(String),
      actor_display: expect.any(String),
      actor_source: expect.any(String),
      actor_attested: false,
      action: expect.any(String),
      target_type: 'player',
      target_id: expect.any(String),
      outcome: expect.stringMatching(/^(ok|error)$/),
      succeeded_count: expect.any(Number),
      failed_count: expect.any(Number),
      details: { n: 29 },
      occurred_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
    });
  });

  it('filters on action, actor, source, outcome and target, and searches action, actor name and target', async () => {
    const total = async (q: string) => (await opsGet(s, `/audit?${q}`)).body.page.total;
    expect(await total('action=player.erase')).toBe(15);
    expect(await total('actor_id=ops_secret')).toBe(10);
    expect(await total('actor_source=ops_token')).toBe(20);
    expect(await total('outcome=error')).toBe(5);
    expect(await total(`target_id=${players[0]!.player_id}`)).toBe(3);
    expect(await total('action=player.erase&outcome=error')).toBe(3);
    expect(await total('q=alice_%25')).toBe(6);
    expect(await total('q=EXT.DEMO')).toBe(15);
    expect((await opsGet(s, '/audit?sort=outcome&order=asc&limit=5')).body.data.every((r: { outcome: string }) => r.outcome === 'error')).toBe(true);
    expectError(await opsGet(s, '/audit?sort=details'), 400, 'ops.invalid_sort');
  });
});

describe('every ops list under hostile parameters', () => {
  // A list is an ops route whose query takes the shared `sort`.
  const lists = allRoutes()
    .filter((r) => r.path.startsWith('/api/v1/ops/') && 'sort' in ((r.spec.query as { shape?: object } | undefined)?.shape ?? {}))
    .map((r) => r.path.replace(':id', r.path.includes('/chat/') ? 'global:lobby' : 'arena'));

  it('covers the lists', () => {
    expect(lists).toEqual(expect.arrayContaining(['/api/v1/ops/players', '/api/v1/ops/audit', '/api/v1/ops/notifications', '/api/v1/ops/matchmaker', '/api/v1/ops/leaderboards/arena/entries']));
  });

  it('answers 200 or a 400 ops code, never anything else', async () => {
    const value = fc.oneof(
      fc.string({ maxLength: 12 }),
      fc.constantFrom('id', 'username', 'score', 'mode', 'asc', 'DESC', 'true', 'false', '%', '_', '\\', '%%', "'", '"', ';--', '00000000-0000-0000-0000-000000000000', 'null', '-1', '1e9', '0x10'),
      fc.string({ unit: 'binary', maxLength: 8 }),
      fc.string({ minLength: 250, maxLength: 300 }),
    );
    const key = fc.constantFrom('sort', 'order', 'q', 'limit', 'page', 'offset', 'player_id', 'sender_id', 'item_def_id', 'guest', 'active', 'read', 'mode', 'status', 'type', 'action', 'category', 'currency', 'channel_type');
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...lists), fc.array(fc.tuple(key, value), { maxLength: 4 }), async (path, pairs) => {
        const query = new URLSearchParams(pairs).toString();
        const res = await s.call('GET', `${path}?${query}`, { token: OPS_SECRET });
        if (res.status === 200) {
          expect(Array.isArray(res.body.data)).toBe(true);
          expect(res.body.page.offset % res.body.page.limit).toBe(0);
          return;
        }
        expect(res.status, `${path}?${query} → ${JSON.stringify(res.body)}`).toBe(400);
        expect(['ops.invalid_sort', 'ops.invalid_filter']).toContain(res.body.error.code);
      }),
      { numRuns: 300 },
    );
  });
});
