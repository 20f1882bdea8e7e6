import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Another live process owns the embedded database's data directory. */
export class DataDirLocked extends Error {
  constructor(
    readonly dir: string,
    readonly holder: number,
  ) {
    super(`the data directory ${dir} is in use by process ${holder}; stop it or set SVC_DATA_DIR to another directory`);
    this.name = 'DataDirLocked';
  }
}

const LOCK_FILE = 'svc.lock';

/**
 * Takes the embedded database's data directory for this process. Two
 * processes on one PGlite directory each keep their own copy in memory and the
 * last to stop overwrites the other's writes, so a second one must not start.
 * Node has no advisory file locks; a lock file created exclusively, holding
 * the owner's pid, does the job: a lock whose owner is gone (a crash, a kill,
 * a container restarted with the same pid) is taken over.
 */
export function lockDataDir(dir: string): { release(): void } {
  const file = path.join(dir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      writeFileSync(file, `${process.pid}\n`, { flag: 'wx' });
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        // Only our own lock: never remove one a successor took over.
        if (holderOf(file) === process.pid) rmSync(file, { force: true });
      };
      process.once('exit', release);
      return { release };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = holderOf(file);
    if (holder !== null && holder !== process.pid && alive(holder)) throw new DataDirLocked(dir, holder);
    rmSync(file, { force: true });
  }
  throw new Error(`could not lock the data directory ${dir}: another process keeps racing for it`);
}

function holderOf(file: string): number | null {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
    return Number.isSafeInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else, which still means taken.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
