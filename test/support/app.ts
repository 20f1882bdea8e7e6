import { createApp, type App } from '../../handlers/app';
import type { Route } from '../../handlers/contract';
import { allRoutes } from '../../handlers/routes';
import { createContext } from '../../host/context';
import type { OpenDatabase } from '../../host/infra/database';
import type { Ctx } from '../../runtime/contracts/context';
import { jsonLogger } from '../../runtime/platform/log';
import { offlineLive } from '../../runtime/platform/offline-live';
import { parseSettings, type RawSettings } from '../../runtime/contracts/settings';
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
  call(method: string, path: string, options?: { body?: unknown; token?: string; headers?: Record<string, string>; ip?: string }): Promise<{ status: number; body: any; headers: Headers }>;
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
      const headers = new Headers(opts.headers ?? {});
      if (opts.token) headers.set('authorization', `Bearer ${opts.token}`);
      let body: string | undefined;
      if (opts.body !== undefined) {
        body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
        if (!headers.has('content-type')) headers.set('content-type', 'application/json');
        headers.set('content-length', String(Buffer.byteLength(body)));
      }
      const request = new Request(`http://localhost${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
      const res = await app.fetch(request, { ip: opts.ip ?? '127.0.0.1', requestId: `in-process-${++n}` });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        /* leave as text: a test will say so */
      }
      return { status: res.status, body: parsed, headers: res.headers };
    },
    async close() {
      limits.close();
      if (!options.database) await database.close();
    },
  };
}
