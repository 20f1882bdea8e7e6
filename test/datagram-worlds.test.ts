import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { decodeWorldTick } from '../runtime/worlds/binary-wire';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { registerPlayer, TestSocket, type Frame } from './support/ws-client';
import { DatagramClient, decodePose, OP, type Mint, type PoseFrame } from './support/datagram-client';

/**
 * The datagram plane with a world behind it, black-box over real UDP and real sockets: input
 * sent over the plane reaches the zone's `handle_input` as the socket's `world.input` does, and
 * poses arrive for the zones the player watches and only those, carrying the positions the JSON
 * `world.tick` of the same tick carries (within the scale). A player holds two sockets: one on
 * the text wire to read `world.tick` as JSON, one on the binary wire that opens the plane and
 * whose binary `world.tick` adds bind the slots poses name.
 */

describe('the datagram plane in a world', () => {
  const WORLD = `
game_type = "world"
match_size = 1
max_players = 8
tick_rate = 50
grid_size = 6
zone_size = 100
view_radius = 1
broadcast_interval = 1
empty_grace_ms = 400

function spawn_templates(config) return { npc = { type = "npc" } } end
function init(config) return {} end
function join(player_id, state) return state end
function leave(player_id, state) return state end
function spawn_position(player_id, state) return { x = 50, y = 50 } end
function zone_tick(entities, zone_state)
  zone_state = zone_state or {}
  if not zone_state.spawned then
    zone_state.spawned = true
    -- One walker in the zone beside the player's (watched), one in the far corner (not).
    game.zone.spawn("npc", 150, 50)
    game.zone.spawn("npc", 560, 560)
  end
  for id, e in pairs(entities) do
    if e.type == "npc" then e.x = e.x + 0.25 end
  end
  return entities, zone_state
end
function handle_input(player_id, input, entities)
  local me = entities[player_id]
  if input.teleport then me.x = input.teleport[1]; me.y = input.teleport[2] end
  return entities
end
function handle_effects(effects, entities) return entities end
`;

  const SCALE = 10;
  let s: TestServer;
  let game: ReturnType<typeof gameDir>;

  beforeAll(async () => {
    game = gameDir({ 'config.lua': 'return { walkers = "walkers.lua" }', 'walkers.lua': WORLD });
    s = await startTestServer(
      { datagrams: { port: 0, host: '127.0.0.1', endpoint: '127.0.0.1', pose_fields: [{ name: 'x', scale: SCALE }, { name: 'y', scale: SCALE }] } },
      { gameDir: game.dir },
    );
  });
  afterAll(async () => {
    await s.close();
    game.remove();
  });

  /** A binary-wire socket kept raw: binary frames are world.tick, decoded into per-zone slot tables. */
  async function binarySocket(token: string) {
    const ws = new WebSocket(`ws://127.0.0.1:${s.port}/ws`);
    await new Promise((r, j) => (ws.once('open', r), ws.once('error', j)));
    const slots = new Map<string, Map<number, string>>();
    const replies = new Map<string, (f: Frame) => void>();
    ws.on('message', (data, isBinary) => {
      if (isBinary) {
        const frame = decodeWorldTick(new Uint8Array(data as Buffer));
        if (!frame) return;
        const key = frame.zone.join(':');
        const table = slots.get(key) ?? new Map<number, string>();
        slots.set(key, table);
        if (frame.kf) table.clear();
        for (const r of frame.records) if (r.op === 'add') table.set(r.slot, r.id);
        return;
      }
      const f = JSON.parse(String(data)) as Frame;
      if (typeof f.cid === 'string') replies.get(f.cid)?.(f);
    });
    let cid = 0;
    const request = (type: string, payload: unknown) =>
      new Promise<Frame>((resolve) => {
        const c = `b${++cid}`;
        replies.set(c, resolve);
        ws.send(JSON.stringify({ type, cid: c, payload }));
      });
    expect((await request('session.connect', { token, wire: 'binary' })).payload.wire).toBe('binary');
    return { ws, slots, request };
  }

  async function player() {
    const reg = await registerPlayer(s, 'dgw');
    const text = await TestSocket.open(s);
    await text.request('session.connect', { token: reg.token });
    const binary = await binarySocket(reg.token);
    const joined = await text.request('world.create', { mode: 'walkers' });
    expect(joined.type).toBe('world.joined');
    const mint = (await binary.request('rpc.call', { protocol: 1, method: 'asobi.datagram.open', params: {} })).payload.result as Mint;
    const client = await DatagramClient.open(mint);
    await client.bind();
    return { ...reg, text, binary, client };
  }

  async function nextPose(client: DatagramClient, match: (p: PoseFrame) => boolean, timeoutMs = 3000): Promise<PoseFrame> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const d = await client.next(OP.pose, Math.max(1, end - Date.now()));
      const p = decodePose(d.body, client.mint.fields.length);
      if (p && match(p)) return p;
    }
  }

  it("carries input over the plane to the zone's handle_input, as the socket's world.input", async () => {
    const p = await player();
    await p.client.send(OP.input, Buffer.from(JSON.stringify({ teleport: [77, 33] })));
    const moved = await p.text.next((f) => f.type === 'world.tick' && f.payload.updates.some((u: any) => u.id === p.playerId && u.x === 77 && u.y === 33));
    expect(moved.payload.zone).toEqual([0, 0]);
    // The {input, seq} form is acknowledged like the socket frame's seq.
    await p.client.send(OP.input, Buffer.from(JSON.stringify({ input: { teleport: [60, 30] }, seq: 5 })));
    const ack = await p.text.next('world.ack');
    expect(ack.payload.seq).toBe(5);
    p.client.close();
    p.binary.ws.close();
    p.text.close();
  });

  it('sends poses for the zones in view and only those, with the positions of the JSON world.tick of the same tick', async () => {
    const p = await player();
    const ticks = new Map<number, Frame>();
    p.text.ws.on('message', (data) => {
      const f = JSON.parse(String(data)) as Frame;
      if (f.type === 'world.tick' && Array.isArray(f.payload.zone) && f.payload.zone.join(':') === '1:0') ticks.set(f.payload.tick, f);
    });
    const pose = await nextPose(p.client, (f) => f.zone[0] === 1 && f.zone[1] === 0 && f.records.length > 0);
    const slots = p.binary.slots.get('1:0')!;
    const json = await (async () => {
      for (let i = 0; i < 100 && !ticks.has(pose.tick); i++) await new Promise((r) => setTimeout(r, 10));
      return ticks.get(pose.tick)!;
    })();
    expect(json).toBeDefined();
    for (const r of pose.records) {
      const id = slots.get(r.slot)!;
      const u = json.payload.updates.find((x: any) => x.id === id);
      expect(u).toBeDefined();
      expect(Math.abs(r.values[0]! / SCALE - u.x)).toBeLessThanOrEqual(0.5 / SCALE + 1e-9); // half a step, and float noise
    }
    // The far corner's walker moves every tick, and its zone is out of view: none of its poses come.
    const seen = new Set<string>();
    const until = Date.now() + 500;
    while (Date.now() < until) {
      const d = await p.client.next(OP.pose, 600).catch(() => null);
      if (!d) break;
      const f = decodePose(d.body, 2);
      if (f) seen.add(f.zone.join(':'));
    }
    for (const zone of seen) expect(['0:0', '1:0', '0:1', '1:1']).toContain(zone);
    expect(seen.has('5:5')).toBe(false);
    p.client.close();
    p.binary.ws.close();
    p.text.close();
  });
});
