// `npm run bench -- bots [matches] [seconds]`: what bots cost. N matches of
// 1 person + 3 bots driven by a bot script, beside N matches of 4 people,
// every match at the fixed 10 Hz tick and every person sending one input per
// tick. Two comparisons, one node each (embedded database, script worker
// pool at its default):
// - people on sockets (the verdict): a separate load generator holds every
//   person's WebSocket, so a person costs the node what a client does (the
//   input frame read and routed, the state frame written); the node's CPU
//   (all threads) per match tick, measured from outside;
// - people injected: their inputs are put where a socket frame's input
//   lands (the pool) and their views go nowhere, so the comparison is
//   script work alone (`think` against `handle_input` of an injected input).
// Reported per run: script `think` calls per second and their p99, tick
// lateness p99 and CPU per match tick; the target is bots costing at most
// 1.5x what people cost.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { LiveHost } from '../host/realtime/live';
import { forkChild, svcImport } from './_children';
import { progress, table } from './_report';

const matches = Number(process.argv[2] ?? 500);
const seconds = Number(process.argv[3] ?? 10);
const TARGET = 1.5;

const ARENA = `function init() return { tick = 0, players = {} } end
function join(id, s) s.players[id] = { x = 0, y = 0, hp = 10 } return s end
function leave(id, s) s.players[id] = nil return s end
function handle_input(id, input, s)
  local p = s.players[id]
  if p and type(input.dx) == "number" then p.x = p.x + input.dx end
  return s
end
function get_state(id, s) return { tick = s.tick, players = s.players } end`;

const dir = mkdtempSync(path.join(tmpdir(), 'svc-bench-bots-'));
mkdirSync(path.join(dir, 'bots'));
writeFileSync(path.join(dir, 'config.lua'), 'return { brawl = "brawl.lua", solo = "solo.lua" }');
// Four people, matched by the matchmaker.
writeFileSync(path.join(dir, 'brawl.lua'), `match_size = 4\n${ARENA}\nfunction tick(s) s.tick = s.tick + 1 return s end`);
// One person; the match adds its three bots on its first tick.
writeFileSync(
  path.join(dir, 'solo.lua'),
  `match_size = 1
max_players = 4
bots = { script = "bots/brawler.lua", min_players = 1 }
${ARENA}
function tick(s)
  if s.tick == 0 then for _, name in ipairs({ "Ada", "Bob", "Cy" }) do game.bots.add(name) end end
  s.tick = s.tick + 1
  return s
end`,
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

/** One run with every person on a socket held by a separate load generator. */
async function overSockets(withBots: boolean): Promise<Row> {
  const settings = { matchmaker_tick_ms: 100, matchmaker_bot_fill_ms: 3_600_000 };
  const target = await forkChild('_ws-target.ts', ['svc', JSON.stringify({ settings, gameDir: dir })]);
  const load = await forkChild('_ws-load.ts').catch(async (err) => {
    await target.stop();
    throw err;
  });
  try {
    const persons = withBots ? matches : 4 * matches;
    progress(`${withBots ? '1 person + 3 bots' : '4 people'} on sockets: matching ${persons} people`);
    const tokens = (await target.request('provision', { n: persons })).tokens;
    await load.request('matches', { port: target.port, tokens, mode: withBots ? 'solo' : 'brawl', inputEvery: 1 }, 600_000);
    await new Promise((r) => setTimeout(r, 2000));
    await target.request('lateness-reset');
    await target.request('thinks-reset');
    const cpu0 = target.cpuMs();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const cpu1 = target.cpuMs();
    const late = await target.request('lateness');
    const thinks = await target.request('thinks');
    await load.request('release');
    return row(withBots, 'sockets', persons, thinks, late, (cpu1 - cpu0) * 1000);
  } finally {
    await Promise.all([load.stop(), target.stop()]);
  }
}

function row(withBots: boolean, how: string, persons: number, thinks: { calls: number; p99Ms: number }, late: { p99: number; skipped: number; count: number }, cpuUs: number): Row {
  return {
    run: withBots ? `${matches} x (1 person + 3 bots), ${how}` : `${matches} x 4 people, ${how}`,
    thinksPerSecond: Math.round(thinks.calls / seconds),
    thinkP99: thinks.p99Ms,
    latenessP99: late.p99,
    skipped: late.skipped,
    cpuPerTickUs: Math.round(cpuUs / Math.max(1, late.count)),
    inputsPerSecond: persons * 10,
  };
}

/** One run in this process with the people's inputs injected where a socket frame's input lands. */
async function injected(withBots: boolean): Promise<Row> {
  const { settings } = parseSettings({ match_max: 100_000, log_level: 'error', matchmaker_bot_fill_ms: 3_600_000 });
  const database = await openEmbedded({});
  const running = await createHost({ settings, database, log: silentLogger, gameDir: dir });
  await running.ready;
  const live = running.ctx.live as LiveHost;
  const host = live.matches;
  const people: { matchId: string; playerId: string }[] = [];
  progress(`${withBots ? '1 person + 3 bots' : '4 people'}: starting ${matches} matches`);
  for (let i = 0; i < matches; i++) {
    const match = await host.create(withBots ? 'solo' : 'brawl');
    for (let p = 0; p < (withBots ? 1 : 4); p++) {
      const person = running.ctx.ids.uuid();
      await host.joinInto(match, person);
      people.push({ matchId: match.id, playerId: person });
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
  return row(withBots, 'injected', people.length, thinks, late, cpu.user + cpu.system);
}

try {
  const rows: Row[] = [];
  const ratios: [string, number][] = [];
  for (const [how, run] of [['on sockets', overSockets], ['injected', injected]] as const) {
    const bots = await run(true);
    const people = await run(false);
    rows.push(bots, people);
    ratios.push([how, bots.cpuPerTickUs / Math.max(1, people.cpuPerTickUs)]);
  }
  table(
    `bots vs people: ${matches} matches at 10 Hz, one input per person per tick, ${seconds} s each, the node's CPU (all threads)`,
    ['run', 'think calls/s', 'p99 think ms', 'p99 tick lateness ms', 'skipped ticks', 'CPU µs per match tick', 'person inputs/s'],
    rows.map((r) => [r.run, r.thinksPerSecond, r.thinkP99, r.latenessP99, r.skipped, r.cpuPerTickUs, r.inputsPerSecond]),
  );
  console.log('');
  for (const [how, ratio] of ratios) {
    const verdict = how === 'on sockets' ? ` (target <= ${TARGET}x) — ${ratio <= TARGET ? 'met' : 'NOT met'}` : ' (script work alone)';
    console.log(`bots / people ${how}, CPU per match tick: ${ratio.toFixed(2)}x${verdict}`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
