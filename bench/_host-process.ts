// The production host (dist/host.mjs, as `npm start` runs it) as a child
// process of a benchmark, a soak or a test: started on a free port with the
// environment given, polled until ready, measured, stopped.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

export interface HostProcess {
  proc: ChildProcess;
  port: number;
  url: string;
  /** What the host wrote to stderr so far (the boot banner, one-line errors). */
  stderr(): string;
  /** JSON log events seen on stdout, by name. */
  events: Map<string, number>;
  /** Resolves with the exit code (or signal name) once the process ends. */
  exited: Promise<number | string | null>;
  /** Resident set size now, in bytes (Linux). */
  rss(): number;
  /** Polls `/api/v1/health/ready` until 200; returns how long that took. */
  ready(withinMs: number): Promise<number>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it is gone. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Starts `node dist/host.mjs`. DATABASE_URL is not inherited unless given in
 * `env`, so a caller chooses its database explicitly.
 */
export async function startHost(env: Record<string, string>, args: string[] = []): Promise<HostProcess> {
  const port = await freePort();
  const { DATABASE_URL: _inherited, ...base } = process.env;
  const proc = spawn(process.execPath, ['dist/host.mjs', ...args], {
    cwd: root,
    env: { ...base, PORT: String(port), HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  proc.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const events = new Map<string, number>();
  let partial = '';
  proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      try {
        const event = JSON.parse(line).event as string;
        events.set(event, (events.get(event) ?? 0) + 1);
      } catch {
        /* not a log line */
      }
    }
  });
  const exited = new Promise<number | string | null>((r) => proc.once('exit', (code, signal) => r(code ?? signal)));
  const url = `http://127.0.0.1:${Number(env.PORT ?? port)}`;
  return {
    proc,
    port: Number(env.PORT ?? port),
    url,
    stderr: () => err,
    events,
    exited,
    rss() {
      const status = readFileSync(`/proc/${proc.pid}/status`, 'utf8');
      const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
      return kb * 1024;
    },
    async ready(withinMs) {
      const started = Date.now();
      for (;;) {
        if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`host exited: ${err.trim()}`);
        const res = await fetch(`${url}/api/v1/health/ready`, { signal: AbortSignal.timeout(2000) }).catch(() => null);
        if (res?.status === 200) return Date.now() - started;
        if (Date.now() - started > withinMs) throw new Error(`not ready after ${withinMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop(graceMs = 15_000) {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}
