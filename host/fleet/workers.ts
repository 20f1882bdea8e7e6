import cluster, { type Worker } from 'node:cluster';
import type { Settings } from '../../runtime/contracts/settings';
import type { Logger } from '../../runtime/platform/log';
import { usableCpus } from '../realtime/lanes/usable-cpus';

/** The message a worker sends its primary once its routes answer. */
export const WORKER_READY = 'svc_worker_ready';

/** `workers`, with `auto` read as one per CPU the process may use (its affinity, lowered to its cgroup's quota: decision 0058). */
export function workerCount(settings: Pick<Settings, 'workers'>, usable: () => number = () => usableCpus()): number {
  return settings.workers === 'auto' ? usable() : settings.workers;
}

/**
 * Why this deployment cannot run several processes, or null when it can.
 * Each process is a node of a fleet: without Redis two workers would
 * disagree on who is online, lose pushes to each other's sockets and keep
 * revoked tokens alive in each other's caches, and the embedded database
 * belongs to one process.
 */
export function workersRefusal(count: number, deployment: { redis: unknown; databaseUrl: string | null }): string | null {
  if (count <= 1) return null;
  const missing: string[] = [];
  if (!deployment.redis) missing.push('REDIS_URL (the processes share presence, pushes and revocations through Redis)');
  if (!deployment.databaseUrl) missing.push('DATABASE_URL (the embedded database lives inside one process)');
  if (missing.length === 0) return null;
  return `invalid setting 'workers': ${count} processes need ${missing.join(' and ')}; set them, or set workers to 1`;
}

/** Whether this process is one of the primary's workers (it then serves; the primary only supervises). */
export function isWorker(): boolean {
  return cluster.isWorker;
}

/** A worker says it is ready; without a primary (a plain node) there is nobody to tell. */
export function announceReady(): void {
  if (cluster.isWorker) process.send?.({ op: WORKER_READY });
}

/**
 * The primary: starts `count` workers that all listen on the one port
 * (node:cluster hands each new connection to the next worker), the first
 * alone so it applies the migrations before the others start, replaces a
 * worker that dies (backing off while they keep dying), and on SIGTERM or
 * SIGINT stops them all with a graceful shutdown of each. A worker that
 * fails to boot ends the primary with its code (2 for a refused
 * configuration, else 1): a bad deployment must not restart forever.
 */
export async function superviseWorkers(count: number, log: Logger, env: { nodeId: string | undefined }): Promise<void> {
  const base = env.nodeId ?? `${process.pid}`;
  let stopping = false;
  const workers = new Map<number, Worker>();
  let crashes = 0;
  let booted = false;

  const fork = (index: number): Worker => {
    const worker = cluster.fork({ SVC_NODE_ID: `${base}-w${index}`, SVC_WORKER_INDEX: String(index) });
    workers.set(index, worker);
    worker.on('exit', (code, signal) => {
      workers.delete(index);
      if (stopping) {
        if (workers.size === 0) process.exit(0);
        return;
      }
      if (!booted) {
        // A worker that cannot boot says why on stderr; the others would fail the same way.
        log.error('worker_failed_boot', { worker: index, code, signal });
        process.exitCode = code === 2 ? 2 : 1;
        stopAll();
        return;
      }
      crashes++;
      const delay = Math.min(30_000, 500 * 2 ** Math.min(crashes, 6));
      log.error('worker_exited', { worker: index, code, signal, restart_in_ms: delay });
      setTimeout(() => {
        if (!stopping) fork(index);
      }, delay).unref();
    });
    return worker;
  };

  const ready = (worker: Worker) =>
    new Promise<boolean>((resolve) => {
      worker.on('message', (m: { op?: string }) => {
        if (m?.op === WORKER_READY) resolve(true);
      });
      worker.once('exit', () => resolve(false));
    });

  const stopAll = () => {
    if (stopping) return;
    stopping = true;
    if (workers.size === 0) process.exit(process.exitCode ?? 0);
    for (const w of workers.values()) w.process.kill('SIGTERM');
  };
  process.on('SIGTERM', stopAll);
  process.on('SIGINT', stopAll);

  if (!(await ready(fork(1)))) return;
  const rest = Array.from({ length: count - 1 }, (_, i) => fork(i + 2));
  if (!(await Promise.all(rest.map(ready))).every(Boolean)) return;
  booted = true;
  log.info('workers_started', { workers: count, primary_pid: process.pid });
}
