// `npm run bench -- bots [matches] [seconds]`: what bots cost. Two runs of
// one node (embedded database, script worker pool at its default): N
// matches of 1 person + 3 bots driven by a bot script, then N matches of 4
// people, every match at the fixed 10 Hz tick. The people send one input
// per tick each, injected where a socket frame's input lands (the pool), so
// both runs pay for the same number of inputs and the bots' extra is their
// `think`. Reported per run: script `think` calls per second and their p99,
// tick lateness p99 and the node's CPU (all threads) per match tick; the
// target is bots costing at most 1.5x what people's inputs cost.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { LiveHost } from '../host/realtime/live';
import { svcImport } from './_children';
import { progress, table } from './_report';

const matches = Number(process.argv[2] ?? 500);
const seconds = Number(process.argv[3] ?? 10);
const TARGET = 1.5;

const dir = mkdtempSync(path.join(tmpdir(), 'svc-bench-bots-'));
mkdirSync(path.join(dir, 'bots'));
writeFileSync(path.join(dir, 'config.lua'), 'return { brawl = "brawl.lua" }');
writeFileSync(
  path.join(dir, 'brawl.lua'),
  `match_size = 4
bots = { script = "bots/brawler.lua", min_players = 4 }
function init() return { tick = 0, players = {} } end
function join(id, s) s.players[id] = { x = 0, y = 0, hp = 10 } return s end
function leave(id, s) s.players[id] = nil return s end
function handle_input(id, input, s)
  local p = s.players[id]
  if p and type(input.dx) == "number" then p.x = p.x + input.dx end
  return s
end
function tick(s) s.tick = s.tick + 1 return s end
function get_state(id, s) return { tick = s.tick, players = s.players } end`,
);
writeFileSync(
  path.join(dir, 'bots/brawler.lua'),
  `names = { "Ada", "Bob", "Cy" }
function think(bot_id, state)
  local me = state.players and state.players[bot_id]
  if not me then return nil end
  local best, dist = nil, math.huge
  for id, p in pairs(state.players) do
    if id ~= bot_id then
      local d = math.abs(p.x - me.x) + math.abs(p.y - me.y)
      if d < dist then best, dist = p, d end
    end
  end
  return { dx = best and (best.x > me.x and 1 or -1) or 0 }
end`,
);

const { openEmbedded } = await svcImport<typeof import('../host/infra/database')>('host/infra/database.ts');
const { createHost } = await svcImport<typeof import('../host/host')>('host/host.ts');
const { silentLogger } = await svcImport<typeof import('../runtime/platform/log')>('runtime/platform/log.ts');
const { parseSettings } = await svcImport<typeof import('../runtime/contracts/settings')>('runtime/contracts/settings.ts');

interface Row {
  run: string;
  thinksPerSecond: number;
  thinkP99: number;
  latenessP99: number;
  skipped: number;
  cpuPerTickUs: number;
  inputsPerSecond: number;
}

async function run(withBots: boolean): Promise<Row> {
  const { settings } = parseSettings({ match_max: 100_000, log_level: 'error', matchmaker_bot_fill_ms: 3_600_000 });
  const database = await openEmbedded({});
  const running = await createHost({ settings, database, log: silentLogger, gameDir: dir });
  await running.ready;
  const live = running.ctx.live as LiveHost;
  const host = live.matches;
  const people: { matchId: string; playerId: string }[] = [];
  progress(`${withBots ? '1 person + 3 bots' : '4 people'}: starting ${matches} matches`);
  for (let i = 0; i < matches; i++) {
    const match = await host.create('brawl');
    const human = running.ctx.ids.uuid();
    await host.joinInto(match, human);
    people.push({ matchId: match.id, playerId: human });
    for (let b = 0; b < 3; b++) {
      if (withBots) {
        await host.bots.add(match, ['Ada', 'Bob', 'Cy'][b]!);
      } else {
        const other = running.ctx.ids.uuid();
        await host.joinInto(match, other);
        people.push({ matchId: match.id, playerId: other });
      }
    }
  }
  // Inputs as sockets would deliver them: one per person per tick.
  const pool = (host as unknown as { pool: { input(m: string, p: string, i: object): void } }).pool;
  const feeder = setInterval(() => {
    for (const p of people) pool.input(p.matchId, p.playerId, { dx: 1 });
  }, 100);
  await new Promise((r) => setTimeout(r, 2000));
  host.resetLateness();
  host.bots.resetThinks();
  const cpu0 = process.cpuUsage();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const cpu = process.cpuUsage(cpu0);
  const late = host.lateness();
  const thinks = host.bots.thinkSummary();
  clearInterval(feeder);
  await running.close();
  return {
    run: withBots ? `${matches} x (1 person + 3 bots)` : `${matches} x 4 people`,
    thinksPerSecond: Math.round(thinks.calls / seconds),
    thinkP99: thinks.p99Ms,
    latenessP99: late.p99,
    skipped: late.skipped,
    cpuPerTickUs: Math.round((cpu.user + cpu.system) / Math.max(1, late.count)),
    inputsPerSecond: people.length * 10,
  };
}

try {
  const bots = await run(true);
  const humans = await run(false);
  table(
    `bots vs people: ${matches} matches at 10 Hz, ${seconds} s each, one process (CPU of all its threads)`,
    ['run', 'think calls/s', 'p99 think ms', 'p99 tick lateness ms', 'skipped ticks', 'CPU µs per match tick', 'person inputs/s'],
    [bots, humans].map((r) => [r.run, r.thinksPerSecond, r.thinkP99, r.latenessP99, r.skipped, r.cpuPerTickUs, r.inputsPerSecond]),
  );
  const ratio = bots.cpuPerTickUs / Math.max(1, humans.cpuPerTickUs);
  console.log(`\nbots / people CPU per match tick: ${ratio.toFixed(2)}x (target <= ${TARGET}x) — ${ratio <= TARGET ? 'met' : 'NOT met'}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
