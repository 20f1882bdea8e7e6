import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gameDir, matchScript } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer } from './support/ws-client';

// Issue 31: a match whose every tick runs to the largest deadline allowed
// shares one script worker with an ordinary match. The deadline bounds each
// of its calls; its share of the worker is what must be bounded too.
const MODE = 'match_size = 1\nquick_play = true';
const game = gameDir({
  'config.lua': 'return { calm = "calm.lua", heavy = "heavy.lua" }',
  'calm.lua': matchScript(MODE),
  'heavy.lua': matchScript(MODE, 'function tick(state) while true do end end'),
});

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer(
    {
      lua_time_budget_ms: { init_tick: 500, other: 200 },
      // The deadline, not the instruction count, is what stops the heavy tick.
      lua_instruction_budget: { init_tick: 2_000_000_000, other: 200_000 },
      match_failing_ticks_max: 100_000,
      match_workers: 1,
      metrics_port: 0,
    },
    { gameDir: game.dir },
  );
});
afterAll(async () => {
  await s?.close();
  game.remove();
});

async function throttledTicks(mode: string): Promise<number> {
  const text = await (await fetch(s.metricsUrl!)).text();
  const line = text.split('\n').find((l) => l.startsWith(`svc_match_ticks_throttled_total{mode="${mode}"} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

describe('matches over their share of the worker', () => {
  it.each([1, 3])('%i of them pay with their own ticks, counted and logged; their neighbour keeps its cadence', async (count) => {
    const calm = await connectPlayer(s, 'calm');
    expect((await calm.socket.request('match.find_or_create', { mode: 'calm' })).type).toBe('match.joined');
    await calm.socket.next('match.state', 10_000);
    const throttledBefore = await throttledTicks('heavy');
    const logsBefore = s.logs.length;
    const heavy = [];
    const heavyIds = new Set<string>();
    for (let i = 0; i < count; i++) {
      const p = await connectPlayer(s, 'heavy');
      const joined = await p.socket.request('match.find_or_create', { mode: 'heavy' });
      expect(joined.type).toBe('match.joined');
      heavyIds.add(joined.payload.match_id as string);
      heavy.push(p);
    }
    // Each one's first two ticks run to the deadline before it is held to anything (a failed tick still sends its state).
    for (const p of heavy) for (let i = 0; i < 2; i++) await p.socket.next('match.state', 10_000);

    calm.socket.frames.length = 0;
    const started = Date.now();
    let states = 0;
    while (Date.now() - started < 5000) await calm.socket.next('match.state', 1000).then(() => states++, () => {});
    const expected = ((Date.now() - started) / 1000) * 10;
    // Generous on a shared machine; without a share per match one heavy match left it about a fifth.
    expect(states).toBeGreaterThanOrEqual(expected * 0.8);

    expect(await throttledTicks('heavy')).toBeGreaterThan(throttledBefore);
    expect(await throttledTicks('calm')).toBe(0);
    const logged = s.logs.slice(logsBefore).filter((l) => l.event === 'match_ticks_throttled');
    expect(logged.length).toBeGreaterThan(0);
    for (const l of logged) {
      expect(heavyIds.has(l.match_id as string)).toBe(true);
      expect(l).toMatchObject({ mode: 'heavy' });
    }
    calm.socket.close();
    for (const p of heavy) p.socket.close();
  });
});
