/**
 * How many CPUs this process may really use, for the script lanes' default
 * placement (decision 0058): the CPUs its affinity allows
 * (`availableParallelism()` follows `taskset` and cpusets) and the CPU time
 * its control group grants. A 1-vCPU container on an 8-core host sees eight
 * CPUs but is given one CPU's worth of time by its cgroup quota; seven
 * script workers there would share that one CPU with the main thread.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import type { Settings } from '../../../runtime/contracts/settings';

/** Reads a file's text, or null when it is absent or unreadable (no cgroup, another hierarchy). */
export type ReadText = (file: string) => string | null;

const readText: ReadText = (file) => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
};

/** cgroup v2 `cpu.max` ("max 100000" or "150000 100000"): CPUs' worth of time per period, null when unlimited. */
export function quotaFromCpuMax(text: string): number | null {
  const [quota, period] = text.trim().split(/\s+/);
  if (quota === undefined || quota === 'max') return null;
  return ratio(Number(quota), Number(period ?? 100_000));
}

/** cgroup v1 `cpu.cfs_quota_us` and `cpu.cfs_period_us`; a quota of -1 is unlimited. */
export function quotaFromCfs(quotaUs: string, periodUs: string): number | null {
  return ratio(Number(quotaUs.trim()), Number(periodUs.trim()));
}

function ratio(quota: number, period: number): number | null {
  if (!Number.isFinite(quota) || !Number.isFinite(period) || quota <= 0 || period <= 0) return null;
  return quota / period;
}

/**
 * The tightest CPU quota on the process's control group and its ancestors
 * (a parent's quota binds its children), from `/proc/self/cgroup` and the
 * files under `root`; null when none is set. A container without its own
 * cgroup namespace lists the host's path, which is absent inside it: the
 * walk up then reaches the mount's root, the container's own group.
 */
export function cgroupCpuQuota(read: ReadText = readText, root = '/sys/fs/cgroup'): number | null {
  const membership = read('/proc/self/cgroup') ?? '';
  let tightest: number | null = null;
  const keep = (q: number | null) => {
    if (q !== null && (tightest === null || q < tightest)) tightest = q;
  };
  for (const line of membership.split('\n')) {
    // "hierarchy-id:controllers:path"; the path may itself hold colons.
    const [, controllers, ...rest] = line.split(':');
    if (controllers === undefined || rest.length === 0) continue;
    const group = rest.join(':');
    if (controllers === '') {
      // v2 (the unified hierarchy): mounted at the root, or beside v1 under `unified`.
      for (const base of [root, path.join(root, 'unified')]) {
        for (const dir of upwards(base, group)) {
          const text = read(path.join(dir, 'cpu.max'));
          if (text !== null) keep(quotaFromCpuMax(text));
        }
      }
    } else if (controllers.split(',').includes('cpu')) {
      for (const mount of [path.join(root, controllers), path.join(root, 'cpu'), path.join(root, 'cpu,cpuacct')]) {
        for (const dir of upwards(mount, group)) {
          const quota = read(path.join(dir, 'cpu.cfs_quota_us'));
          const period = read(path.join(dir, 'cpu.cfs_period_us'));
          if (quota !== null && period !== null) keep(quotaFromCfs(quota, period));
        }
      }
    }
  }
  return tightest;
}

/** `base/group`, then each parent up to `base`. */
function upwards(base: string, group: string): string[] {
  const dirs: string[] = [];
  let rel = path.posix.normalize(`/${group}`);
  for (;;) {
    dirs.push(path.join(base, rel));
    if (rel === '/') return dirs;
    rel = path.posix.dirname(rel);
  }
}

/**
 * CPUs the process may use: its affinity's count, lowered to the cgroup
 * quota rounded up (1.5 CPUs' worth of time keeps two threads busy part of
 * the time; 0.5 is still one CPU). At least one.
 */
export function usableCpus(affinity = availableParallelism(), quota: number | null = cgroupCpuQuota()): number {
  return Math.max(1, quota === null ? affinity : Math.min(affinity, Math.ceil(quota - 1e-9)));
}

/**
 * `match_workers`, or one per usable CPU but the one the main thread keeps
 * (decision 0058), counted by what the process may really use (affinity and
 * cgroup quota) and, in a fleet of `workers` host processes on one machine,
 * by its share of those CPUs. One CPU still gets one worker, where the
 * scripts keep their own thread, their memory ceiling and the awaited
 * bindings (`game.economy`), which the main thread cannot offer. Two CPUs
 * get two workers, not one: a tick waits behind its lane's batch and its
 * lane's collections, and two lanes halve both while the main thread needs
 * about half a core at the load two cores hold (decision 0079).
 */
export function scriptWorkers(settings: Pick<Settings, 'match_workers'> & Partial<Pick<Settings, 'workers'>>, cpus: () => number = usableCpus): number {
  if (settings.match_workers !== undefined) return settings.match_workers;
  const usable = cpus();
  const processes = settings.workers === 'auto' ? usable : (settings.workers ?? 1);
  const share = Math.max(1, Math.floor(usable / processes));
  return share === 1 ? 1 : Math.max(2, share - 1);
}
