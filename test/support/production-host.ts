import { afterEach } from 'vitest';
import { startHost, type Child as HostProcess } from '../../bench/_children';

/**
 * The production entry (dist/host.mjs, built by the suite's global setup when stale)
 * as `npm start` runs it: real processes, real exit codes. Every process a
 * test starts is stopped after it.
 */
export function productionHosts(): (env: Record<string, string>) => Promise<HostProcess> {
  const running: HostProcess[] = [];
  afterEach(async () => {
    for (const h of running.splice(0)) await h.stop(1000);
  });
  return async (env) => {
    const h = await startHost(env);
    running.push(h);
    return h;
  };
}

/** Polls `what` every 100 ms until it gives a value, or throws after `withinMs`. */
export async function until<T>(what: () => Promise<T | undefined>, withinMs: number): Promise<T> {
  const started = Date.now();
  for (;;) {
    const v = await what().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() - started > withinMs) throw new Error(`not within ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export const status = (h: HostProcess, p: string) => fetch(`${h.url}${p}`).then(async (r) => ({ status: r.status, body: await r.json() }));
