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
    // Type-only imports count: the context names its live pieces with one.
    expect(specifiers(path.join(root, 'runtime/contracts/context.ts'))).toContain('./live');
  });
});

/** The ground floor of runtime/: every domain folder builds on it, and it on none of them. */
const FLOOR = new Set(['contracts', 'platform', 'schemas']);

/** The runtime/ folder each relative import of a runtime/ file lands in (type-only imports included). */
function runtimeImports(): { file: string; from: string; to: string }[] {
  const out: { file: string; from: string; to: string }[] = [];
  for (const file of sources('runtime')) {
    const [from] = path.relative(path.join(root, 'runtime'), file).split(path.sep);
    for (const spec of specifiers(file)) {
      if (!spec.startsWith('.')) continue;
      const target = path.relative(path.join(root, 'runtime'), path.resolve(path.dirname(file), spec)).split(path.sep);
      if (target[0] === '..' || target.length < 2) continue;
      out.push({ file: path.relative(root, file), from: from!, to: target[0]! });
    }
  }
  return out;
}

describe('the layers of runtime/', () => {
  it('contracts/, platform/ and schemas/ import no domain folder', () => {
    const offences = runtimeImports()
      .filter((i) => FLOOR.has(i.from) && !FLOOR.has(i.to))
      .map((i) => `${i.file} → runtime/${i.to}/`);
    expect(offences).toEqual([]);
  });

  it('no two folders import each other, even through others (the floor counted as one)', () => {
    const node = (folder: string) => (FLOOR.has(folder) ? 'floor' : folder);
    const edges = new Map<string, Set<string>>();
    for (const i of runtimeImports()) {
      const [a, b] = [node(i.from), node(i.to)];
      if (a !== b) edges.set(a, (edges.get(a) ?? new Set()).add(b));
    }
    // Depth-first search; a folder met again while still on the path closes a cycle.
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (folder: string, trail: string[]) => {
      state.set(folder, 'open');
      for (const next of edges.get(folder) ?? []) {
        if (state.get(next) === 'open') cycles.push([...trail.slice(trail.indexOf(next)), folder, next].join(' → '));
        else if (!state.has(next)) visit(next, [...trail, folder]);
      }
      state.set(folder, 'done');
    };
    for (const folder of edges.keys()) if (!state.has(folder)) visit(folder, []);
    expect(cycles).toEqual([]);
    expect(edges.size).toBeGreaterThan(10);
  });
});
