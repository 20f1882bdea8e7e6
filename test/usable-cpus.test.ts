import { describe, expect, it } from 'vitest';
import { cgroupCpuQuota, quotaFromCfs, quotaFromCpuMax, scriptWorkers, usableCpus } from '../host/realtime/lanes/usable-cpus';
import { workerCount } from '../host/fleet/workers';

/** A file system of given texts, for the cgroup readers. */
const files = (texts: Record<string, string>) => (file: string) => texts[file] ?? null;

describe('the CPU quota of a control group', () => {
  it('reads cgroup v2 cpu.max', () => {
    expect(quotaFromCpuMax('max 100000\n')).toBeNull();
    expect(quotaFromCpuMax('100000 100000\n')).toBe(1);
    expect(quotaFromCpuMax('150000 100000')).toBe(1.5);
    expect(quotaFromCpuMax('50000')).toBe(0.5);
    expect(quotaFromCpuMax('')).toBeNull();
    expect(quotaFromCpuMax('junk 100000')).toBeNull();
  });

  it('reads cgroup v1 cfs quota and period; -1 is unlimited', () => {
    expect(quotaFromCfs('-1\n', '100000\n')).toBeNull();
    expect(quotaFromCfs('200000\n', '100000\n')).toBe(2);
    expect(quotaFromCfs('25000', '50000')).toBe(0.5);
    expect(quotaFromCfs('100000', '0')).toBeNull();
  });

  it('finds a v2 quota on the process group or any ancestor, the tightest winning', () => {
    const read = files({
      '/proc/self/cgroup': '0::/kubepods/pod1/ctr\n',
      '/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max': 'max 100000\n',
      '/sys/fs/cgroup/kubepods/pod1/cpu.max': '100000 100000\n',
      '/sys/fs/cgroup/kubepods/cpu.max': '400000 100000\n',
    });
    expect(cgroupCpuQuota(read)).toBe(1);
  });

  it('inside a container whose cgroup path is the host one, falls back to the mount root', () => {
    const read = files({ '/proc/self/cgroup': '0::/system.slice/docker-abc.scope\n', '/sys/fs/cgroup/cpu.max': '100000 100000\n' });
    expect(cgroupCpuQuota(read)).toBe(1);
  });

  it('finds a v1 quota under the cpu controller, whatever controllers share its hierarchy', () => {
    const read = files({
      '/proc/self/cgroup': '4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n',
      '/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us': '150000\n',
      '/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us': '100000\n',
    });
    expect(cgroupCpuQuota(read)).toBe(1.5);
  });

  it('is null without a quota or without cgroup files', () => {
    expect(cgroupCpuQuota(files({}))).toBeNull();
    expect(cgroupCpuQuota(files({ '/proc/self/cgroup': '1:cpu:/\n0::/\n', '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' }))).toBeNull();
  });
});

describe('the CPUs a process may use', () => {
  it('is its affinity lowered to the quota rounded up, at least one', () => {
    expect(usableCpus(8, null)).toBe(8);
    expect(usableCpus(8, 1)).toBe(1);
    expect(usableCpus(8, 1.5)).toBe(2);
    expect(usableCpus(8, 0.5)).toBe(1);
    expect(usableCpus(2, 4)).toBe(2);
    expect(usableCpus(1, null)).toBe(1);
  });

  it('answers on this machine', () => {
    expect(usableCpus()).toBeGreaterThanOrEqual(1);
  });
});

describe('the default script placement', () => {
  it('keeps one CPU for the main thread, but two CPUs get two workers and one CPU still gets a worker', () => {
    expect(scriptWorkers({}, () => 8)).toBe(7);
    expect(scriptWorkers({}, () => 3)).toBe(2);
    expect(scriptWorkers({}, () => 2)).toBe(2);
    expect(scriptWorkers({}, () => 1)).toBe(1);
  });

  it('counts a host process of a fleet by its share of the CPUs', () => {
    expect(scriptWorkers({ workers: 'auto' }, () => 8)).toBe(1);
    expect(scriptWorkers({ workers: 2 }, () => 2)).toBe(1);
    expect(scriptWorkers({ workers: 2 }, () => 8)).toBe(3);
    expect(scriptWorkers({ workers: 4 }, () => 2)).toBe(1);
    expect(scriptWorkers({ workers: 1 }, () => 2)).toBe(2);
  });

  it('leaves match_workers alone when it is set', () => {
    expect(scriptWorkers({ match_workers: 0 }, () => 8)).toBe(0);
    expect(scriptWorkers({ match_workers: 3 }, () => 1)).toBe(3);
    expect(scriptWorkers({ match_workers: 3, workers: 'auto' }, () => 8)).toBe(3);
  });
});

describe('the number of host processes', () => {
  it('reads workers: "auto" as one per usable CPU, so a one-CPU container runs one process', () => {
    expect(workerCount({ workers: 'auto' }, () => 1)).toBe(1);
    expect(workerCount({ workers: 'auto' }, () => 4)).toBe(4);
    expect(workerCount({ workers: 'auto' })).toBe(usableCpus());
    expect(workerCount({ workers: 2 }, () => 1)).toBe(2);
  });
});
