import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allRoutes } from '../handlers/routes';
import { clientFrames } from '../runtime/schemas/wire';
import { registerPlayer } from './support/accounts';
import { inProcessApp } from './support/app';
import { gameDir } from './support/game-dir';
import { startNodePair } from './support/node-pair';
import { redisDown } from './support/redis';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, expectErrorFrame, type Frame } from './support/ws-client';

/**
 * A block holds on every way a player's text can reach another player
 * (issue 31). The refusals below are keyed by the frame or route they
 * exercise, and the last describe derives from the declared frame and route
 * tables which of them carry text or address another player: each such
 * frame or route is either exercised here or exempt with its reason, so a
 * content frame added later fails this file until someone decides.
 */

const game = gameDir({
  'match.lua': `
match_size = 1
quick_play = true
function init(config) return { answers = {} } end
function join(player_id, state) return state end
function leave(player_id, state) return state end
-- Relays a player's line to a channel as that player, as an in-game chat would.
function handle_input(player_id, input, state)
  if input.say then state.answers[#state.answers + 1] = tostring(game.chat.send(input.channel, player_id, input.say)) end
  return state
end
function tick(state) return state end
function get_state(player_id, state) return { answers = state.answers } end
`,
});

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ rate_limits: { ws_connect: { limit: 1000, window: 1000 } }, chat_send_rate: { limit: 1000, window: 1000 } }, { gameDir: game.dir });
});
afterAll(async () => {
  await s.close();
  game.remove();
});

type Player = Awaited<ReturnType<typeof connectPlayer>>;
const dmId = (a: string, b: string) => (a < b ? `dm:${a}:${b}` : `dm:${b}:${a}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Generous: long enough for a push the server did send to arrive, on a loaded machine. */
const QUIET_MS = 400;

async function block(blocker: Player, blocked: Player): Promise<void> {
  const res = await s.call('PUT', `/api/v1/friends/${blocked.playerId}`, { token: blocker.token, body: { status: 'blocked' } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}
async function unblock(blocker: Player, blocked: Player): Promise<void> {
  expect((await s.call('DELETE', `/api/v1/friends/${blocked.playerId}`, { token: blocker.token })).status).toBe(200);
}
async function befriend(a: Player, b: Player): Promise<void> {
  expect((await s.call('POST', '/api/v1/friends', { token: a.token, body: { friend_id: b.playerId } })).status).toBe(200);
  expect((await s.call('PUT', `/api/v1/friends/${a.playerId}`, { token: b.token, body: { status: 'accepted' } })).status).toBe(200);
}
/** Resolves once every frame the socket sent before it has settled (a socket's frames are handled in order). */
async function settled(p: Player): Promise<void> {
  expect((await p.socket.request('session.heartbeat', {})).type).toBe('session.heartbeat');
}
const contents = async (p: Player, channel: string): Promise<string[]> => {
  const res = await s.call('GET', `/api/v1/chat/${encodeURIComponent(channel)}/history`, { token: p.token });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.messages.map((m: { content: string }) => m.content);
};
const textFrom = (from: Player) => (f: Frame) => ['chat.message', 'dm.message'].includes(f.type) && f.payload.sender_id === from.playerId;

/** A group's room, `owner`'s, joined by every one of these players on their sockets. */
async function sharedRoom(owner: Player, others: Player[], server = s): Promise<string> {
  const g = await server.call('POST', '/api/v1/groups', { token: owner.token, body: { name: 'Shared', open: true } });
  for (const p of others) expect((await server.call('POST', `/api/v1/groups/${g.body.id}/join`, { token: p.token })).status).toBe(200);
  const room = `room:${g.body.id}`;
  for (const p of [owner, ...others]) expect((await p.socket.request('chat.join', { channel_id: room })).type).toBe('chat.joined');
  return room;
}

/** Two connected players, `blocker` having blocked `blocked`; and the same pair seen from the other side. */
async function blockedPair(): Promise<{ blocker: Player; blocked: Player; both: [Player, Player][] }> {
  const [blocker, blocked] = [await connectPlayer(s), await connectPlayer(s)];
  await block(blocker, blocked);
  return { blocker, blocked, both: [[blocked, blocker], [blocker, blocked]] };
}

/**
 * Each way a player's text or their request can be put in front of another
 * player, as the frame or route that carries it, and the proof that a block
 * stops it both ways.
 */
const refusals: Record<string, () => Promise<void>> = {
  'dm.send': async () => {
    const { both } = await blockedPair();
    for (const [from, to] of both) {
      expectErrorFrame(await from.socket.request('dm.send', { recipient_id: to.playerId, content: 'hi' }), 'blocked', 'dm.blocked');
      expect(await to.socket.quiet(textFrom(from), QUIET_MS)).toBe(true);
    }
  },
  'POST /api/v1/dm': async () => {
    const { both } = await blockedPair();
    for (const [from, to] of both) {
      const res = await s.call('POST', '/api/v1/dm', { token: from.token, body: { recipient_id: to.playerId, content: 'hi' } });
      expect([res.status, res.body.error?.code]).toEqual([403, 'dm.blocked']);
      expect(await to.socket.quiet(textFrom(from), QUIET_MS)).toBe(true);
    }
  },
  'chat.join': async () => {
    const { blocker, blocked, both } = await blockedPair();
    for (const [from, to] of both) {
      expectErrorFrame(await from.socket.request('chat.join', { channel_id: dmId(from.playerId, to.playerId) }), 'blocked', 'dm.blocked');
    }
    // Other channels are not the pair's: the blocker's own group room still admits both.
    await sharedRoom(blocker, [blocked]);
  },
  'chat.send': async () => {
    const { blocker, blocked, both } = await blockedPair();
    const channel = dmId(blocker.playerId, blocked.playerId);
    for (const [from, to] of both) {
      expectErrorFrame(await from.socket.request('chat.send', { channel_id: channel, content: 'still here' }), 'blocked', 'dm.blocked');
      expect(await to.socket.quiet(textFrom(from), QUIET_MS)).toBe(true);
    }
    expect(await contents(blocker, channel)).toEqual([]);
  },
  'POST /api/v1/friends': async () => {
    const { blocker, blocked } = await blockedPair();
    const asked = await s.call('POST', '/api/v1/friends', { token: blocked.token, body: { friend_id: blocker.playerId } });
    expect([asked.status, asked.body.error?.code]).toEqual([404, 'social.friend_not_found']);
    const asking = await s.call('POST', '/api/v1/friends', { token: blocker.token, body: { friend_id: blocked.playerId } });
    expect([asking.status, asking.body.error?.code, asking.body.error?.details]).toEqual([403, 'forbidden', { reason: 'blocked' }]);
    expect(await blocker.socket.quiet('notification.new', QUIET_MS)).toBe(true);
  },
  // A group's name is its creator's text: an invitation puts it in front of the invited player.
  'POST /api/v1/groups/:id/invites': async () => {
    const { both } = await blockedPair();
    for (const [from, to] of both) {
      const g = await s.call('POST', '/api/v1/groups', { token: from.token, body: { name: 'read this', open: false } });
      const res = await s.call('POST', `/api/v1/groups/${g.body.id}/invites`, { token: from.token, body: { player_id: to.playerId } });
      expect([res.status, res.body.error?.code, res.body.error?.details], JSON.stringify(res.body)).toEqual([403, 'forbidden', { reason: 'blocked' }]);
      expect(await to.socket.quiet('notification.new', QUIET_MS)).toBe(true);
    }
  },
  // Asking to join a closed group notifies its managers: not one in a block with the asker.
  'POST /api/v1/groups/:id/requests': async () => {
    const { blocker, blocked } = await blockedPair();
    const other = await connectPlayer(s);
    const g = await s.call('POST', '/api/v1/groups', { token: blocker.token, body: { name: 'Closed', open: false } });
    expect((await s.call('POST', `/api/v1/groups/${g.body.id}/join`, { token: other.token })).status).toBe(403);
    // A second manager, whom the request still reaches.
    expect((await s.call('POST', `/api/v1/groups/${g.body.id}/invites`, { token: blocker.token, body: { player_id: other.playerId } })).status).toBe(200);
    expect((await s.call('POST', `/api/v1/groups/${g.body.id}/join`, { token: other.token })).status).toBe(200);
    expect((await s.call('PUT', `/api/v1/groups/${g.body.id}/members/${other.playerId}/role`, { token: blocker.token, body: { role: 'admin' } })).status).toBe(200);
    const asked = await s.call('POST', `/api/v1/groups/${g.body.id}/requests`, { token: blocked.token });
    expect(asked.body.status, JSON.stringify(asked.body)).toBe('requested');
    const note = (f: Frame) => f.type === 'notification.new' && f.payload.type === 'group_join_request';
    expect((await other.socket.next(note)).payload.content).toMatchObject({ player_id: blocked.playerId });
    expect(await blocker.socket.quiet(note, QUIET_MS)).toBe(true);
  },
  // Presence goes to accepted friends, and a block ends the friendship.
  'presence.update': async () => {
    const [blocker, blocked] = [await connectPlayer(s), await connectPlayer(s)];
    await befriend(blocked, blocker);
    const fromBlocked = (f: Frame) => f.type === 'presence.updated' && f.payload.player_id === blocked.playerId;
    await blocked.socket.request('presence.update', { status: 'before' });
    expect((await blocker.socket.next(fromBlocked)).payload.status).toBe('before');
    await block(blocker, blocked);
    await blocked.socket.request('presence.update', { status: 'after', metadata: { line: 'you blocked me' } });
    expect(await blocker.socket.quiet(fromBlocked, QUIET_MS)).toBe(true);
  },
  // A match script relaying a player's line with `game.chat.send` onto the pair's channel.
  'match.input': async () => {
    const { blocker, blocked } = await blockedPair();
    const channel = dmId(blocker.playerId, blocked.playerId);
    expect((await blocked.socket.request('match.find_or_create', { mode: 'default' })).type).toBe('match.joined');
    blocked.socket.send({ type: 'match.input', payload: { say: 'through the game', channel } });
    // The hand-off answers true; the message is then refused and reaches nobody.
    const st = await blocked.socket.next((f) => f.type === 'match.state' && f.payload.answers.length >= 1, 10_000);
    expect(st.payload.answers).toEqual(['true']);
    await sleep(QUIET_MS);
    expect(await contents(blocker, channel)).toEqual([]);
    expect(await blocker.socket.quiet(textFrom(blocked), QUIET_MS)).toBe(true);
    await blocked.socket.request('match.leave', {});
  },
};

describe('a block', () => {
  for (const [path, proof] of Object.entries(refusals)) it(`holds on ${path}`, proof);

  it('evicts both players from their live dm: channel at once', async () => {
    const [a, m] = [await connectPlayer(s), await connectPlayer(s)];
    const channel = dmId(a.playerId, m.playerId);
    for (const p of [a, m]) expect((await p.socket.request('chat.join', { channel_id: channel })).type).toBe('chat.joined');
    await block(a, m);
    // While blocked, sending on the channel is refused to both, joined or not.
    expectErrorFrame(await m.socket.request('chat.send', { channel_id: channel, content: 'joined before' }), 'blocked', 'dm.blocked');
    expectErrorFrame(await a.socket.request('chat.send', { channel_id: channel, content: 'joined before' }), 'blocked', 'dm.blocked');
    // Lifted, the block leaves neither socket joined: the channel's messages reach them again only once they join again.
    await unblock(a, m);
    m.socket.send({ type: 'chat.send', payload: { channel_id: channel, content: 'after the block' } });
    await settled(m);
    expect(await a.socket.quiet((f) => f.type === 'chat.message' && f.payload.channel_id === channel, QUIET_MS)).toBe(true);
    // A socket's frames arrive in order, so a copy for the sender would already be queued ahead of its heartbeat reply.
    expect(await m.socket.quiet((f) => f.type === 'chat.message' && f.payload.channel_id === channel, 0)).toBe(true);
    expect((await a.socket.request('chat.join', { channel_id: channel })).type).toBe('chat.joined');
    m.socket.send({ type: 'chat.send', payload: { channel_id: channel, content: 'joined again' } });
    expect((await a.socket.next((f) => f.type === 'chat.message' && f.payload.channel_id === channel)).payload.content).toBe('joined again');
  });

  it('hides the pair from each other in a channel they share, live and in history; everyone else sees both', async () => {
    const [a, m, c] = [await connectPlayer(s), await connectPlayer(s), await connectPlayer(s)];
    const room = await sharedRoom(a, [m, c]);
    await block(a, m);
    const inRoom = (from: Player) => (f: Frame) => f.type === 'chat.message' && f.payload.channel_id === room && f.payload.sender_id === from.playerId;
    for (const [from, to, line] of [[m, a, 'from m'], [a, m, 'from a']] as const) {
      // Not refused: the room is not the pair's, and the rest of it still reads the sender.
      from.socket.send({ type: 'chat.send', payload: { channel_id: room, content: line } });
      expect((await c.socket.next(inRoom(from))).payload.content).toBe(line);
      expect(await to.socket.quiet(inRoom(from), QUIET_MS)).toBe(true);
    }
    expect(await contents(c, room)).toEqual(['from m', 'from a']);
    expect(await contents(a, room)).toEqual(['from a']);
    expect(await contents(m, room)).toEqual(['from m']);
    await unblock(a, m);
    m.socket.send({ type: 'chat.send', payload: { channel_id: room, content: 'lifted' } });
    expect((await a.socket.next(inRoom(m))).payload.content).toBe('lifted');
    expect(await contents(a, room)).toEqual(['from m', 'from a', 'lifted']);
  });

  it('leaves the pair its history, and messages flow again once lifted', async () => {
    const [a, m] = [await connectPlayer(s), await connectPlayer(s)];
    const channel = dmId(a.playerId, m.playerId);
    expect((await m.socket.request('dm.send', { recipient_id: a.playerId, content: 'before' })).type).toBe('dm.sent');
    await block(a, m);
    expect(await contents(a, channel)).toEqual(['before']);
    await unblock(a, m);
    m.socket.send({ type: 'chat.send', payload: { channel_id: channel, content: 'on the channel' } });
    await settled(m);
    expect((await m.socket.request('dm.send', { recipient_id: a.playerId, content: 'direct' })).type).toBe('dm.sent');
    expect(await contents(a, channel)).toEqual(['before', 'on the channel', 'direct']);
  });
});

describe.skipIf((await redisDown()) !== null)('a block on a fleet', () => {
  let nodes: Awaited<ReturnType<typeof startNodePair>>;
  beforeAll(async () => {
    nodes = await startNodePair('blocks');
  });
  afterAll(async () => {
    await nodes?.close();
  });

  it('hides a line in a shared channel from the blocker on another node, and only from them', async () => {
    const { a: here, b: there } = nodes;
    const [a, c, m] = [await connectPlayer(there), await connectPlayer(there), await connectPlayer(here)];
    const room = await sharedRoom(m, [a, c], here);
    expect((await here.call('PUT', `/api/v1/friends/${m.playerId}`, { token: a.token, body: { status: 'blocked' } })).status).toBe(200);
    m.socket.send({ type: 'chat.send', payload: { channel_id: room, content: 'over the bus' } });
    expect((await c.socket.next('chat.message')).payload).toMatchObject({ content: 'over the bus', sender_id: m.playerId });
    expect(await a.socket.quiet('chat.message', QUIET_MS)).toBe(true);
  });
});

describe('a node without sockets (the handler library alone)', () => {
  it('writes a direct message the one way too: stored without a group commit, refused while blocked', async () => {
    const app = await inProcessApp();
    try {
      const [a, b] = [await registerPlayer(app), await registerPlayer(app)];
      const send = (from: typeof a, to: typeof b) => app.call('POST', '/api/v1/dm', { token: from.access_token, body: { recipient_id: to.player_id, content: 'hello' } });
      expect((await send(a, b)).status).toBe(200);
      expect((await app.call('GET', `/api/v1/dm/${a.player_id}/history`, { token: b.access_token })).body.messages.map((m: { content: string }) => m.content)).toEqual(['hello']);
      expect((await app.call('PUT', `/api/v1/friends/${a.player_id}`, { token: b.access_token, body: { status: 'blocked' } })).status).toBe(200);
      const refused = await send(a, b);
      expect([refused.status, refused.body.error?.code]).toEqual([403, 'dm.blocked']);
    } finally {
      await app.close();
    }
  });
});

// ---- the inventory -----------------------------------------------------------

type JsonSchema = Record<string, any>;

/** Where a schema accepts text a player chose: a string with no format, pattern or fixed values, or any JSON at all. */
function freeText(schema: JsonSchema | boolean | undefined, defs: JsonSchema): boolean {
  if (schema === undefined || schema === true) return true;
  if (schema === false) return false;
  if (schema.$ref) return freeText(defs[String(schema.$ref).split('/').pop()!], defs);
  const alternatives = [...(schema.anyOf ?? []), ...(schema.oneOf ?? []), ...(schema.allOf ?? [])];
  if (alternatives.some((s: JsonSchema) => freeText(s, defs))) return true;
  if (schema.enum || schema.const !== undefined) return false;
  const types: string[] = schema.type === undefined ? (alternatives.length > 0 ? [] : ['any']) : [schema.type].flat();
  return types.some((t) => {
    if (t === 'any') return true;
    if (t === 'string') return !schema.format && !schema.pattern;
    if (t === 'array') return freeText(schema.items, defs);
    if (t === 'object') {
      if (Object.values(schema.properties ?? {}).some((p) => freeText(p as JsonSchema, defs))) return true;
      return schema.properties === undefined ? schema.additionalProperties !== false : freeText(schema.additionalProperties ?? false, defs);
    }
    return false;
  });
}

function carriesText(schema: z.ZodType): boolean {
  const json = z.toJSONSchema(schema, { io: 'input', target: 'draft-2020-12', unrepresentable: 'any' }) as JsonSchema;
  return freeText(json, json.$defs ?? {});
}

/** Keys that name another player in a path or a body. */
const ADDRESSES_PLAYER = /^:?(player|friend|recipient)_id$/;

/** Frames and routes that carry text or name a player, and why a block does not apply to them. */
const EXEMPT: [reason: string, paths: string[]][] = [
  [
    'read by the server and answered to the sender alone',
    ['session.connect', 'matchmaker.remove', 'match.list', 'world.list', 'world.create', 'world.resync', 'chat.leave', 'vote.veto', 'POST /api/v1/worlds'],
  ],
  [
    "input to the game's script, which decides what anyone sees; a script that relays a player's words does so with game.chat.send, which honours blocks (proven on match.input)",
    ['world.input', 'rpc.call', 'match.join', 'match.find_or_create', 'world.join', 'world.find_or_create', 'POST /api/v1/rpc/:method'],
  ],
  ["queue properties read by the matchmaker's strategy, never shown to another player", ['matchmaker.add', 'POST /api/v1/matchmaker']],
  ["a choice among the script's own options; others learn counts, not words", ['vote.cast']],
  [
    "the caller's own credentials, receipts and data, shown to nobody by this route",
    [
      'POST /api/v1/auth/register', 'POST /api/v1/auth/login', 'POST /api/v1/auth/refresh', 'POST /api/v1/auth/logout', 'POST /api/v1/auth/guest',
      'POST /api/v1/auth/guest/upgrade', 'POST /api/v1/auth/oauth', 'POST /api/v1/auth/link', 'POST /api/v1/players/me/erase',
      'POST /api/v1/iap/apple', 'POST /api/v1/iap/google', 'PUT /api/v1/saves/:slot', 'PUT /api/v1/storage/:collection/:key',
    ],
  ],
  [
    'public to every player alike (a profile, a group), addressed to nobody: a block cannot hide it from one player without hiding the player or the group',
    ['PUT /api/v1/players/:id', 'POST /api/v1/groups', 'PUT /api/v1/groups/:id'],
  ],
  [
    "a group officer acting on a member or on that player's own request; the group, not the pair, holds the relation",
    [
      'PUT /api/v1/groups/:id/members/:player_id/role', 'DELETE /api/v1/groups/:id/members/:player_id',
      'POST /api/v1/groups/:id/requests/:player_id/accept', 'DELETE /api/v1/groups/:id/requests/:player_id',
    ],
  ],
  [
    'ends or answers a relation: a block already replaced any request or friendship between the pair, and lifting it is the blocker\'s own act',
    ['PUT /api/v1/friends/:friend_id', 'DELETE /api/v1/friends/:friend_id'],
  ],
  ["reads what the caller may already see (the pair's own history, a public board)", ['GET /api/v1/dm/:player_id/history', 'GET /api/v1/leaderboards/:id/around/:player_id']],
  ['the operator plane and its console, not a player', ['POST /api/v1/ops/players/:id/erase', 'POST /console/session']],
];

describe('every frame and route that carries text or names a player', () => {
  it('is either proven above to honour a block or exempt with its reason', () => {
    const declared = new Set<string>();
    for (const frame of clientFrames) if (carriesText(frame.payload)) declared.add(frame.type);
    for (const r of allRoutes()) {
      const named = [...(r.path.match(/:[a-z_]+/g) ?? []), ...Object.keys((r.spec.body as z.ZodObject | undefined)?.shape ?? {})];
      if ((r.spec.body && carriesText(r.spec.body)) || named.some((k) => ADDRESSES_PLAYER.test(k))) declared.add(`${r.method} ${r.path}`);
    }
    const exempt = EXEMPT.flatMap(([, paths]) => paths);
    const proven = Object.keys(refusals);
    expect(proven.filter((p) => exempt.includes(p))).toEqual([]);
    // Proven covers what is declared (and may cover more); an exemption names only what is declared.
    expect([...declared].filter((p) => !proven.includes(p) && !exempt.includes(p))).toEqual([]);
    expect(exempt.filter((p) => !declared.has(p))).toEqual([]);
  });

  it('finds the frames it must (the scan itself works)', () => {
    const texty = clientFrames.filter((f) => carriesText(f.payload)).map((f) => f.type);
    expect(texty).toEqual(expect.arrayContaining(['chat.send', 'dm.send', 'match.input', 'presence.update']));
    expect(texty).not.toContain('session.heartbeat');
  });
});
