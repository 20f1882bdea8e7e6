import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grant } from '../runtime/economy/wallets';
import { BootRefusal } from '../host/host';
import { expectError } from './support/accounts';
import { freshDatabase } from './support/database';
import { ledgerMismatches } from './support/economy';
import { gameDir, matchScript } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { registerPlayer } from './support/ws-client';

/**
 * Tournaments declared in the game's catalogue: listed, read and joined over
 * REST, moved by the host's clock (here a clock the test moves), finished
 * with frozen standings and rewards paid exactly once, cancelled with
 * refunds when the game stops declaring them.
 */

const HOUR = 3_600_000;
const T0 = Date.parse('2030-01-01T00:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();

const CURRENCIES = [{ code: 'coins' }, { code: 'gems' }];
const cup = {
  slug: 'cup',
  name: 'The Cup',
  max_entries: 3,
  entry_fee: { currency: 'coins', amount: 10 },
  rewards: { '1': { coins: 100, gems: 2 }, '2-3': { coins: 20 } },
  start_at: iso(T0 + HOUR),
  end_at: iso(T0 + 2 * HOUR),
  metadata: { season: 1 },
};
const open = { slug: 'open', name: 'Open', start_at: iso(T0 + 2 * HOUR), end_at: iso(T0 + 3 * HOUR) };
const crowd = { slug: 'crowd', name: 'Crowd', max_entries: 5, entry_fee: { currency: 'gems', amount: 1 }, start_at: iso(T0 + 3 * HOUR), end_at: iso(T0 + 4 * HOUR) };
const doomed = { slug: 'doomed', name: 'Doomed', entry_fee: { currency: 'coins', amount: 7 }, start_at: iso(T0 + HOUR), end_at: iso(T0 + 5 * HOUR) };
const later = { slug: 'later', name: 'Later', start_at: iso(T0 + 10 * HOUR), end_at: iso(T0 + 11 * HOUR) };
const catalogue = (tournaments: unknown[]) => JSON.stringify({ currencies: CURRENCIES, tournaments });

let now = T0;
// The test moves the clock by hours; sessions must outlive that.
const SETTINGS = { leaderboard_client_submit: 'all' as const, access_token_ttl: 7 * 24 * 3600 };
const game = gameDir({ 'match.lua': matchScript('match_size = 2'), 'catalogue.json': catalogue([cup, open, crowd, doomed, later]) });
let s: TestServer;
let ids: Record<string, string>;

beforeAll(async () => {
  s = await startTestServer(SETTINGS, { gameDir: game.dir, clock: { now: () => now } });
  ids = Object.fromEntries((await s.ctx.db.selectFrom('tournaments').select(['id', 'slug']).execute()).map((r) => [r.slug, r.id]));
});
afterAll(async () => {
  await s.close();
  game.remove();
});

const coins = (playerId: string, amount: number, currency = 'coins') => grant(s.ctx, { playerId, currency, amount, reason: 'test' });
const balance = async (token: string, currency = 'coins') =>
  ((await s.call('GET', '/api/v1/wallets', { token })).body.wallets as { currency: string; balance: number }[]).find((w) => w.currency === currency)?.balance ?? 0;
const join = (id: string, token: string) => s.call('POST', `/api/v1/tournaments/${id}/join`, { token });

describe('declared tournaments', () => {
  it('are listed by start time (active by default, any status on request) and read one by one', async () => {
    const p = await registerPlayer(s);
    expect((await s.call('GET', '/api/v1/tournaments', { token: p.token })).body).toEqual({ tournaments: [] });
    const pending = await s.call('GET', '/api/v1/tournaments?status=pending', { token: p.token });
    expect(pending.status).toBe(200);
    expect(pending.body.tournaments.map((t: { name: string }) => t.name)).toEqual(['The Cup', 'Doomed', 'Open', 'Crowd', 'Later']);
    expect((await s.call('GET', '/api/v1/tournaments?status=pending&limit=1', { token: p.token })).body.tournaments).toHaveLength(1);
    const one = await s.call('GET', `/api/v1/tournaments/${ids.cup}`, { token: p.token });
    expect(one.body).toEqual({
      id: ids.cup,
      name: 'The Cup',
      leaderboard_id: 'tournament:cup',
      max_entries: 3,
      entry_fee: { currency: 'coins', amount: 10 },
      rewards: { '1': { coins: 100, gems: 2 }, '2-3': { coins: 20 } },
      status: 'pending',
      start_at: '2030-01-01T01:00:00Z',
      end_at: '2030-01-01T02:00:00Z',
      metadata: { season: 1 },
      inserted_at: expect.any(String),
    });
    expect((await s.call('GET', `/api/v1/tournaments/${ids.open}`, { token: p.token })).body).toMatchObject({ entry_fee: {}, rewards: {}, max_entries: null });
    expectError(await s.call('GET', '/api/v1/tournaments/01900000-0000-7000-8000-000000000000', { token: p.token }), 404, 'tournament.not_found');
    expectError(await s.call('GET', '/api/v1/tournaments/nope', { token: p.token }), 404, 'tournament.not_found');
    expectError(await s.call('GET', '/api/v1/tournaments'), 401, 'unauthenticated');
  });
});

describe('joining', () => {
  it('charges the entry fee in the join, refuses a second entry, a short wallet and a full field', async () => {
    const [a, b, c, d] = [await registerPlayer(s), await registerPlayer(s), await registerPlayer(s), await registerPlayer(s)];
    const broke = await join(ids.cup!, a.token);
    expectError(broke, 402, 'economy.insufficient_funds');
    expect(await balance(a.token)).toBe(0);
    for (const p of [a, b, c, d]) await coins(p.playerId, 15);
    expect((await join(ids.cup!, a.token)).body).toEqual({ success: true, tournament_id: ids.cup });
    expect(await balance(a.token)).toBe(5);
    const history = (await s.call('GET', '/api/v1/wallets/coins/history', { token: a.token })).body.transactions;
    expect(history[0]).toMatchObject({ amount: -10, reason: 'tournament_entry' });
    expectError(await join(ids.cup!, a.token), 409, 'tournament.already_joined');
    expect(await balance(a.token)).toBe(5);
    expect((await join(ids.cup!, b.token)).status).toBe(200);
    expect((await join(ids.cup!, c.token)).status).toBe(200);
    expectError(await join(ids.cup!, d.token), 409, 'tournament.full');
    expect(await balance(d.token)).toBe(15);
    // A free tournament takes anyone, and costs nothing.
    expect((await join(ids.open!, d.token)).status).toBe(200);
    expect(await balance(d.token)).toBe(15);
    expectError(await join('01900000-0000-7000-8000-000000000000', d.token), 404, 'tournament.not_found');
    expectError(await s.call('POST', `/api/v1/tournaments/${ids.open}/join`), 401, 'unauthenticated');
  });

  it('lets exactly max_entries of many simultaneous joiners in, and charges only them', async () => {
    const players = await Promise.all(Array.from({ length: 20 }, () => registerPlayer(s)));
    for (const p of players) await coins(p.playerId, 1, 'gems');
    const answers = await Promise.all(players.map((p) => join(ids.crowd!, p.token)));
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses.filter((x) => x === 200)).toHaveLength(5);
    expect(statuses.filter((x) => x === 409)).toHaveLength(15);
    const entrants = await s.ctx.db.selectFrom('tournament_entrants').select('player_id').where('tournament_id', '=', ids.crowd!).execute();
    expect(entrants).toHaveLength(5);
    const paid = await Promise.all(players.map((p) => balance(p.token, 'gems')));
    expect(paid.filter((g) => g === 0)).toHaveLength(5);
    expect(await ledgerMismatches(s.ctx.db)).toEqual([]);
  });
});

describe('the tournament clock', () => {
  it('starts a tournament at start_at and finishes it at end_at, freezing the entrants standings and paying each rank once', async () => {
    const [a, b, c, outsider] = [await registerPlayer(s), await registerPlayer(s), await registerPlayer(s), await registerPlayer(s)];
    // The field of the earlier test filled The Cup; this one runs on Open, which pays nothing, and on a fresh server's declarations below.
    for (const p of [a, b, c]) expect((await join(ids.open!, p.token)).status).toBe(200);
    now = T0 + 2 * HOUR;
    await s.tournamentClock.tick();
    const active = await s.call('GET', '/api/v1/tournaments', { token: a.token });
    expect(active.body.tournaments.map((t: { id: string }) => t.id)).toEqual(expect.arrayContaining([ids.open, ids.doomed]));
    expect((await s.call('GET', `/api/v1/tournaments/${ids.open}`, { token: a.token })).body.status).toBe('active');
    // Joining stays open while it runs.
    const late = await registerPlayer(s);
    expect((await join(ids.open!, late.token)).status).toBe(200);

    const submit = (token: string, score: number) => s.call('POST', '/api/v1/leaderboards/tournament:open', { token, body: { score } });
    for (const [p, score] of [[a, 50], [b, 70], [c, 70], [outsider, 999]] as const) expect((await submit(p.token, score)).status).toBe(200);
    now = T0 + 3 * HOUR;
    await s.tournamentClock.tick();
    const standings = await s.call('GET', `/api/v1/tournaments/${ids.open}/standings`, { token: a.token });
    expect(standings.body.status).toBe('finished');
    // The outsider never entered; b and c tie and are ordered by player id; `late` entered but scored nothing.
    const [first, second] = [b, c].sort((x, y) => (x.playerId < y.playerId ? -1 : 1));
    expect(standings.body.standings).toEqual([
      { rank: 1, player_id: first!.playerId, score: 70, sub_score: 0, reward: {} },
      { rank: 2, player_id: second!.playerId, score: 70, sub_score: 0, reward: {} },
      { rank: 3, player_id: a.playerId, score: 50, sub_score: 0, reward: {} },
    ]);
    expectError(await join(ids.open!, outsider.token), 404, 'tournament.not_found');
  });
});

describe('a finish across restarts and nodes', () => {
  it('pays the rewards once, whichever node finishes and however often the clock runs', async () => {
    const database = await freshDatabase();
    const dir = gameDir({ 'match.lua': matchScript('match_size = 2'), 'catalogue.json': catalogue([cup]) });
    let t = T0;
    // Two nodes over one database; each node's shutdown would close it, so neither owns it.
    const shared = { ...database, close: async () => {} };
    const node = () => startTestServer(SETTINGS, { gameDir: dir.dir, database: shared, clock: { now: () => t } });
    const first = await node();
    try {
      const id = (await first.ctx.db.selectFrom('tournaments').select('id').executeTakeFirstOrThrow()).id;
      const players = [await registerPlayer(first), await registerPlayer(first), await registerPlayer(first)];
      for (const p of players) {
        await grant(first.ctx, { playerId: p.playerId, currency: 'coins', amount: 10, reason: 'test' });
        expect((await first.call('POST', `/api/v1/tournaments/${id}/join`, { token: p.token })).status).toBe(200);
      }
      t = T0 + HOUR;
      await first.tournamentClock.tick();
      for (const [i, p] of players.entries()) {
        expect((await first.call('POST', '/api/v1/leaderboards/tournament:cup', { token: p.token, body: { score: 10 * (i + 1) } })).status).toBe(200);
      }
      // The scores reach the table, so a second node over the same database
      // loads the same board at boot; then both clocks come due at once, and
      // whichever node flips the status pays from the same standings.
      await first.leaderboardFlush.flush();
      const second = await node();
      try {
        // A pass started just before the end reads that time; a tick made
        // while it runs waits for a pass of its own instead of joining it,
        // so it reads the new time and finishes the tournament.
        await second.tournamentClock.tick();
        t = T0 + 2 * HOUR - 1;
        const early = second.tournamentClock.tick();
        t = T0 + 2 * HOUR;
        const late = second.tournamentClock.tick();
        expect((await early).finished).toEqual([]);
        expect((await late).finished).toEqual([id]);
        expect([...first.logs, ...second.logs].filter((l) => l.event === 'tournament_clock_failed')).toEqual([]);
        const again = await Promise.all([first.tournamentClock.tick(), second.tournamentClock.tick(), first.tournamentClock.tick()]);
        expect(again.flatMap((a) => a.finished)).toEqual([]);
      } finally {
        await second.close();
      }
      const rewards = await first.ctx.db
        .selectFrom('transactions')
        .innerJoin('wallets', 'wallets.id', 'transactions.wallet_id')
        .select(['wallets.player_id', 'wallets.currency', 'transactions.amount'])
        .where('transactions.reason', '=', 'tournament_reward')
        .execute();
      const byPlayer = (pid: string) => rewards.filter((r) => r.player_id === pid).map((r) => `${r.currency}:${r.amount}`).sort();
      expect(byPlayer(players[2]!.playerId)).toEqual(['coins:100', 'gems:2']);
      expect(byPlayer(players[1]!.playerId)).toEqual(['coins:20']);
      expect(byPlayer(players[0]!.playerId)).toEqual(['coins:20']);
      expect(rewards).toHaveLength(4);
      expect(await ledgerMismatches(first.ctx.db)).toEqual([]);
    } finally {
      await first.close();
      await database.close();
      dir.remove();
    }
  });

  it('catches up at boot on a tournament whose start and end both passed while no node ran', async () => {
    const dir = gameDir({ 'match.lua': matchScript('match_size = 2'), 'catalogue.json': catalogue([cup]) });
    const late = await startTestServer(SETTINGS, { gameDir: dir.dir, clock: { now: () => T0 + 10 * HOUR } });
    try {
      await expect.poll(async () => (await late.ctx.db.selectFrom('tournaments').select('status').executeTakeFirstOrThrow()).status, { timeout: 10_000 }).toBe('finished');
    } finally {
      await late.close();
      dir.remove();
    }
  });
});

describe('the declarations', () => {
  it('follow edits; a tournament the file drops is cancelled and its entrants refunded', async () => {
    const p = await registerPlayer(s);
    await coins(p.playerId, 7);
    expect((await join(ids.doomed!, p.token)).status).toBe(200);
    expect(await balance(p.token)).toBe(0);
    game.write('catalogue.json', catalogue([cup, open, crowd, { ...doomed, name: 'Renamed' }, later]));
    await expect.poll(async () => (await s.call('GET', `/api/v1/tournaments/${ids.doomed}`, { token: p.token })).body.name, { timeout: 10_000 }).toBe('Renamed');
    game.write('catalogue.json', catalogue([cup, open, crowd, later]));
    await expect.poll(async () => (await s.call('GET', `/api/v1/tournaments/${ids.doomed}`, { token: p.token })).body.status, { timeout: 10_000 }).toBe('cancelled');
    expect(await balance(p.token)).toBe(7);
    const history = (await s.call('GET', '/api/v1/wallets/coins/history', { token: p.token })).body.transactions;
    expect(history[0]).toMatchObject({ amount: 7, reason: 'tournament_refund' });
    expectError(await join(ids.doomed!, p.token), 404, 'tournament.not_found');
    expect(await ledgerMismatches(s.ctx.db)).toEqual([]);
  });

  it('refuse the boot naming the entry: an undeclared currency, a bad or overlapping rank range, an end before the start', async () => {
    const cases: [unknown, string][] = [
      [{ ...open, entry_fee: { currency: 'gold', amount: 1 } }, 'tournaments[0] "open": currency "gold" is not declared'],
      [{ ...open, rewards: { '1': { gold: 5 } } }, 'tournaments[0] "open": currency "gold" is not declared'],
      [{ ...open, rewards: { '0-2': { coins: 5 } } }, 'tournaments[0] "open".rewards'],
      [{ ...open, rewards: { '1-3': { coins: 5 }, '3': { coins: 1 } } }, 'must not overlap'],
      [{ ...open, end_at: open.start_at }, 'end_at must be later than start_at'],
    ];
    for (const [declared, message] of cases) {
      const dir = gameDir({ 'match.lua': matchScript('match_size = 2'), 'catalogue.json': catalogue([declared]) });
      try {
        const refused = await startTestServer({}, { gameDir: dir.dir }).then(
          async (up) => (await up.close(), null),
          (err: unknown) => err,
        );
        expect(refused).toBeInstanceOf(BootRefusal);
        expect((refused as Error).message).toContain(message);
      } finally {
        dir.remove();
      }
    }
  });
});

describe('erasure', () => {
  it('takes an erased player out of the tournaments they entered', async () => {
    const res = await s.call('POST', '/api/v1/auth/register', { body: { username: `gone_${Date.now() % 1e7}`, password: 'correct horse' } });
    const gone = res.body as { player_id: string; access_token: string };
    expect((await join(ids.later!, gone.access_token)).status).toBe(200);
    expect((await s.call('POST', '/api/v1/players/me/erase', { token: gone.access_token, body: { password: 'correct horse' } })).status).toBe(200);
    const left = await s.ctx.db.selectFrom('tournament_entrants').select('player_id').where('player_id', '=', gone.player_id).execute();
    expect(left).toEqual([]);
  });
});
