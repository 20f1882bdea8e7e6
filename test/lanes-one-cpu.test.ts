import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canPin, freePort, start, svcRoot, type Child as HostProcess } from '../bench/_children';
import { migratedDataDir } from './support/database';
import { gameDir, matchScript } from './support/game-dir';
import { TestSocket } from './support/ws-client';
import type { TestServer } from './support/server';

// The production entry pinned to one CPU (`taskset -c 0`, as a 1-vCPU
// container would see it) with the default placement (decision 0058): the
// scripts still get a worker of their own, so the database bindings are
// there, and a hostile match is stopped while the node and another match
// carry on.
const MODE = 'match_size = 1\nquick_play = true';
const game = gameDir({
  'config.lua': 'return { calm = "calm.lua", tick_loop = "tick_loop.lua" }',
  'calm.lua': matchScript(MODE),
  'tick_loop.lua': matchScript(MODE, 'function tick(state) while true do end end'),
});

describe.skipIf(!canPin())('a node that may use one CPU', () => {
  let h: HostProcess;
  beforeAll(async () => {
    const port = await freePort();
    const { DATABASE_URL: _inherited, ...base } = process.env;
    h = start({
      name: 'host on one CPU',
      args: [path.join(svcRoot, 'dist/host.mjs')],
      cwd: svcRoot,
      env: {
        ...base,
        PORT: String(port),
        HOST: '127.0.0.1',
        GAME_DIR: game.dir,
        SVC_DATA_DIR: migratedDataDir('svc-one-cpu-'),
      },
      port,
      cpus: '0',
    });
    await h.ready(90_000);
  }, 120_000);
  afterAll(async () => {
    await h?.stop();
    game.remove();
  });

  async function player(): Promise<TestSocket> {
    const username = `c_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 6)}`;
    const res = await fetch(`${h.url}/api/v1/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username, password: 'correct-horse-battery' }),
    });
    const body = (await res.json()) as { access_token: string };
    const socket = await TestSocket.open({ port: h.port } as TestServer);
    expect((await socket.request('session.connect', { token: body.access_token })).type).toBe('session.connected');
    return socket;
  }

  it('keeps the awaited bindings: the scripts run on a worker', () => {
    expect(h.events.get('script_bindings_unavailable') ?? 0).toBe(0);
  });

  it('stops a match whose tick never returns; health and the other match carry on', async () => {
    const calm = await player();
    expect((await calm.request('match.find_or_create', { mode: 'calm' })).type).toBe('match.joined');
    await calm.next('match.state', 10_000);
    const hostile = await player();
    expect((await hostile.request('match.find_or_create', { mode: 'tick_loop' })).type).toBe('match.joined');
    const finished = hostile.next('match.finished', 60_000);
    let states = 0;
    let healthy = 0;
    let done = false;
    void finished.finally(() => (done = true));
    while (!done) {
      const res = await fetch(`${h.url}/api/v1/health`, { signal: AbortSignal.timeout(2000) });
      expect(res.status).toBe(200);
      healthy++;
      await calm.next('match.state', 1000).then(() => states++, () => {});
    }
    expect((await finished).payload.result).toMatchObject({ status: 'error', reason: 'script_budget' });
    expect(healthy).toBeGreaterThan(0);
    expect(states).toBeGreaterThan(0);
    calm.close();
    hostile.close();
  }, 90_000);
});
