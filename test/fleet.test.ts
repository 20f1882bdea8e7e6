import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { callOnce } from './support/calls';
import { REDIS_URL, redisDown } from './support/redis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHost, type Child } from '../bench/_children';
import { gameDir, matchScript } from './support/game-dir';
import { RoundRobinProxy } from './support/round-robin-proxy';
import { TestSocket, type Frame } from './support/ws-client';

// Three host processes (dist/host.mjs, as `npm start` runs it) over one
// PostgreSQL database and one Redis, behind a round-robin balancer. A fleet
// needs a database server: the embedded one lives inside one process. So
// this file always uses a server: DATABASE_URL when the suite runs against
// one, else the local server CI starts; it makes a database of its own there
// (fresh name, dropped at the end), so it never meets another file's schema.
// Redis keys and the bus channel get a fresh prefix for the same reason.

const SERVER_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const OPS = 'fleet-test-operator-secret-0123456789abcdef';
const NODES = ['node-a', 'node-b', 'node-c'] as const;

async function unreachable(): Promise<string | null> {
  const down = await redisDown();
  if (down) return down;
  const client = new pg.Client({ connectionString: SERVER_URL, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
  } catch (err) {
    return `PostgreSQL is not reachable at ${SERVER_URL} (${(err as Error).message}); a fleet cannot share the embedded database`;
  } finally {
    await client.end().catch(() => {});
  }
  return null;
}

const skipReason = await unreachable();

interface Answer {
  status: number;
  body: any;
}

/** One request on a connection of its own, so the balancer picks a node per request. */
async function request(base: string, method: string, p: string, options: { token?: string; body?: unknown; bearer?: string } = {}): Promise<Answer> {
  const token = options.token ?? options.bearer;
  const { status, body } = await callOnce(new URL(`/api/v1${p}`, base).toString(), method, { ...(token ? { token } : {}), body: options.body });
  return { status, body };
}

async function until<T>(what: string, probe: () => Promise<T | null | undefined | false>, withinMs = 15_000): Promise<T> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const got = await probe();
    if (got) return got;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const game = gameDir({
  'config.lua': 'return { default = "match.lua", realm = "realm.lua" }',
  'match.lua': matchScript('match_size = 2\nmin_players = 1\nmax_players = 4\nquick_play = true'),
  'realm.lua': `
game_type = "world"
match_size = 1
max_players = 8
tick_rate = 50
grid_size = 2
zone_size = 100
function init(config) return {} end
function join(player_id, state) return state end
function leave(player_id, state) return state end
function spawn_position(player_id, state) return { x = 10, y = 10 } end
function zone_tick(entities, zone_state) return entities, zone_state or {} end
function handle_input(player_id, input, entities) return entities end
`,
  'rpc.lua': `
rpc = {}
function rpc.poke(player_id, params)
  game.send(params.to, { text = params.text, from = player_id })
  return { sent = true }
end
`,
});

describe.skipIf(skipReason !== null)('a fleet of three nodes behind a round-robin balancer', () => {
  let root: string;
  let configFile: string;
  let dbName: string;
  let dbUrl: string;
  const prefix = `svc-test-${process.pid}-${Date.now().toString(36)}:`;
  const nodes = new Map<string, Child>();
  let proxy: RoundRobinProxy;
  const sockets: TestSocket[] = [];

  const env = (node: string, config: string) => ({
    DATABASE_URL: dbUrl,
    REDIS_URL,
    REDIS_PREFIX: prefix,
    SVC_NODE_ID: node,
    SVC_CONFIG: config,
    GAME_DIR: game.dir,
  });

  beforeAll(async () => {
    dbName = `svc_fleet_${process.pid}_${Date.now().toString(36)}`;
    const admin = new pg.Client({ connectionString: SERVER_URL });
    await admin.connect();
    await admin.query(`create database ${dbName}`);
    await admin.end();
    const u = new URL(SERVER_URL);
    u.pathname = `/${dbName}`;
    dbUrl = u.toString();
    root = mkdtempSync(path.join(tmpdir(), 'svc-fleet-'));
    const config = path.join(root, 'settings.json');
    configFile = config;
    writeFileSync(
      config,
      JSON.stringify({
        pbkdf2_iterations: 1000,
        response_checks: true,
        ops_secret: OPS,
        lua_time_budget_ms: { init_tick: 500, other: 200 },
        rate_limits: { register: { limit: 1000, window: 1000 }, auth: { limit: 1000, window: 1000 }, api: { limit: 10000, window: 1000 } },
        game_modes: { default: { match_size: 2, min_players: 1, max_players: 4, quick_play: true, chat_channels: ['lobby'] } },
        leaderboard_client_submit: 'all',
        leaderboards: { fleet_incr: { operator: 'incr' }, fleet_set: { operator: 'set' } },
      }),
    );
    // The first node migrates the fresh database; the others start on a current schema.
    const first = await startHost(env(NODES[0], config));
    nodes.set(NODES[0], first);
    await first.ready(60_000);
    const rest = await Promise.all(NODES.slice(1).map((n) => startHost(env(n, config))));
    rest.forEach((child, i) => nodes.set(NODES[i + 1]!, child));
    await Promise.all(rest.map((c) => c.ready(60_000)));
    proxy = await RoundRobinProxy.start(NODES.map((node) => ({ node, port: Number(new URL(nodes.get(node)!.url).port) })));
  }, 120_000);

  afterAll(async () => {
    for (const s of sockets) s.close();
    await proxy?.close();
    await Promise.all([...nodes.values()].map((c) => c.stop(5000)));
    const admin = new pg.Client({ connectionString: SERVER_URL });
    await admin.connect();
    await admin.query(`drop database if exists ${dbName} with (force)`);
    await admin.end();
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    rmSync(root, { recursive: true, force: true });
    game.remove();
  }, 60_000);

  let counter = 0;
  async function register(): Promise<{ playerId: string; token: string; refresh: string }> {
    const username = `fleet_${process.pid}_${++counter}`;
    const res = await request(proxy.url, 'POST', '/auth/register', { body: { username, password: 'correct horse battery' } });
    expect(res.status).toBe(200);
    return { playerId: res.body.player_id, token: res.body.access_token, refresh: res.body.refresh_token };
  }

  /** A socket through the balancer, on the named node (a `?node=` route) or wherever it sends it. */
  async function connect(token: string, node?: string): Promise<TestSocket> {
    const socket = await TestSocket.open({ port: proxy.port }, {}, node ? `/ws?node=${node}` : '/ws');
    sockets.push(socket);
    const reply = await socket.request('session.connect', { token });
    expect(reply.type).toBe('session.connected');
    return socket;
  }

  const direct = (node: string) => nodes.get(node)!.url;
  const onlineOn = async (node: string) => (await request(direct(node), 'GET', '/ops/stats', { bearer: OPS })).body.data.online_players as number | null;
  /** Every test closes its sockets; counts start once the last closes have reached every node. */
  async function noneOnline(): Promise<number> {
    for (const node of NODES) await until(`nobody online on ${node}`, async () => (await onlineOn(node)) === 0);
    return 0;
  }

  it('spreads requests over every node', async () => {
    const before = proxy.routed.length;
    for (let i = 0; i < 6; i++) expect((await request(proxy.url, 'GET', '/health/ready')).status).toBe(200);
    expect(new Set(proxy.routed.slice(before))).toEqual(new Set(NODES));
  });

  it('counts online players fleet-wide and tells friends on other nodes about presence', async () => {
    const base = await noneOnline();
    const [ann, bob] = [await register(), await register()];
    const friendship = await request(proxy.url, 'POST', '/friends', { token: ann.token, body: { friend_id: bob.playerId } });
    expect(friendship.status).toBe(200);
    expect((await request(proxy.url, 'PUT', `/friends/${ann.playerId}`, { token: bob.token, body: { status: 'accepted' } })).status).toBe(200);
    const annSocket = await connect(ann.token, 'node-a');
    const bobSocket = await connect(bob.token, 'node-b');
    // Every node reads the same count, whichever node holds the sockets.
    for (const node of NODES) await until(`online_players on ${node}`, async () => (await onlineOn(node)) === base + 2);

    const told = annSocket.next((f) => f.type === 'presence.updated' && f.payload.player_id === bob.playerId);
    const reply = await bobSocket.request('presence.update', { status: 'in_lobby' });
    expect(reply.payload.status).toBe('in_lobby');
    expect((await told).payload).toMatchObject({ player_id: bob.playerId, status: 'in_lobby' });
    // The friends list read on any node shows it.
    for (let i = 0; i < 3; i++) {
      const list = await request(proxy.url, 'GET', '/friends', { token: ann.token });
      expect(list.body.friends.find((f: any) => f.friend_id === bob.playerId || f.player_id === bob.playerId)).toMatchObject({ online: true, presence: { status: 'in_lobby' } });
    }
    annSocket.close();
    bobSocket.close();
    for (const node of NODES) await until(`online_players back on ${node}`, async () => (await onlineOn(node)) === base);
  });

  it('delivers a chat channel to members on every node exactly once, in one order, each sender in its own order', async () => {
    const players = await Promise.all(NODES.map(() => register()));
    const socks = await Promise.all(players.map((p, i) => connect(p.token, NODES[i])));
    for (const s of socks) expect((await s.request('chat.join', { channel_id: 'global:lobby' })).type).toBe('chat.joined');
    const received: Frame[][] = socks.map(() => []);
    socks.forEach((s, i) => s.ws.on('message', (d) => {
      const f = JSON.parse(String(d)) as Frame;
      if (f.type === 'chat.message') received[i]!.push(f);
    }));
    const PER = 8;
    await Promise.all(
      socks.map(async (s, i) => {
        for (let n = 0; n < PER; n++) s.send({ type: 'chat.send', payload: { channel_id: 'global:lobby', content: `${i}:${n}` } });
      }),
    );
    await until('every message on every socket', async () => received.every((r) => r.length >= PER * socks.length));
    // A little longer: no duplicate arrives late.
    await new Promise((r) => setTimeout(r, 300));
    const orders = received.map((r) => r.map((f) => f.payload.content as string));
    for (const order of orders) {
      expect(order).toHaveLength(PER * socks.length);
      expect(new Set(order).size).toBe(order.length);
      expect(order).toEqual(orders[0]);
      for (let i = 0; i < socks.length; i++) {
        const mine = order.filter((c) => c.startsWith(`${i}:`));
        expect(mine).toEqual(Array.from({ length: PER }, (_, n) => `${i}:${n}`));
      }
    }
    for (const s of socks) s.close();
  });

  it('pushes DMs, notifications and game.send to the recipient on another node exactly once', async () => {
    const [sender, target] = [await register(), await register()];
    const socket = await connect(target.token, 'node-c');
    const frames: Frame[] = [];
    socket.ws.on('message', (d) => frames.push(JSON.parse(String(d))));
    // Sent through the balancer, so through every node in turn.
    for (let i = 0; i < 3; i++) {
      expect((await request(proxy.url, 'POST', '/dm', { token: sender.token, body: { recipient_id: target.playerId, content: `dm ${i}` } })).status).toBe(200);
      expect((await request(proxy.url, 'POST', '/rpc/game.poke', { token: sender.token, body: { params: { to: target.playerId, text: `poke ${i}` } } })).status).toBe(200);
    }
    // A friend request stores a notification for its target.
    expect((await request(proxy.url, 'POST', '/friends', { token: sender.token, body: { friend_id: target.playerId } })).status).toBe(200);
    await until('every push', async () => frames.filter((f) => ['dm.message', 'module.message', 'notification.new'].includes(f.type)).length >= 7);
    await new Promise((r) => setTimeout(r, 300));
    // Each once. Not necessarily in send order: the recipient's own node writes
    // what was sent through it at once, while what another node sent just
    // before may still be on the bus.
    expect(frames.filter((f) => f.type === 'dm.message').map((f) => f.payload.content).sort()).toEqual(['dm 0', 'dm 1', 'dm 2']);
    expect(frames.filter((f) => f.type === 'module.message').map((f) => f.payload.message.text).sort()).toEqual(['poke 0', 'poke 1', 'poke 2']);
    expect(frames.filter((f) => f.type === 'notification.new')).toHaveLength(1);
    socket.close();
  });

  /** A player with a socket on every node and a warm token cache entry on every node. */
  async function everywhere(): Promise<{ player: Awaited<ReturnType<typeof register>>; socks: TestSocket[] }> {
    const player = await register();
    const socks = await Promise.all(NODES.map((n) => connect(player.token, n)));
    for (const node of NODES) expect((await request(direct(node), 'GET', '/players/me', { token: player.token })).status).toBe(200);
    return { player, socks };
  }

  /** Closes on every node and 401 on every node; returns the slowest close after the revoking answer, in ms (reported, not asserted). */
  async function revokedEverywhere(socks: TestSocket[], token: string, revoke: () => Promise<Answer>): Promise<number> {
    const closedAt = socks.map((s) => s.closed.then(() => performance.now()));
    const answer = await revoke();
    const answeredAt = performance.now();
    expect(answer.status).toBe(200);
    const closes = await Promise.all(closedAt);
    for (const node of NODES) expect((await request(direct(node), 'GET', '/players/me', { token })).status).toBe(401);
    return Math.max(0, ...closes.map((t) => t - answeredAt));
  }

  const revocationMs: Record<string, number> = {};

  it('revokes on every node: logout, refresh-token reuse and erasure close sockets and evict cached tokens', async () => {
    const out = await everywhere();
    revocationMs.logout = await revokedEverywhere(out.socks, out.player.token, () =>
      request(direct('node-a'), 'POST', '/auth/logout', { token: out.player.token, body: { refresh_token: out.player.refresh } }),
    );

    const reused = await everywhere();
    const rotated = await request(direct('node-b'), 'POST', '/auth/refresh', { body: { refresh_token: reused.player.refresh } });
    expect(rotated.status).toBe(200);
    // The rotated pair's sockets too: presenting the burnt refresh token again revokes the whole family.
    const next = rotated.body.access_token as string;
    const nextSocks = await Promise.all(NODES.map((n) => connect(next, n)));
    for (const node of NODES) expect((await request(direct(node), 'GET', '/players/me', { token: next })).status).toBe(200);
    revocationMs.refresh_reuse = await revokedEverywhere(nextSocks, next, async () => {
      const again = await request(direct('node-c'), 'POST', '/auth/refresh', { body: { refresh_token: reused.player.refresh } });
      expect(again.status).toBe(401);
      return { status: 200, body: null };
    });

    const erased = await everywhere();
    revocationMs.erasure = await revokedEverywhere(erased.socks, erased.player.token, () =>
      request(direct('node-b'), 'POST', '/players/me/erase', { token: erased.player.token, body: { password: 'correct horse battery' } }),
    );
    console.log(`fleet revocation, slowest socket close after the answer (ms): ${JSON.stringify(revocationMs)}`);
  });

  it('keeps the matchmaker node-local: a ticket read or cancelled on another node is 404 matchmaker.ticket_not_found', async () => {
    const p = await register();
    const ticket = await request(direct('node-a'), 'POST', '/matchmaker', { token: p.token, body: { mode: 'default', properties: {} } });
    expect(ticket.status).toBe(200);
    for (const node of ['node-b', 'node-c']) {
      const read = await request(direct(node), 'GET', `/matchmaker/${ticket.body.ticket_id}`, { token: p.token });
      expect(read.status).toBe(404);
      expect(read.body.error.code).toBe('matchmaker.ticket_not_found');
      const cancel = await request(direct(node), 'DELETE', `/matchmaker/${ticket.body.ticket_id}`, { token: p.token });
      expect(cancel.status).toBe(404);
      expect(cancel.body.error.code).toBe('matchmaker.ticket_not_found');
    }
    expect((await request(direct('node-a'), 'DELETE', `/matchmaker/${ticket.body.ticket_id}`, { token: p.token })).status).toBe(200);
  });

  it('tells a player on another node where a match runs, and the join succeeds there', async () => {
    const [host, guest] = [await register(), await register()];
    const hostSocket = await connect(host.token, 'node-b');
    const created = await hostSocket.request('match.find_or_create', { mode: 'default' });
    expect(created.type).toBe('match.joined');
    const matchId = created.payload.match_id as string;
    const elsewhere = await connect(guest.token, 'node-a');
    const refused = await until('the directory names node-b', async () => {
      const f = await elsewhere.request('match.join', { match_id: matchId });
      return f.type === 'error' && f.payload.error.details.node ? f : null;
    });
    expect(refused.payload.reason).toBe('match_not_found');
    expect(refused.payload.error.details.node).toBe('node-b');
    elsewhere.close();
    const there = await connect(guest.token, refused.payload.error.details.node);
    const joined = await there.request('match.join', { match_id: matchId });
    expect(joined.type).toBe('match.joined');
    // An id nobody runs is a plain miss, naming no node.
    const none = await there.request('match.join', { match_id: '00000000-0000-4000-8000-000000000000' });
    expect(none.payload.reason).toBe('match_not_found');
    expect(none.payload.error.details.node).toBeUndefined();
    hostSocket.close();
    there.close();
  });

  it('runs workers: 2 as two processes behind one port that share presence and pushes', async () => {
    const config = path.join(root, 'workers.json');
    writeFileSync(config, JSON.stringify({ workers: 2, pbkdf2_iterations: 1000, ops_secret: OPS, rate_limits: { register: { limit: 1000, window: 1000 } } }));
    const { SVC_NODE_ID: _id, ...rest } = env('pair', config);
    const pair = await startHost({ ...rest, REDIS_PREFIX: `${prefix}pair:` });
    try {
      await pair.ready(60_000);
      // The first worker answers readiness alone; the primary starts the second once the first is up.
      await until('both workers up', async () => pair.events.has('workers_started'), 60_000);
      // Each new connection goes to the next worker: two processes answer.
      const pids = new Set<string>();
      for (let i = 0; i < 8; i++) pids.add((await request(pair.url, 'GET', '/ops/stats', { bearer: OPS })).body.data.node);
      expect(pids.size).toBe(2);
      const [a, b] = await Promise.all([1, 2].map(async (i) => {
        const res = await request(pair.url, 'POST', '/auth/register', { body: { username: `pair_${process.pid}_${i}`, password: 'correct horse battery' } });
        return { playerId: res.body.player_id as string, token: res.body.access_token as string };
      }));
      const socket = await TestSocket.open({ port: Number(new URL(pair.url).port) });
      sockets.push(socket);
      expect((await socket.request('session.connect', { token: a!.token })).type).toBe('session.connected');
      // The other worker learns of the socket over Redis, a moment later: both count it, on every answer.
      await until('both workers count the player', async () => {
        const counts = new Set<number>();
        const nodes = new Set<string>();
        for (let i = 0; i < 4; i++) {
          const stats = (await request(pair.url, 'GET', '/ops/stats', { bearer: OPS })).body.data;
          counts.add(stats.online_players);
          nodes.add(stats.node);
        }
        return nodes.size === 2 && counts.size === 1 && counts.has(1);
      });
      const frames: Frame[] = [];
      socket.ws.on('message', (d) => frames.push(JSON.parse(String(d))));
      for (let i = 0; i < 4; i++) expect((await request(pair.url, 'POST', '/dm', { token: b!.token, body: { recipient_id: a!.playerId, content: `w ${i}` } })).status).toBe(200);
      await until('four pushes', async () => frames.filter((f) => f.type === 'dm.message').length >= 4);
      await new Promise((r) => setTimeout(r, 200));
      // Each once; the worker holding the socket writes its own DMs at once, so not necessarily in send order.
      expect(frames.filter((f) => f.type === 'dm.message').map((f) => f.payload.content).sort()).toEqual(['w 0', 'w 1', 'w 2', 'w 3']);
      socket.close();
    } finally {
      await pair.stop(10_000);
    }
  }, 90_000);

  it('keeps leaderboards the same on every node, and a node that joins later starts from a copy', async () => {
    const players = await Promise.all([0, 1, 2].map(() => register()));
    // Concurrent increments through the balancer land on every node.
    await Promise.all(
      players.flatMap((p, i) =>
        Array.from({ length: 6 }, () => request(proxy.url, 'POST', '/leaderboards/fleet_incr', { token: p.token, body: { score: i + 1 } }).then((r) => expect(r.status).toBe(200))),
      ),
    );
    // Sets from different nodes: every node keeps the same one.
    for (const [i, p] of players.entries()) {
      for (const n of [5, 9, 7]) expect((await request(direct(NODES[(i + n) % 3]!), 'POST', '/leaderboards/fleet_set', { token: p.token, body: { score: n * 10 + i } })).status).toBe(200);
    }
    const board = async (base: string, id: string) =>
      (await request(base, 'GET', `/leaderboards/${id}?limit=100`, { token: players[0]!.token })).body.entries.map((e: any) => [e.player_id, e.score, e.rank]);
    const want = players.map((p, i) => [p.playerId, 6 * (i + 1)]).reverse();
    for (const node of NODES) {
      await until(`fleet_incr on ${node}`, async () => JSON.stringify((await board(direct(node), 'fleet_incr')).map((e: any[]) => e.slice(0, 2))) === JSON.stringify(want));
    }
    // Every node settles on the last set of each player (read after they agree, not before: a read
    // while the sets travel between nodes sees earlier ones).
    const agreed = await until('fleet_set agrees on the last sets', async () => {
      const now = await Promise.all(NODES.map((n) => board(direct(n), 'fleet_set')));
      const same = now.every((b) => JSON.stringify(b) === JSON.stringify(now[0])) && now[0]!.length === 3;
      return same && JSON.stringify(now[0]!.map((e: any[]) => e[1]).sort()) === JSON.stringify([70, 71, 72]) ? now[0] : null;
    });
    expect(agreed.map((e: any[]) => e[1]).sort()).toEqual([70, 71, 72]);

    // A fourth node boots while nothing was written to the table yet (the flush interval is 30 s): it copies a peer.
    const late = await startHost({ ...env('node-d', configFile) });
    try {
      await late.ready(60_000);
      expect(late.events.has('leaderboards_copied')).toBe(true);
      expect(await board(late.url, 'fleet_incr')).toEqual(await board(direct('node-a'), 'fleet_incr'));
      expect(await board(late.url, 'fleet_set')).toEqual(await board(direct('node-a'), 'fleet_set'));
    } finally {
      await late.stop(10_000);
    }
  }, 90_000);

  it('tells a player on another node where a world runs, and the join succeeds there', async () => {
    const [owner, visitor] = [await register(), await register()];
    const ownerSocket = await connect(owner.token, 'node-c');
    const created = await ownerSocket.request('world.create', { mode: 'realm' });
    expect(created.type).toBe('world.joined');
    const worldId = created.payload.world_id as string;
    const elsewhere = await connect(visitor.token, 'node-b');
    const refused = await until('the directory names node-c', async () => {
      const f = await elsewhere.request('world.join', { world_id: worldId });
      return f.type === 'error' && f.payload.error.details.node ? f : null;
    });
    expect(refused.payload.reason).toBe('world_not_found');
    expect(refused.payload.error.details.node).toBe('node-c');
    elsewhere.close();
    const there = await connect(visitor.token, 'node-c');
    expect((await there.request('world.join', { world_id: worldId })).type).toBe('world.joined');
    ownerSocket.close();
    there.close();
  });

  it('survives a node killed with SIGKILL: the others serve, its players reconnect elsewhere, nothing acknowledged is lost', async () => {
    const [victim, friend] = [await register(), await register()];
    expect((await request(proxy.url, 'POST', '/friends', { token: victim.token, body: { friend_id: friend.playerId } })).status).toBe(200);
    expect((await request(proxy.url, 'PUT', `/friends/${victim.playerId}`, { token: friend.token, body: { status: 'accepted' } })).status).toBe(200);
    const base = await noneOnline();
    const onC = await connect(victim.token, 'node-c');
    const onA = await connect(friend.token, 'node-a');
    await until('both counted', async () => (await onlineOn('node-b')) === base + 2);
    // Acknowledged just before the kill.
    const acked: string[] = [];
    for (let i = 0; i < 5; i++) {
      const sent = await request(proxy.url, 'POST', '/dm', { token: victim.token, body: { recipient_id: friend.playerId, content: `before ${i}` } });
      expect(sent.status).toBe(200);
      acked.push(`before ${i}`);
    }
    const c = nodes.get('node-c')!;
    c.proc.kill('SIGKILL');
    await c.exited;
    await onC.closed;
    // Its player stops counting once its heartbeat lapses, with no goodbye, and friends hear it once.
    for (const node of ['node-a', 'node-b']) await until(`node-c's player dropped on ${node}`, async () => (await onlineOn(node)) === base + 1);
    const offline = (f: Frame) => f.type === 'presence.updated' && f.payload.player_id === victim.playerId && f.payload.status === 'offline';
    await onA.next(offline, 10_000);
    expect(await onA.quiet(offline, 500)).toBe(true);
    // Everything goes on through the balancer, which skips the dead node.
    for (let i = 0; i < 6; i++) expect((await request(proxy.url, 'GET', '/health/ready')).status).toBe(200);
    const back = await connect(victim.token);
    await until('reconnected player counted', async () => (await onlineOn('node-a')) === base + 2);
    const pushed = back.next((f) => f.type === 'dm.message' && f.payload.content === 'after');
    expect((await request(proxy.url, 'POST', '/dm', { token: friend.token, body: { recipient_id: victim.playerId, content: 'after' } })).status).toBe(200);
    await pushed;
    const history = await request(proxy.url, 'GET', `/dm/${friend.playerId}/history?limit=50`, { token: victim.token });
    expect(history.status).toBe(200);
    const contents = history.body.messages.map((m: { content: string }) => m.content);
    for (const a of acked) expect(contents).toContain(a);
    onA.close();
    back.close();
  });
});

describe('workers', () => {
  it('refuses to boot several workers without Redis, saying what is needed', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'svc-workers-'));
    const config = path.join(root, 'settings.json');
    writeFileSync(config, JSON.stringify({ workers: 2 }));
    const { REDIS_URL: _r, DATABASE_URL: _d, ...env } = process.env;
    const child = await startHost({ ...env, SVC_CONFIG: config, SVC_DATA_DIR: path.join(root, 'data') } as Record<string, string>);
    expect(await child.exited).toBe(2);
    expect(child.stderr()).toContain("invalid setting 'workers': 2 processes need REDIS_URL");
    expect(child.stderr()).toContain('DATABASE_URL');
    rmSync(root, { recursive: true, force: true });
  });
});

if (skipReason !== null) {
  describe('a fleet of three nodes', () => {
    it.skip(`skipped: ${skipReason}`, () => {});
  });
}
