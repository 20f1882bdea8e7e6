// Benchmark processes: a target (server) and a load generator, each a forked
// child driven by request/reply messages keyed on `op`.
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

export interface Child {
  process: ChildProcess;
  /** The child's first message (a target's `{port}`). */
  first: any;
  /** Sends `{op, ...data}` and resolves with the child's reply of the same op. */
  request<T = any>(op: string, data?: Record<string, unknown>, timeoutMs?: number): Promise<T>;
  /** Asks the child to exit (killing it after 30 s) and resolves once it has. */
  stop(): Promise<void>;
}

export async function child(file: string, args: string[] = [], nodeFlags: string[] = []): Promise<Child> {
  // SVC_BENCH_NODE_FLAGS (e.g. `--cpu-prof --cpu-prof-dir=prof`) reaches every child: profile a target in place.
  const extra = process.env.SVC_BENCH_NODE_FLAGS?.split(' ').filter(Boolean) ?? [];
  const proc = fork(path.join(here, file), args, { execArgv: ['--import', 'tsx', ...nodeFlags, ...extra], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiting = new Map<string, (m: any) => void>();
  const first = await new Promise<any>((resolve, reject) => {
    proc.once('message', resolve);
    proc.once('exit', (code) => reject(new Error(`${file} exited with ${code}`)));
  });
  proc.on('message', (m: any) => {
    const w = waiting.get(m.op);
    if (w) {
      waiting.delete(m.op);
      w(m);
    }
  });
  return {
    process: proc,
    first,
    request(op, data = {}, timeoutMs = 300_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${file}: no reply to ${op} in ${timeoutMs} ms`)), timeoutMs);
        waiting.set(op, (m) => {
          clearTimeout(timer);
          resolve(m);
        });
        proc.send({ op, ...data });
      });
    },
    stop() {
      // Ask first: a clean exit lets a target run with --cpu-prof write its profile.
      if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
      const exited = new Promise<void>((resolve) =>
        proc.once('exit', (code, signal) => {
          if (code || signal) console.error(`${file} exited with ${code ?? signal}`);
          resolve();
        }),
      );
      if (proc.connected) proc.send({ op: 'exit' });
      const timer = setTimeout(() => proc.kill(), 30_000);
      return exited.finally(() => clearTimeout(timer));
    },
  };
}

const benchStarted = performance.now();

/** One progress line on stderr while a benchmark runs (the tables go to stdout at the end). */
export function progress(message: string): void {
  process.stderr.write(`[${((performance.now() - benchStarted) / 1000).toFixed(0).padStart(4)} s] ${message}\n`);
}

export function table(title: string, head: string[], rows: (string | number)[][]): void {
  console.log(`\n${title}\n`);
  console.log(`| ${head.join(' | ')} |`);
  console.log(`|${head.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`);
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
}
