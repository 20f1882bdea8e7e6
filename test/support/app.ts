import { createApp, type App } from '../../handlers/app';
import type { Route } from '../../handlers/contract';
import { allRoutes } from '../../handlers/routes';
import { createContext } from '../../host/context';
import type { OpenDatabase } from '../../host/infra/database';
import type { Ctx } from '../../runtime/contracts/context';
import { jsonLogger } from '../../runtime/platform/log';
import { offlineLive } from '../../runtime/platform/offline-live';
import { parseSettings, type RawSettings } from '../../runtime/contracts/settings';
import { answerOf, requestInit, type Answer, type CallOptions } from './calls';
import { freshDatabase } from './database';
import { TEST_RATE_LIMITS } from './server';

/**
 * The handler library in process: `createApp(ctx).fetch(new Request(…))` over
 * a Ctx built by the production `createContext` (token cache, rate limiter,
 * hasher, client gate, providers), a fresh migrated database and a node that
 * holds no sockets. For tests of REST behaviour where no socket is involved:
 * no port, no HTTP parser, no server boot per configuration.
 */
export interface InProcessApp {
  app: App;
  ctx: Ctx;
  logs: Record<string, unknown>[];
  call(method: string, path: string, options?: CallOptions & { ip?: string }): Promise<Answer>;
  close(): Promise<void>;
}

export interface InProcessOptions {
  /** Share one database between apps with different settings (the caller closes it). */
  database?: OpenDatabase;
  extraRoutes?: Route[];
}

export async function inProcessApp(raw: RawSettings = {}, options: InProcessOptions = {}): Promise<InProcessApp> {
  const { settings } = parseSettings({ pbkdf2_iterations: 1000, response_checks: true, ...raw, rate_limits: { ...TEST_RATE_LIMITS, ...(raw.rate_limits ?? {}) } });
  const database = options.database ?? (await freshDatabase());
  const logs: Record<string, unknown>[] = [];
  const log = jsonLogger((line) => logs.push(JSON.parse(line)), 'debug');
  const { ctx, limits, markReady } = await createContext({ settings, database, log, live: offlineLive() });
  markReady();
  const app = createApp(ctx, options.extraRoutes ? [...allRoutes(), ...options.extraRoutes] : allRoutes());
  let n = 0;
  return {
    app,
    ctx,
    logs,
    async call(method, path, opts = {}) {
      const request = new Request(`http://localhost${path}`, requestInit(method, opts, true));
      return answerOf(await app.fetch(request, { ip: opts.ip ?? '127.0.0.1', requestId: `in-process-${++n}` }));
    },
    async close() {
      limits.close();
      if (!options.database) await database.close();
    },
  };
}
