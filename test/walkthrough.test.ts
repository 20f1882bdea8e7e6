import { exec } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { root, startHost, type Child as HostProcess } from '../bench/_children';

// The README's five-minute walkthrough, command by command, against the
// production host on a new embedded data directory: what a stranger types
// after cloning the repository must work.
const run = promisify(exec);
const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
const section = /<!-- walkthrough[^>]*-->([\s\S]*?)<!-- \/walkthrough -->/.exec(readme)?.[1] ?? '';
const commands = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.trim().split('\n'));

let host: HostProcess;
afterAll(async () => {
  await host?.stop();
});

describe('the README walkthrough', () => {
  it('has commands to follow', () => {
    expect(commands.length).toBeGreaterThanOrEqual(3);
  });

  it('works as written', async () => {
    host = await startHost({ SVC_DATA_DIR: path.join(mkdtempSync(path.join(tmpdir(), 'svc-walk-')), 'data') });
    await host.ready(90_000);
    const outputs: string[] = [];
    for (const command of commands) {
      // The walkthrough's server is on :8084; this one is wherever the test put it.
      const line = command.replaceAll('localhost:8084', `127.0.0.1:${host.port}`);
      const { stdout, stderr } = await run(line, { cwd: root, env: { ...process.env, SVC_URL: host.url }, timeout: 120_000, shell: '/bin/bash' });
      outputs.push(stdout + stderr);
    }
    const registered = outputs.slice(0, 2).map((o) => JSON.parse(o));
    for (const r of registered) expect(r).toMatchObject({ player_id: expect.any(String), access_token: expect.any(String) });
    const play = outputs[2]!;
    for (const name of ['alice', 'bob']) {
      expect(play).toContain(`${name}: signed in`);
      expect(play).toMatch(new RegExp(`${name}: match finished, (won|lost|a draw)`));
    }
    // Exactly one winner, unless the clock ran out level.
    const won = (play.match(/: match finished, won/g) ?? []).length;
    const lost = (play.match(/: match finished, lost/g) ?? []).length;
    expect(won + lost === 2 ? won === 1 && lost === 1 : /a draw/.test(play)).toBe(true);
  }, 180_000);
});
