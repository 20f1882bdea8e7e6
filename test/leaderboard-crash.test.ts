import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startHost, type Child } from '../bench/_children';
import { migratedDataDir } from './support/database';

// The production entry (dist/host.mjs, built before the suite) killed with
// SIGKILL: no shutdown hook runs, so what survives is what the interval
// flush wrote. docs/rest-api.md promises a crash loses at most one
// `leaderboard_flush_interval_ms` of scores.

const INTERVAL_MS = 1000;
const running: Child[] = [];
afterEach(async () => {
  for (const h of running.splice(0)) await h.stop(1000);
});

async function host(dir: string, config: string): Promise<Child> {
  const h = await startHost({ SVC_DATA_DIR: dir, SVC_CONFIG: config, GAME_DIR: 'examples/demo-game' });
  running.push(h);
  await h.ready(60_000);
  return h;
}

async function call(h: Child, method: string, p: string, token?: string, body?: unknown): Promise<any> {
  const res = await fetch(`${h.url}/api/v1${p}`, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const answer = await res.json();
  if (res.status !== 200) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(answer)}`);
  return answer;
}

describe('leaderboards after a crash', () => {
  it('keep every score submitted more than one flush interval before a SIGKILL', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'svc-crash-'));
    const config = path.join(root, 'settings.json');
    writeFileSync(config, JSON.stringify({ leaderboard_client_submit: 'all', leaderboard_flush_interval_ms: INTERVAL_MS, pbkdf2_iterations: 1000, rate_limits: { register: { limit: 1000, window: 1000 } } }));
    const dir = migratedDataDir('svc-crash-data-');
    const first = await host(dir, config);
    const players: { player_id: string; access_token: string }[] = [];
    for (let i = 0; i < 20; i++) players.push(await call(first, 'POST', '/auth/register', undefined, { username: `crash${i}_${Date.now() % 100000}`, password: 'correct horse' }));

    // Scores submitted, with their times; submissions keep coming until the kill.
    const submitted: { player_id: string; score: number; at: number }[] = [];
    const until = Date.now() + 3.5 * INTERVAL_MS;
    for (let n = 1; Date.now() < until; n++) {
      const p = players[n % players.length]!;
      await call(first, 'POST', '/leaderboards/crash', p.access_token, { score: n });
      submitted.push({ player_id: p.player_id, score: n, at: Date.now() });
      await new Promise((r) => setTimeout(r, 20));
    }
    const killedAt = Date.now();
    first.proc.kill('SIGKILL');
    await first.exited;

    const second = await host(dir, config);
    const board = await call(second, 'GET', '/leaderboards/crash?limit=100', players[0]!.access_token);
    const kept = new Map<string, number>(board.entries.map((e: { player_id: string; score: number }) => [e.player_id, e.score]));
    // The bound, with room for the flush's own duration: anything older than that must be there.
    const bound = killedAt - INTERVAL_MS - 500;
    let checked = 0;
    for (const s of submitted) {
      if (s.at >= bound) continue;
      checked++;
      // Scores only grow per player, so the kept score is at least every old one.
      expect(kept.get(s.player_id) ?? -1).toBeGreaterThanOrEqual(s.score);
    }
    expect(checked).toBeGreaterThan(20);
  }, 120_000);
});
