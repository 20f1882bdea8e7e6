import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

// The production entry (dist/host.mjs, built by `npm test` before the suite) as
// `npm start` runs it: real processes, real exit codes.
const root = path.resolve(__dirname, '..');
const running: ChildProcess[] = [];
afterEach(async () => {
  for (const p of running.splice(0)) {
    if (p.exitCode === null && p.signalCode === null) {
      p.kill('SIGKILL');
      await new Promise((r) => p.once('exit', r));
    }
  }
});

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

interface Host {
  proc: ChildProcess;
  port: number;
  stderr: () => string;
  exited: Promise<number | null>;
}

async function host(env: Record<string, string>): Promise<Host> {
  const port = await freePort();
  const { DATABASE_URL: _omit, ...base } = process.env;
  const proc = spawn(process.execPath, ['dist/host.mjs'], {
    cwd: root,
    env: { ...base, PORT: String(port), HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  running.push(proc);
  let err = '';
  proc.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return { proc, port, stderr: () => err, exited };
}

async function until<T>(what: () => Promise<T | undefined>, withinMs: number): Promise<T> {
  const started = Date.now();
  for (;;) {
    const v = await what().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() - started > withinMs) throw new Error(`not within ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const status = (h: Host, p: string) => fetch(`http://127.0.0.1:${h.port}${p}`).then(async (r) => ({ status: r.status, body: await r.json() }));

describe('boot of the production host', () => {
  it('refuses a second process on the same embedded data directory, naming it and the holder', async () => {
    const dir = path.join(mkdtempSync(path.join(tmpdir(), 'svc-lock-')), 'data');
    const first = await host({ SVC_DATA_DIR: dir });
    await until(async () => ((await status(first, '/api/v1/health/ready')).status === 200 ? true : undefined), 60_000);

    const second = await host({ SVC_DATA_DIR: dir });
    expect(await second.exited).toBe(2);
    expect(second.stderr()).toContain(dir);
    expect(second.stderr()).toContain(String(first.proc.pid));
    // The first is untouched.
    expect((await status(first, '/api/v1/health/ready')).status).toBe(200);

    // Stopped cleanly, it leaves the directory to the next process.
    first.proc.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const third = await host({ SVC_DATA_DIR: dir });
    await until(async () => ((await status(third, '/api/v1/health/ready')).status === 200 ? true : undefined), 60_000);
  }, 150_000);

  it('takes over a lock whose holder is gone (a crash or a kill)', async () => {
    const dir = path.join(mkdtempSync(path.join(tmpdir(), 'svc-lock-')), 'data');
    const first = await host({ SVC_DATA_DIR: dir });
    await until(async () => ((await status(first, '/api/v1/health/ready')).status === 200 ? true : undefined), 60_000);
    first.proc.kill('SIGKILL');
    await first.exited;
    const next = await host({ SVC_DATA_DIR: dir });
    await until(async () => ((await status(next, '/api/v1/health/ready')).status === 200 ? true : undefined), 60_000);
  }, 150_000);

  it('refuses a port in use in one line with exit 2', async () => {
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    try {
      const port = (taken.address() as net.AddressInfo).port;
      const dir = mkdtempSync(path.join(tmpdir(), 'svc-port-'));
      const h = await host({ SVC_DATA_DIR: path.join(dir, 'data'), PORT: String(port) });
      expect(await h.exited).toBe(2);
      expect(h.stderr().trim()).toBe(`svc: cannot listen on 127.0.0.1:${port}: the port is already in use (set PORT or HOST)`);
    } finally {
      await new Promise((r) => taken.close(r));
    }
  }, 60_000);

  it('waits for an unreachable database with liveness up and readiness giving the reason, then exits 1 in one line', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-boot-'));
    const config = path.join(dir, 'settings.json');
    writeFileSync(config, JSON.stringify({ db_boot_timeout_ms: 4000, db_connect_timeout_ms: 500 }));
    const h = await host({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test', SVC_CONFIG: config });
    const ready = await until(async () => {
      const r = await status(h, '/api/v1/health/ready');
      return r.body?.error?.details?.reason ? r : undefined;
    }, 3000);
    expect(ready.status).toBe(503);
    expect(ready.body.error).toMatchObject({ code: 'not_ready', details: { reason: 'database_unavailable' } });
    expect((await status(h, '/api/v1/health')).status).toBe(200);
    expect(await h.exited).toBe(1);
    // The boot banner, then one line saying why, and no stack trace.
    const lines = h.stderr().trim().split('\n');
    expect(lines[0]).toMatch(/^svc .* listening on http:\/\/127\.0\.0\.1:\d+/);
    expect(lines.filter((l) => l.startsWith('svc: '))).toHaveLength(1);
    expect(lines.at(-1)).toMatch(/^svc: not ready: the database was unreachable for 4000 ms at boot \(database_unavailable/);
    expect(h.stderr()).not.toMatch(/^\s+at /m);
  }, 30_000);
});
