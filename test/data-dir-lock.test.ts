import { type ChildProcess, fork, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DataDirLocked, lockDataDir } from '../host/infra/data-dir-lock';

// The embedded data directory's lock under contention: three processes start
// at the same instant on a directory whose lock names a dead process, and
// exactly one may come out holding it, every round.

const ROUNDS = 500;
const CONTENDERS = 3;

type Answer = { dir: string; held: boolean; error: string | null };

function contender(): Promise<{ child: ChildProcess; next(): Promise<Answer> }> {
  const child = fork(path.join(import.meta.dirname, 'fixtures/lock-contender.ts'), [], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting: ((a: Answer) => void)[] = [];
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.on('message', (m: Answer | { ready: true }) => {
      if ('ready' in m) resolve({ child, next: () => new Promise((r) => waiting.push(r)) });
      else waiting.shift()?.(m);
    });
  });
}

/** The pid of a process that has already exited: what a crash leaves in the lock. */
function deadPid(): number {
  const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(gone.stdout);
}

const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

describe('the data directory lock', () => {
  it(`gives a lock left by a dead process to exactly one of ${CONTENDERS} processes starting at the same instant, ${ROUNDS} rounds`, async () => {
    const racers = await Promise.all(Array.from({ length: CONTENDERS }, contender));
    children.push(...racers.map((r) => r.child));
    const root = mkdtempSync(path.join(tmpdir(), 'svc-lock-race-'));
    const dead = deadPid();
    const twoHolders: number[] = [];
    const noHolder: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const dir = path.join(root, String(round));
      mkdirSync(dir);
      // Odd rounds race on an empty directory, even rounds on a stale lock: both must end with one holder.
      if (round % 2 === 0) writeFileSync(path.join(dir, 'svc.lock'), `${dead}\n`);
      const at = Date.now() + 15;
      const answers = await Promise.all(
        racers.map((r) => {
          const answer = r.next();
          r.child.send({ dir, at });
          return answer;
        }),
      );
      const holders = answers.filter((a) => a.held).length;
      if (holders > 1) twoHolders.push(round);
      if (holders === 0) noHolder.push(round);
      // The losers were told who holds it, not left racing.
      for (const a of answers) if (!a.held) expect(a.error).toBe('DataDirLocked');
    }
    expect({ twoHolders, noHolder }).toEqual({ twoHolders: [], noHolder: [] });
  }, 240_000);

  it('takes over a lock whose holder is gone, names a live holder, and leaves nothing behind but its own lock', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-lock-'));
    writeFileSync(path.join(dir, 'svc.lock'), `${deadPid()}\n`);
    const lock = lockDataDir(dir);
    expect(readdirSync(dir)).toEqual(['svc.lock']);
    lock.release();
    expect(readdirSync(dir)).toEqual([]);
  });

  it('gets past a contender that died in the middle of a take-over', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-lock-'));
    const dead = deadPid();
    writeFileSync(path.join(dir, 'svc.lock'), `${dead} 00aa\n`);
    writeFileSync(path.join(dir, 'svc.lock.takeover-00aa'), `${dead} 00bb\n`);
    const lock = lockDataDir(dir);
    expect(readdirSync(dir)).toEqual(['svc.lock']);
    lock.release();
  });

  it('refuses a directory held by a live process, naming it', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-lock-'));
    const holder = process.ppid; // alive for as long as this test runs
    writeFileSync(path.join(dir, 'svc.lock'), `${holder} 0123456789abcdef\n`);
    let refused: unknown;
    try {
      lockDataDir(dir);
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(DataDirLocked);
    expect((refused as DataDirLocked).holder).toBe(holder);
  });
});
