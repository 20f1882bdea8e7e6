import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manifestProblems } from '../runtime/extensions/extension';
import { expectOpsDenied, OPS_SECRET, opsGet } from './support/ops';
import { startTestServer, type TestServer } from './support/server';

/** Operator screens declared by extension manifests: checked at boot, listed for the console. */

const action = (method: string) => ({ method, capability: 'read', handle: () => ({}) });
const manifest = (consolePart: unknown, extra: Record<string, unknown> = {}) => ({
  name: 'vip',
  version: '1.0.0',
  seams: ['actions', 'console'],
  actions: { summary: action('GET'), grant: action('POST') },
  console: consolePart,
  ...extra,
});

describe('the console seam of a manifest', () => {
  it('accepts screens over GET actions', () => {
    expect(manifestProblems(manifest({ screens: [{ id: 'members', title: 'VIP members', action: 'summary', fields: ['tier'] }, { id: 'all', title: 'All', action: 'summary' }] }))).toEqual([]);
  });

  it('names every problem of a bad screen list', () => {
    expect(manifestProblems(manifest({ screens: [] }))).toEqual(['console.screens must be a non-empty list']);
    expect(manifestProblems(manifest({}))).toEqual(['console.screens must be a non-empty list']);
    expect(
      manifestProblems(
        manifest({
          screens: [
            { id: 'a b', title: 'x', action: 'summary' },
            { id: 'one', title: '', action: 'grant' },
            { id: 'one', title: 'Twice', action: 'missing', fields: ['ok', 'not ok'] },
          ],
        }),
      ),
    ).toEqual([
      'console.screens[0].id must be 1-64 of A-Z a-z 0-9 _ -',
      'console.screens[1].title must be 1-64 printable characters',
      'console.screens[1].action must name a GET action of this extension',
      'console.screens[2].id one is used twice',
      'console.screens[2].action must name a GET action of this extension',
      'console.screens[2].fields must be at most 16 names of A-Z a-z 0-9 _ -',
    ]);
  });

  it('keeps the seam list honest both ways', () => {
    expect(manifestProblems(manifest({ screens: [{ id: 'a', title: 'A', action: 'summary' }] }, { seams: ['actions'] }))).toEqual(['provides console without declaring it in seams']);
    expect(manifestProblems(manifest(undefined))).toEqual(['declares seam console without providing it']);
  });
});

describe('GET /ops/console/screens', () => {
  let s: TestServer;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'console-screens-'));
    writeFileSync(
      path.join(dir, 'vip.mjs'),
      `export default { name: 'vip', version: '2.0.0', seams: ['actions', 'console'],
        actions: { summary: { method: 'GET', capability: 'read', handle: () => ({ members: 1 }) } },
        console: { screens: [{ id: 'members', title: 'VIP members', action: 'summary', fields: ['tier'] }, { id: 'all', title: 'All VIPs', action: 'summary' }] } };\n`,
    );
    writeFileSync(path.join(dir, 'plain.mjs'), `export default { name: 'plain', version: '1', seams: [] };\n`);
    s = await startTestServer({ ops_secret: OPS_SECRET, extensions: [path.join(dir, 'plain.mjs'), path.join(dir, 'vip.mjs')] });
  });
  afterAll(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists each declared screen with its extension, and features report the console seam', async () => {
    const res = await opsGet(s, '/console/screens');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: [
        { extension: 'vip', id: 'members', title: 'VIP members', action: 'summary', fields: ['tier'] },
        { extension: 'vip', id: 'all', title: 'All VIPs', action: 'summary', fields: [] },
      ],
    });
    const features = (await opsGet(s, '/features')).body.data;
    expect(features.extensions.find((e: { name: string }) => e.name === 'vip').capabilities).toContainEqual({ name: 'console', enabled: true });
    expect(features.extensions.find((e: { name: string }) => e.name === 'plain').capabilities).toEqual([]);
    // The core's own console capability follows the setting (off here).
    expect(features.core.capabilities).toContainEqual({ name: 'console', enabled: false });
  });

  it('is an ops read like any other: the credential decides', async () => {
    expectOpsDenied(await opsGet(s, '/console/screens', null));
    expectOpsDenied(await opsGet(s, '/console/screens', 'not-the-secret-not-the-secret-0000'));
  });
});
