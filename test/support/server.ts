import type { Clock } from '../../runtime/contracts/context';
import { parseSettings, type RawSettings } from '../../runtime/contracts/settings';
import { jsonLogger, silentLogger, type Logger } from '../../runtime/platform/log';
import { createHost, type RunningServer, type ServerOptions } from '../../host/host';
import type { OpenDatabase } from '../../host/infra/database';
import type { Route } from '../../handlers/contract';
import { allRoutes } from '../../handlers/routes';
import { answerOf, requestInit, type Answer, type CallOptions } from './calls';
import { freshDatabase } from './database';

/** Test configuration raises the per-IP buckets (`auth`, `register`, `iap`, `api`) to 1000, as development and test configuration may. */
export const TEST_RATE_LIMITS = {
  auth: { limit: 1000, window: 1000 },
  register: { limit: 1000, window: 1000 },
  iap: { limit: 1000, window: 1000 },
  api: { limit: 1000, window: 1000 },
};

export interface TestServer extends RunningServer {
  logs: Record<string, unknown>[];
  /** fetch against the server with JSON conveniences. */
  call(method: string, path: string, options?: CallOptions): Promise<Answer>;
}

export interface TestServerOptions {
  log?: Logger;
  /** Routes mounted beside the real ones (test-only probes). */
  extraRoutes?: Route[];
  database?: OpenDatabase;
  migrate?: ServerOptions['migrate'];
  /** Resolve once migrations finished (default true). */
  waitReady?: boolean;
  /** A game directory (host/game-directory.ts) whose modes the real-time host serves. */
  gameDir?: string;
  /** What the game declares deployment-wide (`guest_auth`, registration); default declares nothing. */
  game?: ServerOptions['game'];
  /** A clock the test can move (timers still run on real time). */
  clock?: Clock;
  /** The fleet's Redis (host/fleet); unset, the node stands alone. */
  redis?: ServerOptions['redis'];
}

/**
 * Script deadlines at their ceilings: test machines share their cores, and a
 * descheduled thread must not fail an honest callback. Tests about the
 * limits set the production defaults (or tighter) themselves.
 */
export const TEST_SCRIPT_DEADLINES = { init_tick: 500, other: 200 };

export async function startTestServer(raw: RawSettings = {}, options: TestServerOptions = {}): Promise<TestServer> {
  const { settings } = parseSettings({ pbkdf2_iterations: 1000, lua_time_budget_ms: TEST_SCRIPT_DEADLINES, response_checks: true, ...raw, rate_limits: { ...TEST_RATE_LIMITS, ...(raw.rate_limits ?? {}) } });
  const database = options.database ?? (await freshDatabase());
  const logs: Record<string, unknown>[] = [];
  const log = options.log ?? jsonLogger((line) => logs.push(JSON.parse(line)), 'debug');
  const running = await createHost({
    settings,
    database,
    log,
    ...(options.gameDir ? { gameDir: options.gameDir } : {}),
    ...(options.game ? { game: options.game } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.extraRoutes ? { routes: [...allRoutes(), ...options.extraRoutes] } : {}),
    ...(options.migrate ? { migrate: options.migrate } : {}),
    ...(options.redis ? { redis: options.redis } : {}),
  });
  if (options.waitReady !== false) await running.ready;
  return {
    ...running,
    logs,
    // With response_checks on, a frame that failed its published schema was held back and logged:
    // the test that owns the server fails here even if nothing waited for that frame.
    async close() {
      await running.close();
      const drift = logs.filter((l) => l.event === 'frame_check_failed');
      if (drift.length > 0) throw new Error(`frames that fail their published schema: ${drift.map((l) => `${String(l.frame_type)} (${String(l.problem)})`).join('; ')}`);
    },
    async call(method, path, opts = {}) {
      return answerOf(await fetch(running.url + path, requestInit(method, opts)));
    },
  };
}
