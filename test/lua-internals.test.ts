import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { fengariVersion, internals, internalsOff, WRITTEN_FOR } from '../runtime/lua/fengari-internals';
import { runShapes } from './fixtures/lua-shapes';

/** The same shapes in a child process whose fengari internals are off (the patches are process-wide). */
function unpatchedShapes(): { patched: boolean; warnings: unknown[]; results: Record<string, unknown> } {
  const child = spawnSync(process.execPath, ['--import', 'tsx', 'test/fixtures/lua-shapes.ts'], {
    env: { ...process.env, SVC_FENGARI_UNPATCHED: '1' },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    timeout: 120_000,
  });
  if (child.status !== 0) throw new Error(`shapes child exited ${child.status ?? child.signal}: ${child.stderr}`);
  return JSON.parse(child.stdout);
}

/** Where two records first differ, briefly (views are long texts), or null when they are equal. */
function firstDifference(patched: unknown, unpatched: unknown, path: string): string | null {
  if (typeof patched === 'string' && typeof unpatched === 'string') {
    if (patched === unpatched) return null;
    let i = 0;
    while (patched[i] === unpatched[i]) i++;
    const around = (s: string) => JSON.stringify(s.slice(Math.max(0, i - 40), i + 40));
    return `${path} at character ${i}: patched ${around(patched)}, unpatched ${around(unpatched)}`;
  }
  if (typeof patched !== 'object' || patched === null || typeof unpatched !== 'object' || unpatched === null) {
    return Object.is(patched, unpatched) ? null : `${path}: patched ${JSON.stringify(patched)}, unpatched ${JSON.stringify(unpatched)}`;
  }
  const keys = new Set([...Object.keys(patched), ...Object.keys(unpatched)]);
  for (const key of keys) {
    const found = firstDifference((patched as Record<string, unknown>)[key], (unpatched as Record<string, unknown>)[key], `${path}.${key}`);
    if (found) return found;
  }
  return null;
}

describe('fengari internals against the public API (differential)', () => {
  it('this process runs the internals: fengari is pinned to the release they were written for', () => {
    // Moving the pin means reading fengari's changes against fengari-internals.ts, then moving WRITTEN_FOR.
    const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
    expect(pkg.dependencies.fengari).toBe(WRITTEN_FOR);
    expect(fengariVersion).toBe(WRITTEN_FOR);
    expect(internalsOff).toBeNull();
    expect(internals).not.toBeNull();
  });

  it('every call and return shape gives the same results on both paths', { timeout: 180_000 }, () => {
    const patched = runShapes();
    const unpatched = unpatchedShapes();
    expect(patched.patched).toBe(true);
    expect(unpatched.patched).toBe(false);
    // The unpatched node says so, once; the patched one says nothing.
    expect(patched.warnings).toEqual([]);
    expect(unpatched.warnings).toEqual([
      ['warn', 'fengari_internals_off', { reason: 'forced off by SVC_FENGARI_UNPATCHED=1', consequence: expect.stringContaining('public API') }],
    ]);
    expect(Object.keys(unpatched.results)).toEqual(Object.keys(patched.results));
    expect(firstDifference(patched.results, unpatched.results, 'results')).toBeNull();
  });
});
