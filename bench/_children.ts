// The child processes of benchmarks, soaks and tests, all handled one way:
// started (a bench child forked with tsx, or a node host), awaited until ready
// within a deadline, measured from outside (CPU time and RSS), asked over IPC
// for what only the child knows, and stopped (SIGTERM, then SIGKILL after a
// grace period). Every child still running when this process leaves is
// killed, so an interrupted or failed benchmark leaves no orphans behind;
// only SIGKILL skips that, and then forked children leave on their own when
// their IPC channel closes (a host started without one stays: stop it in a
// finally).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

/** This checkout (its README, its bench/ children). */
export const root = path.resolve(here, '..');

/**
 * The checkout whose service the children run: its sources for forked targets
 * and source-started hosts, its dist/ for the production host. SVC_BENCH_ROOT
 * points them at another tree (a worktree of an older commit) so this tree's
 * benchmarks measure before and after the same way.
 */
export const svcRoot = path.resolve(process.env.SVC_BENCH_ROOT ?? root);

/** A service module of `svcRoot`, e.g. `svcImport<typeof import('../host/host')>('host/host.ts')`. */
export function svcImport<T>(file: string): Promise<T> {
  return import(pathToFileURL(path.join(svcRoot, file)).href) as Promise<T>;
}

/** `svcRoot` with its commit, so a table says which tree it measured. */
export function svcRevision(): string {
  const git = (...args: string[]) => spawnSync('git', ['-C', svcRoot, ...args], { encoding: 'utf8' }).stdout?.trim() ?? '';
  const commit = git('rev-parse', '--short', 'HEAD') || 'unknown commit';
  const dirty = git('status', '--porcelain', '--untracked-files=no', '--', 'handlers', 'host', 'runtime') !== '';
  return `${svcRoot} at ${commit}${dirty ? ' with uncommitted changes' : ''}`;
}

export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

// SVC_BENCH_NODE_FLAGS (e.g. `--cpu-prof --cpu-prof-dir=prof`) reaches every child: profile a target in place.
const extraFlags = process.env.SVC_BENCH_NODE_FLAGS?.split(' ').filter(Boolean) ?? [];
// SVC_BENCH_ECHO=1 passes every child's output through (e.g. with `--trace-gc` in the flags above).
const echoAll = process.env.SVC_BENCH_ECHO === '1';

/** utime + stime of a /proc stat file (a process's or one thread's), in ms. */
function statCpuMs(file: string): number {
  const stat = readFileSync(file, 'utf8');
  // Fields after the command name, which may itself hold spaces: utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond();
}

// Kernel clock ticks per second: /proc reports CPU time in them.
let clockTicks = 0;
function ticksPerSecond(): number {
  clockTicks ||= Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;
  return clockTicks;
}

const running = new Set<Child>();
let reaperInstalled = false;

/** Kills what is still running when this process exits or dies of a signal it can catch. */
function installReaper(): void {
  if (reaperInstalled) return;
  reaperInstalled = true;
  const killAll = () => {
    for (const c of running) c.proc.kill('SIGKILL');
  };
  process.once('exit', killAll);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    // Someone else's handler decides what the signal means; only the default (dying) is ours to extend.
    if (process.listenerCount(signal) > 0) continue;
    process.once(signal, () => {
      killAll();
      process.kill(process.pid, signal);
    });
  }
}

export interface StartOptions {
  /** Names the child in errors; by default its entry file. */
  name?: string;
  /** Node's arguments: flags, the entry file, its arguments. */
  args: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** An IPC channel: the child announces readiness with a message and answers `request`. */
  ipc?: boolean;
  /** Copy the child's stderr (and stdout that is not a JSON log line) to ours as it arrives. */
  echo?: boolean;
  /** Where a child without IPC serves; readiness is then `GET /api/v1/health/ready` answering 200. */
  port?: number;
  /**
   * Runs the child at the lowest CPU priority (nice 19), every thread of it:
   * a load generator standing in for remote clients then takes the cores the
   * target leaves idle instead of a fair share beside it, as clients on other
   * machines would. Linux and macOS (`nice` from the start, so the threads
   * node makes before any code runs inherit it).
   */
  lowPriority?: boolean;
  /**
   * Pins every thread of the child to these CPUs (`taskset -c`, e.g. `'0'`),
   * so a target and its load generator each own a core and neither's figure
   * moves with where the scheduler put the other. Linux with util-linux
   * only: check `canPin()` first.
   */
  cpus?: string;
}

let pinnable: boolean | undefined;
/** Whether `cpus` can be honoured here (`taskset` on the PATH). */
export function canPin(): boolean {
  pinnable ??= spawnSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' }).status === 0;
  return pinnable;
}

interface Pending {
  resolve(m: any): void;
  reject(e: Error): void;
  timer: ReturnType<typeof setTimeout>;
}

export class Child {
  readonly name: string;
  readonly proc: ChildProcess;
  /** Resolves with the exit code (or signal name) once the process ends. */
  readonly exited: Promise<number | string | null>;
  /** JSON log events seen on stdout, by name. */
  readonly events = new Map<string, number>();
  /** The child's ready message beyond `op` (a forked target's `{port, ...}`); empty for a host. */
  info: Record<string, any> = {};
  #port: number;
  #err = '';
  #announced: Promise<void> | null = null;
  #pending = new Map<number, Pending>();
  #nextId = 0;
  #stopping = false;

  constructor(options: StartOptions) {
    this.name = options.name ?? path.basename(options.args.find((a) => /\.(ts|mjs|js)$/.test(a)) ?? 'node');
    this.#port = options.port ?? 0;
    const command = [process.execPath, ...extraFlags, ...options.args];
    // `nice` execs node in its own place: the pid, its /proc figures and the IPC channel are node's.
    if (options.lowPriority) command.unshift('nice', '-n', '19');
    // Outermost, from the start, so node's own threads (and nice's exec) inherit the mask.
    if (options.cpus !== undefined) command.unshift('taskset', '-c', options.cpus);
    this.proc = spawn(command[0]!, command.slice(1), {
      cwd: options.cwd ?? root,
      env: options.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe', ...(options.ipc ? (['ipc'] as const) : [])],
    });
    running.add(this);
    installReaper();
    // Without a listener a failed spawn or kill would throw from an event; the exit (or its absence) tells the story.
    this.proc.on('error', (err) => (this.#err += `${err.message}\n`));
    const echo = options.echo ?? echoAll;
    this.proc.stderr!.setEncoding('utf8').on('data', (c: string) => {
      this.#err += c;
      if (echo) process.stderr.write(c);
    });
    let partial = '';
    this.proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        let event: unknown;
        try {
          event = JSON.parse(line).event;
        } catch {
          /* not a log line */
        }
        if (typeof event === 'string') this.events.set(event, (this.events.get(event) ?? 0) + 1);
        else if (echo && line) process.stderr.write(`${line}\n`);
      }
    });
    this.exited = new Promise((resolve) =>
      this.proc.once('exit', (code, signal) => {
        running.delete(this);
        const how = code ?? signal;
        for (const p of this.#pending.values()) {
          clearTimeout(p.timer);
          p.reject(new Error(`${this.name} exited with ${how}`));
        }
        this.#pending.clear();
        if (echo && !this.#stopping && how !== 0) console.error(`${this.name} exited with ${how}`);
        resolve(how);
      }),
    );
    if (options.ipc) {
      // Listening from the start: a ready message sent before anyone awaits it is not lost.
      // It is the first message that answers no request (`serveParent` sends `op: 'ready'`).
      let announced = false;
      this.#announced = new Promise((resolve) => {
        this.proc.on('message', (m: { op: string; id?: number; error?: string }) => {
          if (!announced && m.id === undefined) {
            announced = true;
            const { op: _op, ...info } = m;
            this.info = info;
            if (typeof this.info.port === 'number') this.#port = this.info.port;
            resolve();
            return;
          }
          const p = m.id === undefined ? undefined : this.#pending.get(m.id);
          if (!p) return;
          this.#pending.delete(m.id!);
          clearTimeout(p.timer);
          if (m.error) p.reject(new Error(`${this.name} ${m.op}: ${m.error}`));
          else p.resolve(m);
        });
      });
    }
  }

  get port(): number {
    return this.#port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.#port}`;
  }

  get pid(): number {
    return this.proc.pid!;
  }

  /** What the child wrote to stderr so far (a host's boot banner, one-line errors). */
  stderr(): string {
    return this.#err;
  }

  get gone(): boolean {
    return this.proc.exitCode !== null || this.proc.signalCode !== null;
  }

  /** Waits for the ready message (IPC) or a 200 from the readiness route; returns how long that took. */
  async ready(withinMs = 120_000): Promise<number> {
    const started = Date.now();
    const failed = () => new Error(`${this.name} exited before it was ready: ${this.#err.trim().split('\n').slice(-20).join('\n')}`);
    if (this.#announced) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${this.name} not ready after ${withinMs} ms`)), withinMs)));
      const died = this.exited.then(() => Promise.reject(failed()));
      // Once ready, the child's later exit must not surface as an unhandled rejection.
      died.catch(() => {});
      try {
        await Promise.race([this.#announced, died, late]);
      } finally {
        clearTimeout(timer);
      }
      return Date.now() - started;
    }
    for (;;) {
      if (this.gone) throw failed();
      const res = await fetch(`${this.url}/api/v1/health/ready`, { signal: AbortSignal.timeout(2000) }).catch(() => null);
      if (res?.status === 200) return Date.now() - started;
      if (Date.now() - started > withinMs) throw new Error(`${this.name} not ready after ${withinMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Sends `{op, id, ...data}` and resolves with the child's reply to it. */
  request<T = any>(op: string, data: Record<string, unknown> = {}, timeoutMs = 300_000): Promise<T> {
    if (!this.proc.connected) return Promise.reject(new Error(`${this.name}: no IPC channel for ${op}`));
    const id = ++this.#nextId;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`${this.name}: no reply to ${op} in ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, { resolve, reject, timer });
      this.proc.send({ ...data, op, id }, (err) => {
        if (!err) return;
        clearTimeout(timer);
        this.#pending.delete(id);
        reject(new Error(`${this.name}: could not send ${op}: ${err.message}`));
      });
    });
  }

  /**
   * CPU time the process has used so far (all its threads), in ms. Read from
   * /proc rather than asked for, so any child is measured the same way and
   * a busy child answers without queueing behind its own work.
   */
  cpuMs(): number {
    return statCpuMs(`/proc/${this.pid}/stat`);
  }

  /** CPU time each thread has used so far, in ms, by thread id (the main thread's id is the pid). */
  threadCpuMs(): Map<number, number> {
    const out = new Map<number, number>();
    for (const tid of readdirSync(`/proc/${this.pid}/task`)) {
      try {
        out.set(Number(tid), statCpuMs(`/proc/${this.pid}/task/${tid}/stat`));
      } catch {
        // The thread ended between the listing and the read.
      }
    }
    return out;
  }

  /** Resident set size now, in bytes. */
  rss(): number {
    const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) * 1024;
  }

  /**
   * SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone.
   * Bench children answer SIGTERM with a clean exit, which lets --cpu-prof
   * write its profile; the host shuts down as in production.
   */
  async stop(graceMs = 15_000): Promise<void> {
    if (this.gone) return;
    this.#stopping = true;
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** Starts a node process; the presets below are the usual ways in. */
export function start(options: StartOptions): Child {
  return new Child(options);
}

/**
 * Forks bench/<file> with tsx and waits for its ready message (see
 * `serveParent`). A child that dies or stays silent past the deadline is
 * stopped before the error reaches the caller.
 */
export async function forkChild(file: string, args: string[] = [], options: { nodeFlags?: string[]; readyWithinMs?: number; lowPriority?: boolean; cpus?: string } = {}): Promise<Child> {
  const c = start({
    name: [file.replace(/\.ts$/, ''), ...args.filter((a) => !a.startsWith('{'))].join(' '),
    args: ['--import', 'tsx', ...(options.nodeFlags ?? []), path.join(here, file), ...args],
    ipc: true,
    echo: true,
    lowPriority: options.lowPriority ?? false,
    cpus: options.cpus,
  });
  try {
    await c.ready(options.readyWithinMs ?? 180_000);
  } catch (err) {
    await c.stop(1000);
    throw err;
  }
  return c;
}

/**
 * Starts the service's host on a free port: `node dist/host.mjs` as `npm
 * start` runs it, or `host/main.ts` with tsx when `from: 'sources'` (no build
 * needed). Returns at once, before it is ready (a test may expect it to
 * refuse to boot): await `ready(withinMs)`. DATABASE_URL is not inherited
 * unless given in `env`, so a caller chooses its database explicitly. The
 * host's stderr (its boot banner) is kept, not echoed.
 */
export async function startHost(env: Record<string, string>, args: string[] = [], options: { from?: 'dist' | 'sources' } = {}): Promise<Child> {
  const port = Number(env.PORT ?? (await freePort()));
  const { DATABASE_URL: _inherited, ...base } = process.env;
  const entry = options.from === 'sources' ? ['--import', 'tsx', path.join(svcRoot, 'host/main.ts')] : [path.join(svcRoot, 'dist/host.mjs')];
  return start({
    name: `host (${options.from ?? 'dist'})`,
    args: [...entry, ...args],
    cwd: svcRoot,
    env: { ...base, PORT: String(port), HOST: '127.0.0.1', ...env },
    port,
  });
}

/**
 * In a forked child: tells the parent it is ready (`ready`, e.g. `{port}`),
 * then answers each `{op, id, ...}` with what `ops[op]` returns (or its error).
 */
export function serveParent(ready: Record<string, unknown>, ops: Record<string, (m: any) => unknown> = {}): void {
  // Leaving through exit lets --cpu-prof write its profile; a parent gone without stopping us takes us with it.
  process.on('SIGTERM', () => process.exit(0));
  process.on('disconnect', () => process.exit(0));
  process.on('message', async (m: { op: string; id: number }) => {
    try {
      const op = ops[m.op];
      if (!op) throw new Error(`unknown op ${m.op}`);
      const reply = (await op(m)) ?? {};
      process.send!({ ...(reply as object), op: m.op, id: m.id });
    } catch (err) {
      process.send!({ op: m.op, id: m.id, error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    }
  });
  process.send!({ op: 'ready', ...ready });
}
