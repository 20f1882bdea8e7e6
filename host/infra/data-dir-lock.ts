import { randomBytes } from 'node:crypto';
import { linkSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
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
/** How long contenders may keep taking turns before the boot gives up saying so. */
const RACE_DEADLINE_MS = 5_000;

/** What a lock file says: its holder's pid and the token that names this one lock. */
type Claim = { pid: number; token: string };

/**
 * Takes the embedded database's data directory for this process. Two
 * processes on one PGlite directory each keep their own copy in memory and the
 * last to stop overwrites the other's writes, so a second one must not start.
 *
 * Node has no advisory file locks, so the lock is a file created exclusively
 * holding the owner's pid and a random token. Creating is atomic (a link of a
 * file already written, so nobody reads it half-written); replacing a
 * lock whose owner is gone (a crash, a kill, a container restarted with the
 * same pid) is not, since no file system call removes a file only if it is
 * still the one we read. So a take-over is itself claimed first: the stale
 * lock's token names a guard file that only one contender can create, and
 * that one, holding the guard, moves a fresh lock into place only if the
 * stale one is still there. A guard left by a contender that died mid
 * take-over is stale in turn and taken over the same way. Decision 0051.
 */
export function lockDataDir(dir: string): { release(): void } {
  const file = path.join(dir, LOCK_FILE);
  const mine: Claim = { pid: process.pid, token: randomBytes(12).toString('hex') };
  const deadline = Date.now() + RACE_DEADLINE_MS;
  while (!claim(file, mine, deadline, (holder) => new DataDirLocked(dir, holder))) pause();
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    // Only our own lock: never remove one a successor took over.
    if (read(file)?.token === mine.token) rmSync(file, { force: true });
  };
  process.once('exit', release);
  return { release };
}

/**
 * One attempt at `file`: true when it now holds `mine`, false when another
 * contender is mid take-over (try again shortly). Throws what `busy` makes
 * when a live process holds it.
 */
function claim(file: string, mine: Claim, deadline: number, busy: (holder: number) => Error): boolean {
  if (Date.now() > deadline) throw new Error(`could not lock ${file}: other processes kept racing for it for ${RACE_DEADLINE_MS} ms`);
  if (createExclusive(file, mine)) return true;
  const held = read(file);
  if (!held) return false; // released or replaced between our create and read
  if (held.pid !== process.pid && alive(held.pid)) throw busy(held.pid);
  const guard = `${file}.takeover-${held.token}`;
  try {
    // A guard held by a live contender means that one is replacing the stale lock right now.
    if (!claim(guard, mine, deadline, () => GUARD_BUSY)) return false;
  } catch (err) {
    if (err === GUARD_BUSY) return false;
    throw err;
  }
  try {
    if (read(file)?.token !== held.token) return false; // someone finished the take-over before us
    const fresh = `${file}.${mine.token}.new`;
    writeFileSync(fresh, serialise(mine));
    renameSync(fresh, file);
    return true;
  } finally {
    // Safe to drop once the stale lock is gone: a late contender that takes
    // this guard again finds another token in the lock and backs off.
    rmSync(guard, { force: true });
  }
}

const GUARD_BUSY = new Error('take-over in progress');

/**
 * Creates `file` holding `claim` unless it exists. The content is written to
 * a file of our own first and linked into place, since a lock created empty
 * and then written would look stale (no live pid) to a contender reading it
 * in between.
 */
function createExclusive(file: string, claim: Claim): boolean {
  const own = `${file}.${claim.token}.new`;
  writeFileSync(own, serialise(claim));
  try {
    linkSync(own, file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    rmSync(own, { force: true });
  }
}

function serialise(claim: Claim): string {
  return `${claim.pid} ${claim.token}\n`;
}

/**
 * The claim in a lock file, or null when there is none. A lock written before
 * tokens existed holds only a pid; its text serves as its token.
 */
function read(file: string): Claim | null {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  const [pidText = '', token] = text.trim().split(' ');
  const pid = Number(pidText);
  // The token names a file beside the lock, so only our own shape is taken as one.
  const named = token !== undefined && /^[0-9a-f]{1,64}$/.test(token) ? token : `pid-${pidText.replace(/[^0-9]/g, '').slice(0, 20)}`;
  return { pid: Number.isSafeInteger(pid) && pid > 0 ? pid : 0, token: named };
}

function alive(pid: number): boolean {
  if (pid === 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else, which still means taken.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));
/** A contender mid take-over needs microseconds; the boot may wait that long. */
function pause(): void {
  Atomics.wait(sleeper, 0, 0, 2);
}
