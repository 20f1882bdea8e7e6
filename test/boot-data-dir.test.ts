import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { migratedDataDir } from './support/database';
import { productionHosts, status, until } from './support/production-host';

// The embedded data directory's lock, across real processes of the production host.
const host = productionHosts();

describe('boot of the production host on an embedded data directory', () => {
  // Only the SIGTERM test needs a first boot (it signals inside the initialisation); the others start from a migrated directory.
  it('refuses a second process on the same embedded data directory, naming it and the holder', async () => {
    const dir = migratedDataDir('svc-lock-');
    const first = await host({ SVC_DATA_DIR: dir });
    await first.ready(60_000);

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
    await third.ready(60_000);
  }, 150_000);

  it('a SIGTERM during boot stops the node cleanly once it is up (exit 0), and the next process takes the directory', async () => {
    const dir = path.join(mkdtempSync(path.join(tmpdir(), 'svc-early-')), 'data');
    const first = await host({ SVC_DATA_DIR: dir });
    // A fresh embedded directory takes seconds to initialise: a signal then lands inside the boot.
    await until(async () => (first.events.get('data_dir_initialising') ? true : undefined), 30_000);
    first.proc.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(first.events.get('shutdown_complete')).toBe(1);
    const next = await host({ SVC_DATA_DIR: dir });
    await next.ready(60_000);
  }, 150_000);

  it('takes over a lock whose holder is gone (a crash or a kill)', async () => {
    const dir = migratedDataDir('svc-lock-');
    const first = await host({ SVC_DATA_DIR: dir });
    await first.ready(60_000);
    first.proc.kill('SIGKILL');
    await first.exited;
    const next = await host({ SVC_DATA_DIR: dir });
    await next.ready(60_000);
  }, 150_000);
});
