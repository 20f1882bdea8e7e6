import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../bench/_children';
import { gameDir, matchScript } from './support/game-dir';
import { startNodes } from './support/node-pair';
import { OPS_SECRET } from './support/ops';
import { until } from './support/production-host';
import { redisDown } from './support/redis';
import type { TestServer } from './support/server';
import { callOnce } from './support/calls';
import { registerPlayer, TestSocket } from './support/ws-client';

// The balancer the repository ships (haproxy.cfg, as compose.fleet.yaml runs
// it), started as written in front of three nodes of one fleet, each rule of
// it checked from a client's side: `?node=` reaches the named node, a client's
// matchmaker calls and socket land on one node, and a node taken out is
// routed around. Clients come from different loopback addresses, which the
// balancer hashes, so the test sees more than one node in use.

const CONFIG = path.join(import.meta.dirname, '..', 'haproxy.cfg');
const NODES = ['node1', 'node2', 'node3'] as const;
/** Client addresses; their hashes spread over the three nodes (checked below). */
const CLIENTS = ['127.0.0.11', '127.0.0.12', '127.0.0.13', '127.0.0.14', '127.0.0.15', '127.0.0.16'];

function haproxyMissing(): string | null {
  const probe = spawnSync('haproxy', ['-v'], { encoding: 'utf8' });
  return probe.error ? `haproxy is not installed (${probe.error.message}); .ci/run installs Debian's package` : null;
}

const skipReason = haproxyMissing() ?? (await redisDown());

interface Answer {
  status: number;
  body: any;
  requestId: string | undefined;
}

/** One request on a fresh connection from `from`, so the balancer routes each one anew. */
async function call(port: number, from: string, method: string, p: string, options: { token?: string; body?: unknown } = {}): Promise<Answer> {
  const { status, body, headers } = await callOnce(`http://127.0.0.1:${port}${p}`, method, { ...options, localAddress: from });
  const id = headers['x-request-id'];
  return { status, body, requestId: typeof id === 'string' ? id : undefined };
}

const game = gameDir({
  'config.lua': 'return { duo = "duo.lua" }',
  'duo.lua': matchScript('match_size = 2'),
});

describe.skipIf(skipReason !== null)('the shipped HAProxy balancer in front of three nodes', () => {
  let fleet: Awaited<ReturnType<typeof startNodes>>;
  let balancer: ChildProcess;
  let port: number;
  const sockets: TestSocket[] = [];
  const node = (id: string): TestServer => fleet.nodes.get(id)!;

  /** Which node logged the request that carried this id. */
  const answeredBy = (requestId: string | undefined): string | undefined =>
    NODES.find((id) => fleet.nodes.get(id)?.logs.some((l) => l.event === 'http_request' && l.request_id === requestId));

  /** The node that answers a request from `from` (an operator read, logged at info). */
  async function nodeFor(from: string, query = ''): Promise<string> {
    const res = await call(port, from, 'GET', `/api/v1/ops/stats${query}`, { token: OPS_SECRET });
    expect(res.status).toBe(200);
    return answeredBy(res.requestId)!;
  }

  /** A socket from `from` through the balancer, and the node that holds it. */
  async function socketFrom(from: string, player: { token: string; playerId: string }, query = ''): Promise<{ socket: TestSocket; node: string | undefined }> {
    const socket = await TestSocket.open({ port }, {}, `/ws${query}`, { localAddress: from });
    sockets.push(socket);
    expect((await socket.request('session.connect', { token: player.token })).type).toBe('session.connected');
    return { socket, node: NODES.find((id) => fleet.nodes.get(id)?.logs.some((l) => l.event === 'ws_session_connected' && l.player_id === player.playerId)) };
  }

  beforeAll(async () => {
    fleet = await startNodes('balancer', NODES, { ops_secret: OPS_SECRET, trusted_proxies: ['127.0.0.1'], ws_idle_timeout_ms: 3_600_000 }, { gameDir: game.dir });
    port = await freePort();
    const env = { ...process.env, SVC_BALANCER_BIND: `127.0.0.1:${port}` } as Record<string, string>;
    NODES.forEach((id, i) => (env[`SVC_NODE${i + 1}`] = `127.0.0.1:${node(id).port}`));
    balancer = spawn('haproxy', ['-f', CONFIG, '-db'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    balancer.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    balancer.once('exit', (code) => {
      if (code !== null && code !== 0) console.error(`haproxy exited ${code}: ${stderr}`);
    });
    // Every node is reachable by name once its health checks have passed.
    for (const id of NODES) await until(async () => ((await nodeFor('127.0.0.1', `?node=${id}`)) === id ? true : undefined), 20_000);
  }, 120_000);

  afterAll(async () => {
    for (const s of sockets) s.close();
    balancer?.kill('SIGTERM');
    await fleet?.close();
    game.remove();
  }, 60_000);

  it('routes ?node=<id> to that node, for REST and for the socket, whoever the client is', async () => {
    for (const from of CLIENTS.slice(0, 3)) {
      for (const id of NODES) expect(await nodeFor(from, `?node=${id}`)).toBe(id);
    }
    for (const id of NODES) {
      const { node: holder } = await socketFrom(CLIENTS[0]!, await registerPlayer(node(id)), `?node=${id}`);
      expect(holder).toBe(id);
    }
  });

  it("keeps a client's requests on one node, spreads clients over the nodes, and passes the client's address on", async () => {
    const homes = new Map<string, string>();
    for (const from of CLIENTS) {
      const first = await nodeFor(from);
      for (let i = 0; i < 4; i++) expect(await nodeFor(from)).toBe(first);
      homes.set(from, first);
    }
    expect(new Set(homes.values()).size).toBeGreaterThan(1);
    // Each node saw the client's own address (X-Forwarded-For from a trusted proxy), not the balancer's.
    const res = await call(port, CLIENTS[1]!, 'GET', '/api/v1/ops/stats', { token: OPS_SECRET });
    const line = node(answeredBy(res.requestId)!).logs.find((l) => l.event === 'http_request' && l.request_id === res.requestId);
    expect(line!.ip).toBe(CLIENTS[1]);
  });

  it("lands a player's matchmaker ticket, its reads and its socket on one node: the match is made and announced", async () => {
    const from = CLIENTS[2]!;
    const players = [await registerPlayer(node('node1')), await registerPlayer(node('node2'))];
    const home = await nodeFor(from);
    const joined = [];
    for (const p of players) joined.push(await socketFrom(from, p));
    expect(joined.map((j) => j.node)).toEqual([home, home]);
    const tickets: string[] = [];
    for (const p of players) {
      const queued = await call(port, from, 'POST', '/api/v1/matchmaker', { token: p.token, body: { mode: 'duo' } });
      expect(queued.status, JSON.stringify(queued.body)).toBe(200);
      tickets.push(queued.body.ticket_id);
    }
    // Tickets are node-local (another node answers 404 matchmaker.ticket_not_found): read back through the balancer, each is found.
    for (const [i, p] of players.entries()) {
      const status = await call(port, from, 'GET', `/api/v1/matchmaker/${tickets[i]}`, { token: p.token });
      expect(status.status, JSON.stringify(status.body)).toBe(200);
      expect(answeredBy(status.requestId)).toBe(home);
    }
    for (const { socket } of joined) expect((await socket.next('match.matched', 15_000)).payload.match_id).toEqual(expect.any(String));
  });

  it('routes around a node taken out: its clients move to the others, ?node= of it goes elsewhere', async () => {
    const from = CLIENTS[3]!;
    const home = await nodeFor(from);
    await node(home).close();
    fleet.nodes.delete(home);
    const moved = await until(async () => {
      const res = await call(port, from, 'GET', '/api/v1/ops/stats', { token: OPS_SECRET });
      return res.status === 200 ? answeredBy(res.requestId) : undefined;
    }, 20_000);
    expect(moved).not.toBe(home);
    // Every request from now on is answered, none by the node that left.
    for (let i = 0; i < 5; i++) {
      const res = await call(port, from, 'GET', `/api/v1/ops/stats?node=${home}`, { token: OPS_SECRET });
      expect(res.status).toBe(200);
      expect(answeredBy(res.requestId)).not.toBe(home);
    }
    const { node: holder } = await socketFrom(from, await registerPlayer([...fleet.nodes.values()][0]!));
    expect(holder).toBeDefined();
    expect(holder).not.toBe(home);
  });
});
