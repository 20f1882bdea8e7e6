// `npm run bench -- worlds [--seconds 10] [--players 500] [--broadcast 1] [--npcs 20] [--grid 10] [--binary 0.5] [--lanes N] [--datagrams [--datagram-share 1]]`:
// one world of grid × grid zones (10 × 10 by default) at a 50 ms tick, `npcs`
// scripted entities per zone (each moving every tick) and `players` connected
// players each moving every tick, a `binary` share of them on the binary wire.
// Reports the world tick's time on its script lane (p50/p99/max), skipped
// ticks, whether every player received a `world.tick` on every broadcast
// tick, the outbound bytes per player per second on each wire against a naive
// broadcast of every zone's deltas to every player (computed in the same run
// from the deltas the world made), and one tick split by part (Lua, undo,
// diff, encode, crossings, the main thread's writes). Target and load
// generator are separate processes; the load generator runs at low priority.
// With `--datagrams` the node runs the datagram plane (issue 36) and a
// `datagram-share` of the binary players bind it, each from a UDP socket of its
// own: the bytes it brings them against both WebSocket wires, and the plane's
// CPU per pose datagram per subscriber, timed in the target and checked against
// a second window after every binding said bye (see planeTable). With
// `--lanes N` the node runs N script workers and the world's zones spread over
// all of them (`match_workers` and `world_lanes` N); the run prints each lane's
// work per tick, so the tick time on N cores can be read off even where the
// lanes share fewer.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { forkChild } from './_children';
import { numberOption } from './_options';
import { progress, table } from './_report';

const seconds = numberOption('seconds', 10);
const players = numberOption('players', 500);
const broadcastInterval = numberOption('broadcast', 1);
/** Scripted entities per zone. */
const npcs = numberOption('npcs', 20);
/** Zones a side (grid × grid zones). */
const grid = numberOption('grid', 10);
/** Share of the players on the binary wire (the rest on JSON), so both wires' bytes come from the same run. */
const binaryShare = numberOption('binary', 0.5);
const binaryFrom = Math.round(players * (1 - binaryShare));
const datagrams = process.argv.includes('--datagrams');
/** Script lanes the world spreads over; 0 leaves the node's defaults. */
const lanes = numberOption('lanes', 0);
/** Share of the binary players that also bind the datagram plane (poses go only to binary-wire sockets). */
const datagramShare = numberOption('datagram-share', 1);
const datagramFrom = datagrams ? players - Math.round((players - binaryFrom) * datagramShare) : players;
/** 16 steps a unit keeps the world's 0..999 inside int16 (15,984), so no pose saturates. */
const POSE_SCALE = 16;
const TICK_MS = 50;
/** Issue 35's bars: ticks run per second, the world tick's p99, the lane's host (non-Lua) time per tick, binary bytes against JSON. */
const TICKS_PER_SECOND_MIN = 19.5;
const P99_MS_MAX = 50;
const HOST_MS_MAX = 15;
const BINARY_SHARE_MAX = 1 / 3;

const SCRIPT = `
game_type = "world"
match_size = 1
max_players = ${players}
tick_rate = ${TICK_MS}
grid_size = ${grid}
zone_size = 100
view_radius = 1
broadcast_interval = ${broadcastInterval}
lazy_zones = false

local EDGE = ${grid * 100 - 1}
function spawn_templates(config) return { npc = { type = "npc" } } end
function init(config) return {} end
function join(player_id, state) return state end
function leave(player_id, state) return state end
function spawn_position(player_id, state) return { x = math.random(0, EDGE), y = math.random(0, EDGE) } end
function post_tick(tick, state) return state end
function zone_tick(entities, zone_state)
  zone_state = zone_state or {}
  if not zone_state.seeded then
    zone_state.seeded = true
    for i = 1, ${npcs} do game.zone.spawn("npc", math.random(0, EDGE), math.random(0, EDGE)) end
  end
  for id, e in pairs(entities) do
    if e.type == "npc" then
      e.x = math.max(0, math.min(EDGE, e.x + math.random(-1, 1)))
      e.y = math.max(0, math.min(EDGE, e.y + math.random(-1, 1)))
    end
  end
  return entities, zone_state
end
function handle_input(player_id, input, entities)
  local me = entities[player_id]
  if me then
    me.x = math.max(0, math.min(EDGE, me.x + (input.dx or 0) * 3))
    me.y = math.max(0, math.min(EDGE, me.y + (input.dy or 0) * 3))
  end
  return entities
end
function handle_effects(effects, entities) return entities end
`;

function quantile(values: number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

interface PlayerCounters {
  bytes: number;
  frames: number;
  ticks: number;
  planeBytes: number;
  poses: number;
  records: number;
}

interface PlaneStats {
  written: number;
  /** The fan-out timed in the target, deferred kernel sends included (bench/_ws-target.ts). */
  sendMs: number;
  /** Of it, inside sendPoses. */
  jsMs: number;
  bindings: number;
}

/**
 * The plane against the WebSocket wires of the same window, and its CPU per pose datagram per
 * subscriber, two ways. Timed in the target: the fan-out (sendPoses and the kernel sends Node
 * defers to the tick queue) on the main thread, over the datagrams it wrote; cheap and in the
 * same window, but it leaves out the sends' completion callbacks. And as a cross-check, the
 * target's whole CPU against a second window of the same length after every plane connection
 * said bye: both run the same world, players and inputs, and the lane encodes the zones' poses
 * in both (it does whenever the plane is on and a binary player is in the world), so the
 * difference is the fan-out with everything it costs. It only holds while the world keeps its
 * clock: a world behind it skips a different number of ticks in each window, and the
 * difference is then mostly that.
 */
async function planeTable(counters: PlayerCounters[], plane: PlaneStats, cpuOn: number, ticksOn: number, wires: { json: number; binary: number }): Promise<void> {
  const bound = plane.bindings;
  await load.request('datagram-bye');
  await new Promise((r) => setTimeout(r, 1000));
  await target.request('world-stats');
  await target.request('datagram-stats');
  await load.request('world-counters');
  const cpu0 = target.cpuMs();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const cpuOff = target.cpuMs() - cpu0;
  const ticksOff = ((await target.request('world-stats')) as { busy: number[] }).busy.length;
  const after = (await target.request('datagram-stats')) as PlaneStats;
  const stray = ((await load.request('world-counters')) as { players: PlayerCounters[] }).players.reduce((a, p) => a + p.poses, 0);

  const mine = counters.slice(datagramFrom);
  const sum = (f: (p: PlayerCounters) => number) => mine.reduce((a, p) => a + f(p), 0);
  const perPlayer = (f: (p: PlayerCounters) => number) => sum(f) / Math.max(1, mine.length) / seconds;
  const planeBytes = perPlayer((p) => p.planeBytes);
  const received = sum((p) => p.poses);
  const served = mine.filter((p) => p.poses > 0).length;
  const wsOfThem = perPlayer((p) => p.bytes);
  const ratio = (a: number, b: number) => (a > 0 && b > 0 ? (a / b).toFixed(3) : '-');
  const usPerPose = plane.written > 0 ? ((cpuOn - cpuOff) * 1000) / plane.written : 0;
  // A world behind its clock skips ticks, unevenly between the windows: most of the target's CPU goes by ticks run.
  const usPerPoseScaled = plane.written > 0 && ticksOff > 0 ? ((cpuOn - (cpuOff * ticksOn) / ticksOff) * 1000) / plane.written : 0;
  table(
    `The datagram plane: ${mine.length} of the ${players - binaryFrom} binary players bound (pose fields x, y at scale ${POSE_SCALE}), ${seconds} s. ` +
      `Bytes are payloads (UDP datagrams, WebSocket messages; no IP, UDP, TCP or WebSocket headers). ` +
      `The plane's CPU per pose datagram per subscriber: the fan-out timed on the target's main thread (sendPoses and the kernel sends Node defers, not their completion callbacks), over the datagrams it wrote; ` +
      `cross-check: target CPU in the window above minus a second ${seconds} s window after every binding said bye (the lane's pose encode runs in both), valid only when both windows run the same ticks`,
    ['measure', 'value'],
    [
      ['plane bindings in the window', bound],
      ['datagram players receiving poses', `${served} / ${mine.length}`],
      ['pose datagrams per datagram player per second (mean)', perPlayer((p) => p.poses).toFixed(1)],
      ['pose records per datagram player per second (mean)', Math.round(perPlayer((p) => p.records))],
      ['bytes per pose datagram (mean)', received > 0 ? Math.round(sum((p) => p.planeBytes) / received) : '-'],
      ['bytes per player per second, plane (datagram players)', Math.round(planeBytes)],
      [`bytes per player per second, JSON wire (${binaryFrom} players)`, Math.round(wires.json)],
      [`bytes per player per second, binary wire (${players - binaryFrom} players)`, Math.round(wires.binary)],
      ['bytes per player per second, binary wire of the datagram players alone', Math.round(wsOfThem)],
      ['plane / JSON wire', ratio(planeBytes, wires.json)],
      ['plane / binary wire', ratio(planeBytes, wires.binary)],
      ['pose datagrams written by the plane', plane.written],
      ['pose datagrams received (share of those written)', `${received} (${plane.written > 0 ? ((received / plane.written) * 100).toFixed(2) : '-'} %)`],
      [`target CPU with the plane sending / after bye (% of one core)`, `${((cpuOn / (seconds * 1000)) * 100).toFixed(0)} / ${((cpuOff / (seconds * 1000)) * 100).toFixed(0)}`],
      ['world ticks run with the plane sending / after bye', `${ticksOn} / ${ticksOff}`],
      ['pose datagrams written / received after bye (should be 0)', `${after.written} / ${stray}`],
      ['plane CPU per pose datagram per subscriber, timed (µs)', plane.written > 0 ? ((plane.sendMs * 1000) / plane.written).toFixed(2) : '-'],
      ['of which inside sendPoses, before the kernel sends (µs)', plane.written > 0 ? ((plane.jsMs * 1000) / plane.written).toFixed(2) : '-'],
      ['main thread time in the fan-out (% of one core)', ((plane.sendMs / (seconds * 1000)) * 100).toFixed(1)],
      ['cross-check: target CPU with the plane sending minus after bye, per pose datagram (µs)', usPerPose.toFixed(2)],
      ['cross-check, the after-bye window scaled to the ticks run with the plane sending (µs)', usPerPoseScaled.toFixed(2)],
    ],
  );
}

const dir = mkdtempSync(path.join(tmpdir(), 'svc-bench-worlds-'));
writeFileSync(path.join(dir, 'config.lua'), 'return { bench = "bench.lua" }');
writeFileSync(path.join(dir, 'bench.lua'), SCRIPT);

const planeSettings = {
  datagrams: { port: 0, host: '127.0.0.1', endpoint: '127.0.0.1', pose_fields: [{ name: 'x', scale: POSE_SCALE }, { name: 'y', scale: POSE_SCALE }] },
};
const target = await forkChild('_ws-target.ts', ['svc', JSON.stringify({ gameDir: dir, settings: { world_max_per_player: 1000, ...(datagrams ? planeSettings : {}), ...(lanes > 0 ? { match_workers: lanes, world_lanes: lanes } : {}) } })]);
const load = await forkChild('_ws-load.ts', [], { lowPriority: true }).catch(async (err) => {
  await target.stop();
  throw err;
});
try {
  progress(`worlds: ${players} players joining one world of ${grid * grid} zones with ${npcs * grid * grid} scripted entities`);
  const tokens = (await target.request('provision', { n: players })).tokens;
  await load.request('worlds', { port: target.port, tokens, mode: 'bench', tickMs: TICK_MS, binaryFrom, datagramFrom }, 600_000);
  // Let the joins' keyframes and the zones' first spawns settle.
  await new Promise((r) => setTimeout(r, 2000));
  await target.request('world-stats');
  await load.request('world-counters');
  if (datagrams) await target.request('datagram-stats');
  const cpu0 = target.cpuMs();
  const loadCpu0 = load.cpuMs();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const stats = (await target.request('world-stats')) as { busy: number[]; late: number[]; skipped: number; deltaBytes: number; worlds: number; split: Record<string, number>; lanes: number[] };
  const counters = ((await load.request('world-counters')) as { players: PlayerCounters[] }).players;
  const cpu = target.cpuMs() - cpu0;
  const loadCpu = load.cpuMs() - loadCpu0;
  const plane = datagrams ? ((await target.request('datagram-stats')) as PlaneStats) : null;

  const ticksRun = stats.busy.length;
  // Broadcast ticks each player should have seen: one delta from some zone of its ring per broadcast tick.
  const expected = Math.floor(ticksRun / broadcastInterval);
  const coverage = counters.map((c) => (expected > 0 ? Math.min(1, c.ticks / expected) : 0));
  const fullyServed = coverage.filter((c) => c >= 0.99).length;
  const bytesPerPlayer = counters.map((c) => c.bytes / seconds);
  const naivePerPlayer = stats.deltaBytes / seconds;
  const meanBytes = bytesPerPlayer.reduce((a, b) => a + b, 0) / Math.max(1, bytesPerPlayer.length);
  const meanOf = (list: number[]) => list.reduce((a, b) => a + b, 0) / Math.max(1, list.length);
  const jsonBytes = meanOf(bytesPerPlayer.slice(0, binaryFrom));
  const binaryBytes = meanOf(bytesPerPlayer.slice(binaryFrom));

  table(
      `One world: ${grid * grid} zones, ${npcs * grid * grid} scripted entities, ${players} players moving every ${TICK_MS} ms tick, broadcast every ${broadcastInterval} tick(s), ${seconds} s`,
      ['measure', 'value'],
      [
        ['world ticks run (of ' + Math.round((seconds * 1000) / TICK_MS) + ' due)', ticksRun],
        ['ticks skipped', stats.skipped],
        ['world tick time p50 (ms)', quantile(stats.busy, 0.5).toFixed(2)],
        ['world tick time p99 (ms)', quantile(stats.busy, 0.99).toFixed(2)],
        ['world tick time max (ms)', Math.max(0, ...stats.busy).toFixed(2)],
        ['tick lateness p99 (ms)', quantile(stats.late, 0.99).toFixed(1)],
        [`players served every broadcast tick (≥ 99%)`, `${fullyServed} / ${counters.length}`],
        ['lowest share of broadcast ticks seen by a player', (Math.min(1, ...coverage) * 100).toFixed(1) + ' %'],
        ['world.tick frames per player per second (mean)', (counters.reduce((a, c) => a + c.frames, 0) / Math.max(1, counters.length) / seconds).toFixed(1)],
        ['outbound bytes per player per second (mean)', Math.round(meanBytes)],
        ['outbound bytes per player per second (p99)', Math.round(quantile(bytesPerPlayer, 0.99))],
        [`bytes per player per second, JSON wire (${binaryFrom} players)`, Math.round(jsonBytes)],
        [`bytes per player per second, binary wire (${players - binaryFrom} players)`, Math.round(binaryBytes)],
        ['binary / JSON', jsonBytes > 0 && binaryBytes > 0 ? (binaryBytes / jsonBytes).toFixed(3) : '-'],
        ['naive broadcast of every zone per player per second (JSON)', Math.round(naivePerPlayer)],
        ['interest-managed / naive', (meanBytes / Math.max(1, naivePerPlayer)).toFixed(3)],
        ['target CPU (% of one core)', ((cpu / (seconds * 1000)) * 100).toFixed(0)],
        ['load generator CPU (% of one core)', ((loadCpu / (seconds * 1000)) * 100).toFixed(0)],
      ],
  );
  // Where a tick's time went: lane parts per tick run, and the main thread writing the frames each tick made.
  const perTick = (ms: number) => (ticksRun > 0 ? ms / ticksRun : 0).toFixed(2);
  const split = stats.split;
  const lanePart = (split.lua ?? 0) + (split.undo ?? 0) + (split.diff ?? 0) + (split.encode ?? 0) + (split.crossing ?? 0) + (split.world ?? 0);
  const host = lanePart - (split.lua ?? 0);
  table(
      'One tick, by part (ms per tick run, mean)',
      ['part', 'ms'],
      [
        ['Lua: zone scripts (zone_tick, handle_input, handle_effects)', perTick(split.lua ?? 0)],
        ['undo of refused inputs', perTick(split.undo ?? 0)],
        ['diff against what each zone last sent', perTick(split.diff ?? 0)],
        ['encode of the deltas', perTick(split.encode ?? 0)],
        ['crossings, spawns, despawns', perTick(split.crossing ?? 0)],
        ['world VM (post_tick, phases)', perTick(split.world ?? 0)],
        ['host (non-Lua) work on the lane', perTick(host)],
        ['rest of the lane tick (bookkeeping, output hand-off)', perTick(stats.busy.reduce((a, b) => a + b, 0) - lanePart)],
        ['main thread: writing the tick\'s frames to sockets', perTick(split.writes ?? 0)],
      ],
  );
  // Each lane's work per tick: with a lane per core, the slowest lane (plus the rounds between them) bounds the tick.
  table(
    `Work per lane (ms per tick run, mean): ${stats.lanes.length} lane(s); the home lane runs its stripe's zones, the world VM, crossings and the encode of every zone`,
    ['lane', 'ms per tick', 'share of a 50 ms tick'],
    stats.lanes.map((ms, s) => [s === 0 ? 'home (stripe 0)' : `stripe ${s}`, perTick(ms), ((ms / Math.max(1, ticksRun) / TICK_MS) * 100).toFixed(0) + ' %']),
  );
  const p99 = quantile(stats.busy, 0.99);
  const perSecond = ticksRun / seconds;
  const hostPerTick = ticksRun > 0 ? host / ticksRun : 0;
  const verdict = (ok: boolean) => (ok ? 'met' : 'NOT met');
  console.log(
    `targets: ticks per second ≥ ${TICKS_PER_SECOND_MIN} → ${verdict(perSecond >= TICKS_PER_SECOND_MIN)} (${perSecond.toFixed(1)}); ` +
      `p99 world tick < ${P99_MS_MAX} ms → ${verdict(p99 < P99_MS_MAX)} (${p99.toFixed(1)} ms); ` +
      `host time per tick ≤ ${HOST_MS_MAX} ms → ${verdict(hostPerTick <= HOST_MS_MAX)} (${hostPerTick.toFixed(1)} ms); ` +
      (jsonBytes > 0 && binaryBytes > 0 ? `binary ≤ 1/3 of JSON → ${verdict(binaryBytes / jsonBytes <= BINARY_SHARE_MAX)} (${(binaryBytes / jsonBytes).toFixed(3)}); ` : '') +
      `every player served every broadcast tick → ${verdict(fullyServed === counters.length)}`,
  );
  if (plane) await planeTable(counters, plane, cpu, ticksRun, { json: jsonBytes, binary: binaryBytes });
} finally {
  await load.request('release').catch(() => {});
  await load.stop();
  await target.stop();
  rmSync(dir, { recursive: true, force: true });
}
