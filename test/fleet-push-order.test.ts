import { Redis } from 'ioredis';
import { REDIS_URL, redisDown } from './support/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OpenDatabase } from '../host/infra/database';
import { freshDatabase } from './support/database';
import { gameDir, matchScript } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { recordFrames, registerPlayer, TestSocket, type Frame } from './support/ws-client';

// Pushes on a clustered node: the node's own sockets get them in the call
// that made them, so a match script's game.send keeps its place among the
// match.state frames written straight to the socket, and every socket gets
// each push once whichever node holds it. Two nodes in this process over one
// database (so it also runs on the embedded one) and one real Redis.

const skipReason = await redisDown();

// Each tick sends every player the tick's number, then the tick's state frame follows.
const game = gameDir({
  'config.lua': 'return { default = "match.lua" }',
  'match.lua': matchScript(
    'match_size = 1\nmin_players = 1\nmax_players = 2\nquick_play = true',
    `
function init(config) return { tick = 0, players = {} } end
function join(player_id, state) state.players[#state.players + 1] = player_id return state end
function tick(state)
  state.tick = state.tick + 1
  for _, p in ipairs(state.players) do game.send(p, { tick = state.tick }) end
  return state
end
function get_state(player_id, state) return { tick = state.tick } end
`,
  ),
});

// Scripts on the node's own thread: no worker to start, and the same event order as a worker lane.
const SETTINGS = { match_workers: 0 };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, probe: () => boolean, withinMs = 15_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${withinMs} ms`);
    await sleep(20);
  }
}

/** `m<tick>` for a game.send, `s<tick>` for a state frame: what the socket saw, in order. */
function ticksSeen(frames: Frame[]): string[] {
  const out: string[] = [];
  for (const f of frames) {
    if (f.type === 'module.message') out.push(`m${f.payload.message.tick}`);
    else if (f.type === 'match.state') out.push(`s${f.payload.tick}`);
  }
  return out;
}

describe.skipIf(skipReason !== null)('pushes on a clustered node', () => {
  let database: OpenDatabase & { close(): Promise<void> };
  let a: TestServer;
  let b: TestServer;
  const prefix = `svc-test-push-${process.pid}-${Date.now().toString(36)}:`;

  beforeAll(async () => {
    database = await freshDatabase();
    const shared = { ...database, close: async () => {} };
    a = await startTestServer(SETTINGS, { database: shared, gameDir: game.dir, redis: { url: REDIS_URL, prefix, nodeId: 'push-a' } });
    b = await startTestServer(SETTINGS, { database: shared, gameDir: game.dir, redis: { url: REDIS_URL, prefix, nodeId: 'push-b' } });
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await database?.close();
    game.remove();
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  async function connect(server: TestServer, token: string): Promise<TestSocket> {
    const socket = await TestSocket.open(server);
    expect((await socket.request('session.connect', { token })).type).toBe('session.connected');
    return socket;
  }

  it("a match script's game.send reaches the socket on the match's node before that tick's state frame, once; the player's socket on the other node gets it once too", async () => {
    const player = await registerPlayer(a);
    const here = await connect(a, player.token);
    const there = await connect(b, player.token);
    const seenHere = recordFrames(here);
    const seenThere = recordFrames(there);
    expect((await here.request('match.find_or_create', { mode: 'default' })).type).toBe('match.joined');

    // Ten ticks of 100 ms.
    await until('ten state frames', () => seenHere.filter((f) => f.type === 'match.state' && f.payload.tick >= 10).length > 0);
    here.close();
    const first = seenHere.find((f) => f.type === 'module.message')!.payload.message.tick as number;
    const last = 10;
    const expected: string[] = [];
    for (let t = first; t <= last; t++) expected.push(`m${t}`, `s${t}`);
    const inRange = (e: string) => Number(e.slice(1)) >= first && Number(e.slice(1)) <= last;
    expect(ticksSeen(seenHere).filter(inRange)).toEqual(expected);

    // The other node has no match, only the pushes, each once.
    await until('the other node caught up', () => ticksSeen(seenThere).includes(`m${last}`));
    await sleep(200);
    const wanted = expected.filter((e) => e.startsWith('m'));
    expect(ticksSeen(seenThere).filter(inRange)).toEqual(wanted);
    there.close();
  });

  it('a DM reaches the recipient once on the node that sent it and once on the other node', async () => {
    const sender = await registerPlayer(a);
    const target = await registerPlayer(a);
    const here = await connect(a, target.token);
    const there = await connect(b, target.token);
    const seenHere = recordFrames(here);
    const seenThere = recordFrames(there);
    for (const [i, node] of [a, b].entries()) {
      const sent = await node.call('POST', '/api/v1/dm', { token: sender.token, body: { recipient_id: target.playerId, content: `dm ${i}` } });
      expect(sent.status).toBe(200);
    }
    const dms = (frames: Frame[]) => frames.filter((f) => f.type === 'dm.message').map((f) => f.payload.content);
    await until('both DMs on both sockets', () => dms(seenHere).length >= 2 && dms(seenThere).length >= 2);
    await sleep(200);
    // The sending node writes dm 1 to its own socket at once, while dm 0 from
    // the other node may still be on the bus: only the node that sent first
    // sees them in the order they were sent.
    expect(dms(seenHere)).toEqual(['dm 0', 'dm 1']);
    expect(dms(seenThere).sort()).toEqual(['dm 0', 'dm 1']);
    here.close();
    there.close();
  });
});

if (skipReason !== null) {
  describe('pushes on a clustered node', () => {
    it.skip(`skipped: ${skipReason}`, () => {});
  });
}
