import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '..');

function sources(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|mts|js|mjs)$/.test(e.name))
    .map((e) => path.join(e.parentPath, e.name));
}

/** Every module specifier a file imports, re-exports or requires. */
function specifiers(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const found: string[] = [];
  const patterns = [/(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]/g, /import\s*\(\s*['"]([^'"]+)['"]\s*\)/g, /require\s*\(\s*['"]([^'"]+)['"]\s*\)/g, /^\s*import\s*['"]([^'"]+)['"]/gm];
  for (const re of patterns) for (const m of text.matchAll(re)) found.push(m[1]!);
  return found;
}

// Modules that only exist in Node, reachable without the node: prefix.
const NODE_BUILTINS = new Set(['fs', 'path', 'os', 'http', 'https', 'net', 'crypto', 'child_process', 'worker_threads', 'stream', 'url', 'util', 'events', 'zlib', 'tls', 'dns', 'buffer', 'process', 'cluster', 'readline', 'perf_hooks', 'async_hooks', 'vm']);

describe('the host-neutral boundary', () => {
  for (const dir of ['handlers', 'runtime']) {
    it(`${dir}/ imports neither node: modules nor host/${dir === 'runtime' ? ' nor handlers/' : ''}`, () => {
      const offences: string[] = [];
      for (const file of sources(dir)) {
        for (const spec of specifiers(file)) {
          const rel = path.relative(root, file);
          const resolved = spec.startsWith('.') ? path.relative(root, path.resolve(path.dirname(file), spec)) : spec;
          if (spec.startsWith('node:') || NODE_BUILTINS.has(spec.split('/')[0]!)) offences.push(`${rel} → ${spec}`);
          if (resolved === 'host' || resolved.startsWith('host/') || resolved.startsWith(`host${path.sep}`)) offences.push(`${rel} → ${spec}`);
          // The layers point one way: the domain code never reaches up into the REST library.
          if (dir === 'runtime' && (resolved === 'handlers' || resolved.startsWith('handlers/'))) offences.push(`${rel} → ${spec}`);
        }
      }
      expect(offences).toEqual([]);
    });
  }

  it('sees the imports it is meant to police', () => {
    // Guards the scanner itself: host/ does import node: modules.
    const hostImports = sources('host').flatMap(specifiers);
    expect(hostImports.some((s) => s.startsWith('node:'))).toBe(true);
    expect(specifiers(path.join(root, 'handlers/app.ts'))).toContain('../runtime/contracts/errors');
  });
});
