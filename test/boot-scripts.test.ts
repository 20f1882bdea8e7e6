import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHost, type Child as HostProcess } from '../bench/_children';
import { migratedDataDir } from './support/database';
import { gameDir, matchScript } from './support/game-dir';
import { TestSocket, type Frame } from './support/ws-client';
import type { TestServer } from './support/server';

// The production entry (dist/host.mjs, as `npm start` runs it) with game
// directories of its own: what stops the boot, and the wiring of the one
// script VM factory (bindings in match VMs, the operator's budgets in RPC).

function settingsFile(settings: Record<string, unknown>): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'svc-settings-')), 'settings.json');
  writeFileSync(file, JSON.stringify(settings));
  return file;
}

const GRACE_MS = 5000;
const dataDir = () => migratedDataDir('svc-boot-scripts-');

describe('a game directory that cannot serve stops the boot', () => {
  it('a broken rpc.lua: exit 2, one line naming the file', async () => {
    const game = gameDir({ 'match.lua': matchScript('match_size = 1'), 'rpc.lua': 'rpc = {}\nfunction rpc.roll(\n' });
    try {
      const h = await startHost({ GAME_DIR: game.dir, SVC_DATA_DIR: dataDir() });
      expect(await h.exited).toBe(2);
      const lines = h.stderr().trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^svc: rpc\.lua: script_load_failed: /);
    } finally {
      game.remove();
    }
  }, 60_000);

  it('an rpc.lua whose body fails at load: exit 2', async () => {
    const game = gameDir({ 'match.lua': matchScript('match_size = 1'), 'rpc.lua': 'error("no config")' });
    try {
      const h = await startHost({ GAME_DIR: game.dir, SVC_DATA_DIR: dataDir() });
      expect(await h.exited).toBe(2);
      expect(h.stderr()).toContain('rpc.lua');
      expect(h.stderr()).toContain('no config');
    } finally {
      game.remove();
    }
  }, 60_000);

  it('a directory with no modes: exit 2 naming it and the setting; allow_empty_game boots it', async () => {
    const game = gameDir({ 'README.txt': 'nothing here yet' });
    try {
      const refused = await startHost({ GAME_DIR: game.dir, SVC_DATA_DIR: dataDir() });
      expect(await refused.exited).toBe(2);
      const line = refused.stderr().trim();
      expect(line).toMatch(/^svc: game directory .* declares no modes/);
      expect(line).toContain('allow_empty_game');
      const allowed = await startHost({ GAME_DIR: game.dir, SVC_DATA_DIR: dataDir(), SVC_CONFIG: settingsFile({ allow_empty_game: true }) });
      try {
        await allowed.ready(90_000);
      } finally {
        await allowed.stop();
      }
    } finally {
      game.remove();
    }
  }, 150_000);
});

describe('the production wiring of game scripts', () => {
  const game = gameDir({
    'config.lua': 'return { welcome = "welcome.lua", hostile = "hostile.lua" }',
    'welcome.lua': matchScript(
      'match_size = 1\nquick_play = true',
      'function join(player_id, state) game.notify(player_id, "welcome", "Welcome to " .. state.match_id) return state end',
    ),
    'hostile.lua': matchScript('match_size = 1\nquick_play = true', 'function tick(state) while true do end end'),
    'rpc.lua': `rpc = {}
function rpc.count(player_id, params)
  local n = 0
  for i = 1, params.n do n = n + 1 end
  return { n = n }
end
`,
  });
  let h: HostProcess;
  beforeAll(async () => {
    h = await startHost({
      GAME_DIR: game.dir,
      SVC_DATA_DIR: dataDir(),
      // 20,000 loop steps (about 80,000 instructions) exceed this budget but not the default 200,000.
      SVC_CONFIG: settingsFile({
        lua_instruction_budget: { init_tick: 1_000_000, other: 20_000 },
        lua_time_budget_ms: { init_tick: 500, other: 200 },
        shutdown_grace_ms: GRACE_MS,
      }),
    });
    await h.ready(90_000);
  }, 120_000);
  afterAll(async () => {
    await h?.stop();
    game.remove();
  });

  async function player(): Promise<{ socket: TestSocket; playerId: string }> {
    const username = `w_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 6)}`;
    const res = await fetch(`${h.url}/api/v1/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username, password: 'correct-horse-battery' }),
    });
    const body = (await res.json()) as { player_id: string; access_token: string };
    const socket = await TestSocket.open({ port: h.port } as TestServer);
    expect((await socket.request('session.connect', { token: body.access_token })).type).toBe('session.connected');
    return { socket, playerId: body.player_id };
  }

  it('match scripts have game.notify under npm start', async () => {
    const { socket } = await player();
    const joined = await socket.request('match.find_or_create', { mode: 'welcome' });
    expect(joined.type).toBe('match.joined');
    const welcome: Frame = await socket.next((f) => f.type === 'notification.new' && f.payload.type === 'welcome', 10_000);
    expect(welcome.payload.subject).toBe(`Welcome to ${joined.payload.match_id}`);
    socket.close();
  }, 30_000);

  it('rpc.lua runs under the operator lua_instruction_budget', async () => {
    const { socket } = await player();
    const call = (n: number) => socket.request('rpc.call', { protocol: 1, method: 'game.count', params: { n } });
    expect((await call(100)).payload).toEqual({ result: { n: 100 } });
    const over = await call(20_000);
    expect(over.type).toBe('rpc.error');
    expect(over.payload.error.code).toBe('internal');
    expect(h.events.get('lua_callback_failed')).toBeGreaterThan(0);
    socket.close();
  }, 30_000);

  it('SIGTERM with a match stuck in its tick: the node still stops within shutdown_grace_ms', async () => {
    const { socket } = await player();
    expect((await socket.request('match.find_or_create', { mode: 'hostile' })).type).toBe('match.joined');
    await new Promise((r) => setTimeout(r, 1000));
    const health = await fetch(`${h.url}/api/v1/health`, { signal: AbortSignal.timeout(2000) });
    expect(health.status).toBe(200);
    const sent = Date.now();
    h.proc.kill('SIGTERM');
    expect(await h.exited).toBe(0);
    expect(Date.now() - sent).toBeLessThan(GRACE_MS);
  }, 30_000);
});
