import type { Clock } from '../../runtime/contracts/context';
import { parseSettings, type RawSettings } from '../../runtime/contracts/settings';
import { jsonLogger, silentLogger, type Logger } from '../../runtime/platform/log';
import { createHost, type RunningServer, type ServerOptions } from '../../host/host';
import type { OpenDatabase } from '../../host/infra/database';
import type { Route } from '../../handlers/contract';
import { allRoutes } from '../../handlers/routes';
import { freshDatabase } from './database';

/** Test configuration raises the per-IP buckets as spec part 8 describes. */
export const TEST_RATE_LIMITS = {
  auth: { limit: 1000, window: 1000 },
  register: { limit: 1000, window: 1000 },
  iap: { limit: 1000, window: 1000 },
  api: { limit: 1000, window: 1000 },
};

export interface TestServer extends RunningServer {
  logs: Record<string, unknown>[];
  /** fetch against the server with JSON conveniences. */
  call(method: string, path: string, options?: CallOptions): Promise<{ status: number; body: any; headers: Headers }>;
}

export interface CallOptions {
  body?: unknown;
  token?: string;
  headers?: Record<string, string>;
}

export interface TestServerOptions {
  log?: Logger;
  /** Routes mounted beside the real ones (test-only probes). */
  extraRoutes?: Route[];
  database?: OpenDatabase;
  migrate?: ServerOptions['migrate'];
  /** Resolve once migrations finished (default true). */
  waitReady?: boolean;
  /** A game directory (host/game.ts) whose modes the real-time host serves. */
  gameDir?: string;
  /** What the game declares deployment-wide (`guest_auth`, registration); default declares nothing. */
  game?: ServerOptions['game'];
  /** A clock the test can move (timers still run on real time). */
  clock?: Clock;
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
  });
  if (options.waitReady !== false) await running.ready;
  return {
    ...running,
    logs,
    async call(method, path, opts = {}) {
      const headers: Record<string, string> = { ...(opts.headers ?? {}) };
      if (opts.token) headers.authorization = `Bearer ${opts.token}`;
      let body: string | undefined;
      if (opts.body !== undefined) {
        body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
        headers['content-type'] ??= 'application/json';
      }
      const res = await fetch(running.url + path, { method, headers, ...(body !== undefined ? { body } : {}) });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        /* leave as text: a test will say so */
      }
      return { status: res.status, body: parsed, headers: res.headers };
    },
  };
}
