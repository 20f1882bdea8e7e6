import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordFinishedMatch } from '../runtime/matches/matches';
import { expectError, registerPlayer, type TestPlayer } from './support/accounts';
import { gameDir, matchScript } from './support/game-dir';
import { guestSignIn, newDevice, PEPPER_V1 } from './support/guests';
import { allPages, OPS_SECRET, opsGet } from './support/ops';
import { startTestServer, type TestServer } from './support/server';
import { TestSocket } from './support/ws-client';

/** Every read route of the operator plane against seeded data, each row in its declared projection. */

const game = gameDir({ 'config.lua': 'return { duo = "duo.lua" }', 'duo.lua': matchScript('match_size = 2\nquick_play = true') });

let s: TestServer;
let players: TestPlayer[];
let guestId: string;
beforeAll(async () => {
  s = await startTestServer(
    {
      ops_secret: OPS_SECRET,
      guest_verifier_pepper: { v1: PEPPER_V1 },
      leaderboard_client_submit: 'all',
      leaderboards: { golf: { order: 'asc' } },
      matchmaker_tick_ms: 50,
      game_modes: { duo: { match_size: 2, quick_play: true, chat_channels: ['ops_lobby', 'ops_quiet'] } },
    },
    { gameDir: game.dir, game: { guestAuth: () => true, registration: () => null } },
  );
  players = [];
  for (let i = 0; i < 3; i++) players.push(await registerPlayer(s));
  const guest = await guestSignIn(s, newDevice());
  expect(guest.status).toBe(200);
  guestId = guest.body.player_id;
});
afterAll(async () => {
  await s.close();
  game.remove();
});

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

describe('GET /ops/stats and /ops/features', () => {
  it('answers this node’s figures as Node measures them', async () => {
    const res = await opsGet(s, '/stats');
    expect(res.status).toBe(200);
    const d = res.body.data;
    expect(d.node).toMatch(/^.+:\d+$/);
    expect(d.online_players).toBe(0);
    for (const key of ['uptime_ms', 'memory_rss', 'memory_heap_used', 'memory_heap_total', 'memory_external', 'memory_array_buffers', 'active_handles']) {
      expect(d[key], key).toBeGreaterThan(0);
    }
    for (const key of ['event_loop_lag_p50_ms', 'event_loop_lag_p99_ms', 'event_loop_lag_max_ms', 'tick_lateness_p99_ms', 'live_matches', 'live_worlds', 'sockets', 'matchmaker_waiting']) {
      expect(d[key], key).toBeGreaterThanOrEqual(0);
    }
    expect(d.event_loop_utilization).toBeGreaterThanOrEqual(0);
    expect(d.event_loop_utilization).toBeLessThanOrEqual(1);
    expect(d.script_workers).toBeGreaterThanOrEqual(1);
    expect(d.memory_heap_used).toBeLessThanOrEqual(d.memory_heap_total);
  });

  it('counts online players, sockets and a live match as they come and go', async () => {
    const [a, b] = players as [TestPlayer, TestPlayer];
    const connect = async (p: TestPlayer) => {
      const socket = await TestSocket.open(s);
      expect((await socket.request('session.connect', { token: p.access_token })).type).toBe('session.connected');
      return socket;
    };
    const one = await connect(a);
    const two = await connect(b);
    try {
      const joined = await one.request('match.find_or_create', { mode: 'duo' });
      expect(joined.type, JSON.stringify(joined)).toBe('match.joined');
      expect((await two.request('match.find_or_create', { mode: 'duo' })).type).toBe('match.joined');
      const d = (await opsGet(s, '/stats')).body.data;
      expect(d.online_players).toBe(2);
      expect(d.sockets).toBeGreaterThanOrEqual(2);
      expect(d.live_matches).toBe(1);
    } finally {
      one.close();
      two.close();
    }
  });

  it('reports the core, its version and its capabilities as booleans only', async () => {
    const res = await opsGet(s, '/features');
    expect(res.status).toBe(200);
    const { core, extensions } = res.body.data;
    expect(core.name).toBe('svc');
    expect(core.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(extensions).toEqual([]);
    const caps = Object.fromEntries(core.capabilities.map((c: { name: string; enabled: boolean }) => [c.name, c.enabled]));
    expect(caps).toMatchObject({ lua: true, guest_auth: true, storage: true, provider_google: false, iap_apple: false, worlds: true, console: false, metrics: false });
    for (const c of core.capabilities) expect(Object.keys(c).sort()).toEqual(['enabled', 'name']);
  });

  it('reports metrics on when the node opens its metrics listener', async () => {
    const metered = await startTestServer({ ops_secret: OPS_SECRET, metrics_port: 0 });
    try {
      expect(metered.metricsUrl).not.toBeNull();
      const res = await opsGet(metered, '/features');
      expect(res.status).toBe(200);
      expect(res.body.data.core.capabilities).toContainEqual({ name: 'metrics', enabled: true });
    } finally {
      await metered.close();
    }
  });
});

describe('players', () => {
  it('lists the public projection, filters unclaimed guests both ways, and looks one up', async () => {
    const all = await allPages(s, '/players', 2);
    expect(all.length).toBe(4);
    expect(Object.keys(all[0]!).sort()).toEqual(['avatar_url', 'display_name', 'id', 'inserted_at', 'metadata', 'updated_at', 'username']);
    expect(all.map((p) => p.id)).toEqual([...all.map((p) => p.id as string)].sort());
    const guests = (await opsGet(s, '/players?guest=true')).body;
    expect(guests.data.map((p: { id: string }) => p.id)).toEqual([guestId]);
    expect(guests.page.total).toBe(1);
    const others = (await opsGet(s, '/players?guest=false')).body;
    expect(others.page.total).toBe(3);
    expect(others.data.map((p: { id: string }) => p.id)).not.toContain(guestId);
    // Any other value is no filter at all.
    expect((await opsGet(s, '/players?guest=yes')).body.page.total).toBe(4);

    const one = await opsGet(s, `/players/${players[0]!.player_id.toUpperCase()}`);
    expect(one.status).toBe(200);
    expect(one.body).toEqual({ data: all.find((p) => p.id === players[0]!.player_id) });
    expectError(await opsGet(s, '/players/not-a-uuid'), 400, 'ops.invalid_id');
    expectError(await opsGet(s, `/players/${randomUUID()}`), 404, 'ops.not_found');
  });
});

describe('matches', () => {
  it('lists finished records without a roster, filters and searches mode, and looks one up', async () => {
    const at = new Date();
    const ids: string[] = [];
    for (const [mode, status] of [['duo', 'finished'], ['duo', 'error'], ['solo_%', 'finished']] as const) {
      const id = randomUUID();
      ids.push(id);
      await recordFinishedMatch(s.ctx.db, { id, mode, status, players: [players[0]!.player_id], result: { winner: players[0]!.player_id }, startedAt: at, finishedAt: at });
    }
    const all = (await opsGet(s, '/matches?sort=mode&order=desc')).body;
    expect(all.data.map((m: { mode: string }) => m.mode).slice(0, 1)).toEqual(['solo_%']);
    for (const m of all.data) expect(m).not.toHaveProperty('players');
    expect((await opsGet(s, '/matches?status=error')).body.data.map((m: { id: string }) => m.id)).toEqual([ids[1]]);
    expect((await opsGet(s, '/matches?q=%25')).body.data.map((m: { id: string }) => m.id)).toEqual([ids[2]]);
    expect((await opsGet(s, `/matches/${ids[0]}`)).body.data).toMatchObject({ id: ids[0], mode: 'duo', status: 'finished', inserted_at: expect.stringMatching(ISO) });
    expectError(await opsGet(s, `/matches/${randomUUID()}`), 404, 'ops.not_found');
  });
});

describe('economy', () => {
  it('lists item definitions and listings with their filters, and looks each up', async () => {
    const db = s.ctx.db;
    await db.insertInto('currencies').values([{ code: 'gold', name: 'Gold' }, { code: 'gems', name: 'Gems' }] as never).execute();
    const sword = randomUUID();
    const shield = randomUUID();
    await db.insertInto('item_defs').values([
      { id: sword, slug: 'sword_1', name: 'Sword', category: 'weapon', rarity: 'rare' },
      { id: shield, slug: 'shield', name: 'Round Shield', category: 'armour', rarity: 'common' },
    ] as never).execute();
    const listings = [randomUUID(), randomUUID(), randomUUID()].sort();
    await db.insertInto('store_listings').values([
      { id: listings[0], slug: 'l0', item_def_id: sword, currency: 'gold', price: 100, active: true },
      { id: listings[1], slug: 'l1', item_def_id: shield, currency: 'gems', price: 5, active: false, valid_until: new Date('2030-01-01T00:00:00Z') },
      { id: listings[2], slug: 'l2', item_def_id: sword, currency: 'gems', price: 7, active: true },
    ] as never).execute();

    const items = (await opsGet(s, '/economy/items?sort=slug')).body;
    expect(items.data.map((i: { slug: string }) => i.slug)).toEqual(['shield', 'sword_1']);
    expect(Object.keys(items.data[0]).sort()).toEqual(['category', 'id', 'inserted_at', 'name', 'rarity', 'slug', 'updated_at']);
    expect((await opsGet(s, '/economy/items?category=weapon')).body.data.map((i: { id: string }) => i.id)).toEqual([sword]);
    expect((await opsGet(s, '/economy/items?q=ROUND')).body.data.map((i: { id: string }) => i.id)).toEqual([shield]);
    expect((await opsGet(s, '/economy/items?q=_')).body.data.map((i: { id: string }) => i.id)).toEqual([sword]);
    expect((await opsGet(s, `/economy/items/${shield}`)).body.data.name).toBe('Round Shield');

    // Newest (highest id) first by default.
    expect((await opsGet(s, '/economy/listings')).body.data.map((l: { id: string }) => l.id)).toEqual([...listings].reverse());
    expect((await opsGet(s, `/economy/listings?item_def_id=${sword.toUpperCase()}&active=true&sort=price`)).body.data.map((l: { price: number }) => l.price)).toEqual([7, 100]);
    expect((await opsGet(s, '/economy/listings?active=false')).body.data).toEqual([
      { id: listings[1], item_def_id: shield, currency: 'gems', price: 5, active: false, valid_from: null, valid_until: '2030-01-01T00:00:00Z', metadata: {} },
    ]);
    expect((await opsGet(s, '/economy/listings?currency=gold')).body.page.total).toBe(1);
    expectError(await opsGet(s, '/economy/listings?item_def_id=sword'), 400, 'ops.invalid_filter');
    expectError(await opsGet(s, '/economy/listings?item_def_id='), 400, 'ops.invalid_filter');
    expect((await opsGet(s, `/economy/listings/${listings[2]}`)).body.data.price).toBe(7);
    expectError(await opsGet(s, `/economy/listings/${sword}`), 404, 'ops.not_found');
  });
});

describe('tournaments', () => {
  it('lists every status with live and without metadata, filters, searches and looks one up', async () => {
    const now = Date.now();
    const active = randomUUID();
    const pending = randomUUID();
    await s.ctx.db.insertInto('tournaments').values([
      { id: active, slug: 'weekly', name: 'Weekly Cup', leaderboard_id: 'weekly', status: 'active', start_at: new Date(now - 3600_000), end_at: new Date(now + 3600_000), metadata: { secret: 1 }, entry_fee: { currency: 'gold', amount: 5 } },
      { id: pending, slug: 'monthly', name: 'Monthly 100%', leaderboard_id: 'monthly', status: 'pending', start_at: new Date(now + 86_400_000), end_at: new Date(now + 2 * 86_400_000) },
    ] as never).execute();
    const list = (await opsGet(s, '/tournaments?sort=name')).body;
    expect(list.data.map((t: { name: string; live: boolean }) => [t.name, t.live])).toEqual([
      ['Monthly 100%', false],
      ['Weekly Cup', true],
    ]);
    for (const t of list.data) expect(t).not.toHaveProperty('metadata');
    expect(list.data[1]).toMatchObject({ status: 'active', entry_fee: { currency: 'gold', amount: 5 }, rewards: {} });
    expect((await opsGet(s, '/tournaments?status=pending')).body.data.map((t: { id: string }) => t.id)).toEqual([pending]);
    expect((await opsGet(s, '/tournaments?leaderboard_id=weekly')).body.data.map((t: { id: string }) => t.id)).toEqual([active]);
    expect((await opsGet(s, '/tournaments?q=100%25')).body.data.map((t: { id: string }) => t.id)).toEqual([pending]);
    expect((await opsGet(s, `/tournaments/${active}`)).body.data).toMatchObject({ id: active, live: true });
  });
});

describe('notifications', () => {
  it('lists every player’s, newest first, with player, type and read filters and a subject search', async () => {
    const [a, b] = players as [TestPlayer, TestPlayer];
    const base = Date.now();
    const rows = [
      { player_id: a.player_id, type: 'reward', subject: 'You won 50%', read: false },
      { player_id: a.player_id, type: 'friend_request', subject: 'bob wants to be friends', read: true },
      { player_id: b.player_id, type: 'reward', subject: 'You won', read: false },
    ].map((r, i) => ({ id: randomUUID(), content: {}, sent_at: new Date(base + i * 1000), ...r }));
    await s.ctx.db.insertInto('notifications').values(rows as never).execute();
    const all = (await opsGet(s, '/notifications')).body;
    expect(all.data.map((n: { id: string }) => n.id)).toEqual(rows.map((r) => r.id).reverse());
    expect((await opsGet(s, `/notifications?player_id=${a.player_id}`)).body.page.total).toBe(2);
    expect((await opsGet(s, `/notifications?player_id=${a.player_id}&type=reward&read=false`)).body.data.map((n: { id: string }) => n.id)).toEqual([rows[0]!.id]);
    expect((await opsGet(s, '/notifications?q=50%25')).body.data.map((n: { id: string }) => n.id)).toEqual([rows[0]!.id]);
    expectError(await opsGet(s, '/notifications?player_id=me'), 400, 'ops.invalid_filter');
  });
});

describe('chat channels', () => {
  it('lists the channels running here with their players joined, busiest first, and searches their ids', async () => {
    const [a, b] = players as [TestPlayer, TestPlayer];
    const open = async (p: TestPlayer) => {
      const socket = await TestSocket.open(s);
      expect((await socket.request('session.connect', { token: p.access_token })).type).toBe('session.connected');
      return socket;
    };
    const one = await open(a);
    const two = await open(b);
    const twoAgain = await open(b);
    try {
      for (const [socket, channel] of [[one, 'global:ops_lobby'], [two, 'global:ops_lobby'], [twoAgain, 'global:ops_lobby'], [two, 'global:ops_quiet']] as const) {
        const joined = await socket.request('chat.join', { channel_id: channel });
        expect(joined.type, JSON.stringify(joined)).not.toBe('error');
      }
      const list = (await opsGet(s, '/chat/channels')).body;
      // A player on two sockets counts once.
      expect(list.data).toEqual([
        { channel_id: 'global:ops_lobby', members: 2 },
        { channel_id: 'global:ops_quiet', members: 1 },
      ]);
      expect(list.page).toEqual({ limit: 50, offset: 0, total: 2 });
      expect((await opsGet(s, '/chat/channels?q=QUIET')).body.data.map((c: { channel_id: string }) => c.channel_id)).toEqual(['global:ops_quiet']);
      expect((await opsGet(s, '/chat/channels?sort=channel_id&order=desc')).body.data.map((c: { channel_id: string }) => c.channel_id)).toEqual(['global:ops_quiet', 'global:ops_lobby']);
    } finally {
      one.close();
      two.close();
      twoAgain.close();
    }
  });
});

describe('chat channel messages', () => {
  it('reads a channel’s stored history without a running channel, newest first, metadata withheld', async () => {
    const [a, b] = players as [TestPlayer, TestPlayer];
    const base = Date.now();
    const rows = [
      { sender_id: a.player_id, content: 'hello 100%' },
      { sender_id: b.player_id, content: 'hi' },
      { sender_id: a.player_id, content: 'bye' },
    ].map((r, i) => ({ id: randomUUID(), channel_type: 'global', channel_id: 'global:lobby', metadata: { ip: 'x' }, sent_at: new Date(base + i * 1000), ...r }));
    await s.ctx.db.insertInto('chat_messages').values(rows as never).execute();
    const list = (await opsGet(s, '/chat/channels/global:lobby/messages')).body;
    expect(list.data.map((m: { content: string }) => m.content)).toEqual(['bye', 'hi', 'hello 100%']);
    expect(Object.keys(list.data[0]).sort()).toEqual(['channel_id', 'channel_type', 'content', 'id', 'sender_id', 'sent_at']);
    expect((await opsGet(s, `/chat/channels/global:lobby/messages?sender_id=${a.player_id}`)).body.page.total).toBe(2);
    expect((await opsGet(s, '/chat/channels/global:lobby/messages?q=%25')).body.data.map((m: { content: string }) => m.content)).toEqual(['hello 100%']);
    expect((await opsGet(s, '/chat/channels/global:elsewhere/messages')).body).toEqual({ data: [], page: { limit: 50, offset: 0, total: 0 } });
    expectError(await opsGet(s, '/chat/channels/global:lobby/messages?sender_id=a'), 400, 'ops.invalid_filter');
  });
});

describe('leaderboards', () => {
  it('lists live and stored boards with their figures, and a board’s entries with whole-board ranks', async () => {
    const [a, b, c] = players as [TestPlayer, TestPlayer, TestPlayer];
    const submit = (p: TestPlayer, board: string, score: number, sub = 0) => s.call('POST', `/api/v1/leaderboards/${board}`, { token: p.access_token, body: { score, sub_score: sub } });
    await submit(a, 'arena', 10);
    await submit(b, 'arena', 30);
    await submit(c, 'arena', 30, 1);
    await submit(a, 'golf', 72);
    await submit(b, 'golf', 68);
    // Live, not yet stored: listed with its memory figures.
    let boards = (await opsGet(s, '/leaderboards')).body;
    expect(boards.data.map((x: { board_id: string; entries: number; top_score: number; live: boolean }) => [x.board_id, x.entries, x.top_score, x.live])).toEqual([
      ['arena', 3, 30, true],
      ['golf', 2, 68, true],
    ]);
    expect(boards.data[0].updated_at).toMatch(ISO);
    expect((await opsGet(s, '/leaderboards/arena/entries')).body.page.total).toBe(0);

    await s.leaderboardFlush.flush();
    // A board only the table holds (another node's, or one from before a restart) is listed too.
    await s.ctx.db
      .insertInto('leaderboard_entries')
      .values({ id: randomUUID(), leaderboard_id: 'old_100%', player_id: a.player_id, score: '5', sub_score: '0', metadata: {}, updated_at: new Date() } as never)
      .execute();
    boards = (await opsGet(s, '/leaderboards?sort=board_id')).body;
    expect(boards.data.map((x: { board_id: string; live: boolean }) => [x.board_id, x.live])).toEqual([
      ['arena', true],
      ['golf', true],
      ['old_100%', false],
    ]);
    expect((await opsGet(s, '/leaderboards?q=%25')).body.data.map((x: { board_id: string }) => x.board_id)).toEqual(['old_100%']);

    const entries = (await opsGet(s, '/leaderboards/arena/entries')).body;
    expect(entries.data.map((e: { player_id: string; score: number; rank: number }) => [e.player_id, e.score, e.rank])).toEqual([
      [c.player_id, 30, 1],
      [b.player_id, 30, 2],
      [a.player_id, 10, 3],
    ]);
    // Rank is the place on the whole board, whatever the page's order.
    const page = (await opsGet(s, '/leaderboards/arena/entries?sort=score&order=asc&limit=1')).body;
    expect(page.data.map((e: { rank: number }) => e.rank)).toEqual([3]);
    expect(page.page).toEqual({ limit: 1, offset: 0, total: 3 });
    // An ascending board ranks its lowest score first.
    const golf = (await opsGet(s, '/leaderboards/golf/entries?sort=player_id')).body.data;
    expect(Object.fromEntries(golf.map((e: { player_id: string; rank: number }) => [e.player_id, e.rank]))).toEqual({ [b.player_id]: 1, [a.player_id]: 2 });
  });
});

describe('matchmaker', () => {
  it('answers the published sample per mode and the queue, with no ticket or player in it', async () => {
    const [a] = players as [TestPlayer];
    const queued = await s.call('POST', '/api/v1/matchmaker', { token: a.access_token, body: { mode: 'duo', properties: { skill: 3 } } });
    expect(queued.status).toBe(200);
    let body: any;
    for (let i = 0; i < 50; i++) {
      body = (await opsGet(s, '/matchmaker')).body;
      if (body.queue.waiting === 1) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(body.data).toEqual([{ mode: 'duo', waiting: 1, oldest_wait_ms: expect.any(Number), average_wait_ms: expect.any(Number) }]);
    expect(body.queue).toEqual({ waiting: 1, modes: 1, sampled_at: expect.any(Number), age_ms: expect.any(Number) });
    expect(body.page).toEqual({ limit: 50, offset: 0, total: 1 });
    const text = JSON.stringify(body);
    expect(text).not.toContain(a.player_id);
    expect(text).not.toContain(queued.body.ticket_id);
    expectError(await opsGet(s, '/matchmaker?sort=ticket'), 400, 'ops.invalid_sort');
  });
});
