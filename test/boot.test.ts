import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { productionHosts, status, until } from './support/production-host';

// The data directory's lock is tested in test/boot-data-dir.test.ts, a file of its own so the two run on separate forks.
const host = productionHosts();

describe('boot of the production host', () => {
  it('refuses a settings file with mistakes in one line naming every bad key, exit 2', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-settings-'));
    const config = path.join(dir, 'settings.json');
    writeFileSync(config, JSON.stringify({ registration: 'Closed', ws_allowed_origins: 'https://game.example', db_pool_sise: 5 }));
    const h = await host({ SVC_DATA_DIR: path.join(dir, 'data'), SVC_CONFIG: config });
    expect(await h.exited).toBe(2);
    const lines = h.stderr().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^svc: 3 invalid settings: /);
    for (const key of ['registration', 'ws_allowed_origins', 'db_pool_sise']) expect(lines[0]).toContain(`'${key}'`);
  }, 60_000);

  it('refuses a port in use in one line with exit 2, before any database work', async () => {
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    try {
      const port = (taken.address() as net.AddressInfo).port;
      const dir = mkdtempSync(path.join(tmpdir(), 'svc-port-'));
      const h = await host({ SVC_DATA_DIR: path.join(dir, 'data'), PORT: String(port) });
      expect(await h.exited).toBe(2);
      expect(h.stderr().trim()).toBe(`svc: cannot listen on 127.0.0.1:${port}: the port is already in use (set PORT or HOST)`);
      // Said before any database work: a first boot did not even make its data directory.
      expect(existsSync(path.join(dir, 'data'))).toBe(false);
    } finally {
      await new Promise((r) => taken.close(r));
    }
  }, 60_000);

  it('waits for an unreachable database with liveness up and readiness giving the reason, then exits 1 in one line', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-boot-'));
    const config = path.join(dir, 'settings.json');
    // Generous: a loaded machine takes seconds to start a node process, and the probe must see it before it exits.
    writeFileSync(config, JSON.stringify({ db_boot_timeout_ms: 8000, db_connect_timeout_ms: 500 }));
    const h = await host({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test', SVC_CONFIG: config });
    const ready = await until(async () => {
      const r = await status(h, '/api/v1/health/ready');
      return r.body?.error?.details?.reason ? r : undefined;
    }, 7000);
    expect(ready.status).toBe(503);
    expect(ready.body.error).toMatchObject({ code: 'not_ready', details: { reason: 'database_unavailable' } });
    expect((await status(h, '/api/v1/health')).status).toBe(200);
    expect(await h.exited).toBe(1);
    // The boot banner, then one line saying why, and no stack trace.
    const lines = h.stderr().trim().split('\n');
    expect(lines[0]).toMatch(/^svc .* listening on http:\/\/127\.0\.0\.1:\d+/);
    expect(lines.filter((l) => l.startsWith('svc: '))).toHaveLength(1);
    expect(lines.at(-1)).toMatch(/^svc: not ready: the database was unreachable for 8000 ms at boot \(database_unavailable/);
    expect(h.stderr()).not.toMatch(/^\s+at /m);
  }, 30_000);
});
