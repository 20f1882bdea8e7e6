// `npm run bench -- worlds [--seconds 10] [--players 500] [--broadcast 1] [--npcs 20]`: one world
// of 100 zones (10 × 10) at a 50 ms tick, 2,000 scripted entities (20 per
// zone, each moving every tick) and 500 connected players each moving every
// tick. Reports the world tick's time on its script lane (p50/p99/max, the
// target is p99 < 20 ms), skipped ticks, whether every player received a
// `world.tick` on every broadcast tick, and the outbound bytes per player
// per second against a naive broadcast of every zone's deltas to every
// player (computed in the same run from the deltas the world made). Target
// and load generator are separate processes.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { forkChild } from './_children';
import { numberOption } from './_options';
import { progress, table } from './_report';

const seconds = numberOption('seconds', 10);
const players = numberOption('players', 500);
const broadcastInterval = numberOption('broadcast', 1);
/** Scripted entities per zone (100 zones). */
const npcs = numberOption('npcs', 20);
const TICK_MS = 50;
const BUDGET_MS = 20;

const SCRIPT = `
game_type = "world"
match_size = 1
max_players = ${players}
tick_rate = ${TICK_MS}
grid_size = 10
zone_size = 100
view_radius = 1
broadcast_interval = ${broadcastInterval}
lazy_zones = false

local EDGE = 999
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

const dir = mkdtempSync(path.join(tmpdir(), 'svc-bench-worlds-'));
writeFileSync(path.join(dir, 'config.lua'), 'return { bench = "bench.lua" }');
writeFileSync(path.join(dir, 'bench.lua'), SCRIPT);

const target = await forkChild('_ws-target.ts', ['svc', JSON.stringify({ gameDir: dir, settings: { world_max_per_player: 1000 } })]);
const load = await forkChild('_ws-load.ts').catch(async (err) => {
  await target.stop();
  throw err;
});
try {
  progress(`worlds: ${players} players joining one world of 100 zones with ${npcs * 100} scripted entities`);
  const tokens = (await target.request('provision', { n: players })).tokens;
  await load.request('worlds', { port: target.port, tokens, mode: 'bench', tickMs: TICK_MS }, 600_000);
  // Let the joins' keyframes and the zones' first spawns settle.
  await new Promise((r) => setTimeout(r, 2000));
  await target.request('world-stats');
  await load.request('world-counters');
  const cpu0 = target.cpuMs();
  const loadCpu0 = load.cpuMs();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const stats = (await target.request('world-stats')) as { busy: number[]; late: number[]; skipped: number; deltaBytes: number; worlds: number; split: Record<string, number> };
  const counters = ((await load.request('world-counters')) as { players: { bytes: number; frames: number; ticks: number }[] }).players;
  const cpu = target.cpuMs() - cpu0;
  const loadCpu = load.cpuMs() - loadCpu0;

  const ticksRun = stats.busy.length;
  // Broadcast ticks each player should have seen: one delta from some zone of its ring per broadcast tick.
  const expected = Math.floor(ticksRun / broadcastInterval);
  const coverage = counters.map((c) => (expected > 0 ? Math.min(1, c.ticks / expected) : 0));
  const fullyServed = coverage.filter((c) => c >= 0.99).length;
  const bytesPerPlayer = counters.map((c) => c.bytes / seconds);
  const naivePerPlayer = stats.deltaBytes / seconds;
  const meanBytes = bytesPerPlayer.reduce((a, b) => a + b, 0) / Math.max(1, bytesPerPlayer.length);

  table(
      `One world: 100 zones, ${npcs * 100} scripted entities, ${players} players moving every ${TICK_MS} ms tick, broadcast every ${broadcastInterval} tick(s), ${seconds} s`,
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
        ['naive broadcast of every zone per player per second', Math.round(naivePerPlayer)],
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
  const p99 = quantile(stats.busy, 0.99);
  console.log(`target: p99 world tick < ${BUDGET_MS} ms → ${p99 < BUDGET_MS ? 'met' : 'NOT met'} (${p99.toFixed(2)} ms); every player served every broadcast tick → ${fullyServed === counters.length ? 'met' : 'NOT met'}`);
} finally {
  await load.request('release').catch(() => {});
  await load.stop();
  await target.stop();
  rmSync(dir, { recursive: true, force: true });
}
