import { inflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import type { JsonValue, ScriptSource } from '../runtime/lua/host-interface';
import { CHUNK_FILE_MAX_BYTES, encodeChunk, FileTerrain, HeightmapTerrain, TerrainStore, terrainProvider, type TerrainProvider } from '../host/realtime/world/terrain';

const NO_FILES: ScriptSource = { read: () => null };

function memorySource(files: Record<string, string>): ScriptSource & { reads: string[] } {
  const reads: string[] = [];
  return {
    reads,
    read: (p) => {
      reads.push(p);
      return files[p] ?? null;
    },
  };
}

function provider(declared: JsonValue | undefined, source: ScriptSource = NO_FILES, seed = 1): TerrainProvider {
  const result = terrainProvider(declared, source, seed);
  if (!result.ok) throw new Error(`refused: ${result.problem}`);
  if (!result.provider) throw new Error('no provider');
  return result.provider;
}

function problemOf(declared: JsonValue, seed = 1): string {
  const result = terrainProvider(declared, NO_FILES, seed);
  if (result.ok) throw new Error(`accepted ${JSON.stringify(declared)}`);
  return result.problem;
}

function decode(data: string | null): Uint8Array {
  if (data === null) throw new Error('no chunk');
  return new Uint8Array(inflateSync(Buffer.from(data, 'base64')));
}

/** Row y of a heightmap chunk of side r. */
function row(bytes: Uint8Array, r: number, y: number): number[] {
  return [...bytes.subarray(y * r, y * r + r)];
}

function column(bytes: Uint8Array, r: number, x: number): number[] {
  return Array.from({ length: r }, (_, y) => bytes[y * r + x]!);
}

function maxStep(a: number[], b: number[]): number {
  return Math.max(...a.map((v, i) => Math.abs(v - b[i]!)));
}

/** Counts the provider's work, to see what the store keeps. */
function counting(inner: TerrainProvider): TerrainProvider & { calls: string[] } {
  const calls: string[] = [];
  return { module: inner.module, calls, chunk: (cx, cy) => (calls.push(`${cx},${cy}`), inner.chunk(cx, cy)) };
}

describe('encodeChunk', () => {
  it('is base64 of a zlib stream that inflates back to the bytes', () => {
    const bytes = new Uint8Array(1000).map((_, i) => (i * 7) % 251);
    const data = encodeChunk(bytes);
    expect(data).toMatch(/^[A-Za-z0-9+/]+=*$/);
    // RFC 1950 header: CM = 8 (deflate), and the first two bytes a multiple of 31.
    const raw = Buffer.from(data, 'base64');
    expect(raw[0]! & 0x0f).toBe(8);
    expect((raw[0]! * 256 + raw[1]!) % 31).toBe(0);
    expect(decode(data)).toEqual(bytes);
    expect(decode(encodeChunk(new Uint8Array(0)))).toEqual(new Uint8Array(0));
  });
});

describe('terrainProvider declarations', () => {
  it('reads no declaration as no terrain', () => {
    expect(terrainProvider(undefined, NO_FILES, 1)).toEqual({ ok: true, provider: null });
    expect(terrainProvider(null, NO_FILES, 1)).toEqual({ ok: true, provider: null });
  });

  it('builds each provider with its defaults', () => {
    const height = provider({ module: 'heightmap' }, NO_FILES, 42);
    expect(height).toBeInstanceOf(HeightmapTerrain);
    expect(height).toMatchObject({ module: 'heightmap', resolution: 16, amplitude: 255, seed: 42 });
    // An empty Lua table marshals as {}.
    expect(provider({ module: 'heightmap', args: {} })).toMatchObject({ resolution: 16 });
    const files = provider({ module: 'files' });
    expect(files).toBeInstanceOf(FileTerrain);
    expect(files).toMatchObject({ module: 'files', dir: 'terrain' });
    expect(provider({ module: 'files', args: { dir: 'maps/level_1' } })).toMatchObject({ dir: 'maps/level_1' });
    expect(provider({ module: 'heightmap', args: { resolution: 1, amplitude: 1, seed: -5 } })).toMatchObject({ resolution: 1, amplitude: 1, seed: -5 });
    expect(provider({ module: 'heightmap', args: { resolution: 256, amplitude: 255 } })).toMatchObject({ resolution: 256 });
  });

  it('refuses a declaration that is not a table, naming terrain_provider', () => {
    for (const bad of ['heightmap', 5, true, [{ module: 'heightmap' }]] as JsonValue[]) {
      expect(problemOf(bad), JSON.stringify(bad)).toMatch(/^terrain_provider must return a table/);
    }
  });

  it('refuses a missing, non-string or unknown module, naming module', () => {
    expect(problemOf({})).toMatch(/module must be a string.*not nothing/);
    expect(problemOf({ args: { resolution: 8 } })).toMatch(/module must be a string/);
    expect(problemOf({ module: 7 })).toMatch(/module must be a string.*not 7/);
    expect(problemOf({ module: ['heightmap'] })).toMatch(/module must be a string/);
    expect(problemOf({ module: 'perlin' })).toMatch(/module 'perlin' is unknown \(known: heightmap, files\)/);
    // Only the providers themselves are modules, not what an object inherits.
    expect(problemOf({ module: 'toString' })).toMatch(/module 'toString' is unknown/);
    expect(problemOf({ module: 'Heightmap' })).toMatch(/module 'Heightmap' is unknown/);
  });

  it('refuses unknown keys and unknown args by name', () => {
    expect(problemOf({ module: 'heightmap', arg: { seed: 1 } })).toMatch(/unknown key 'arg'/);
    expect(problemOf({ module: 'heightmap', args: { resolutoin: 32 } })).toMatch(/heightmap: unknown arg 'resolutoin' \(known: resolution, amplitude, seed\)/);
    expect(problemOf({ module: 'files', args: { directory: 'x' } })).toMatch(/files: unknown arg 'directory' \(known: dir\)/);
  });

  it('refuses args that are not a table', () => {
    for (const bad of ['x', 3, [1, 2], true] as JsonValue[]) {
      expect(problemOf({ module: 'heightmap', args: bad }), JSON.stringify(bad)).toMatch(/heightmap: args must be a table/);
    }
  });

  it('refuses every heightmap arg of the wrong type or range, naming the arg', () => {
    const cases: [string, JsonValue][] = [
      ['resolution', 0],
      ['resolution', 257],
      ['resolution', -16],
      ['resolution', 1.5],
      ['resolution', '16'],
      ['resolution', true],
      ['resolution', { n: 16 }],
      ['amplitude', 0],
      ['amplitude', 256],
      ['amplitude', 2.5],
      ['amplitude', '255'],
      ['seed', 1.5],
      ['seed', 'abc'],
      ['seed', 2 ** 60],
      ['seed', [1]],
    ];
    for (const [name, value] of cases) {
      const problem = problemOf({ module: 'heightmap', args: { [name]: value } });
      expect(problem, `${name} = ${JSON.stringify(value)}`).toMatch(new RegExp(`^terrain_provider heightmap: ${name} must be an integer from`));
      expect(problem).toContain(JSON.stringify(value).slice(0, 10));
    }
  });

  it('refuses every unsafe files dir, naming dir', () => {
    const bads: JsonValue[] = [5, true, ['terrain'], '', '/terrain', '/', '..', '../terrain', 'a/../b', 'a/..', '.', './terrain', 'a/./b', 'a//b', 'terrain/', 'a\\..\\b', 'a\u0000b', 'a\nb', 'a\tb', 'a\u007fb', 'a\u0085b'];
    for (const bad of bads) {
      expect(problemOf({ module: 'files', args: { dir: bad } }), JSON.stringify(bad)).toMatch(/^terrain_provider files: dir .*must/);
    }
    // Dots inside a name are not segments of their own.
    expect(provider({ module: 'files', args: { dir: '..maps/v1.2/...x' } })).toMatchObject({ dir: '..maps/v1.2/...x' });
  });

  it('cuts a large offending value short in the problem', () => {
    const problem = problemOf({ module: 'heightmap', args: { seed: 'x'.repeat(5000) } });
    expect(problem.length).toBeLessThan(200);
  });
});

describe('heightmap', () => {
  const height = (args: JsonValue, seed = 7) => provider({ module: 'heightmap', args }, NO_FILES, seed);

  it('gives resolution² heights within the amplitude', () => {
    for (const resolution of [1, 5, 16, 64]) {
      expect(height({ resolution }).chunk(3, 4)).toHaveLength(resolution * resolution);
    }
    const low = new Set<number>();
    for (let cx = 0; cx < 8; cx++) for (const h of height({ amplitude: 3 }).chunk(cx, 0)!) low.add(h);
    expect(Math.max(...low)).toBeLessThanOrEqual(3);
    // Not flat: the noise spans a good part of its range over a few chunks.
    expect(low.size).toBeGreaterThanOrEqual(2);
    const full: number[] = [];
    for (let cx = 0; cx < 8; cx++) full.push(...height({}).chunk(cx, 2)!);
    expect(Math.max(...full) - Math.min(...full)).toBeGreaterThan(40);
  });

  it('gives the same bytes for the same seed, whichever way the seed arrives', () => {
    const a = height({ seed: 99 }, 1).chunk(2, 3);
    expect(height({ seed: 99 }, 1).chunk(2, 3)).toEqual(a);
    expect(height({ seed: 99 }, 12345).chunk(2, 3)).toEqual(a);
    expect(height({}, 99).chunk(2, 3)).toEqual(a);
  });

  it('changes with the seed, including its high bits', () => {
    const base = height({}, 1).chunk(0, 0);
    expect(height({}, 2).chunk(0, 0)).not.toEqual(base);
    expect(height({}, 1 + 2 ** 32).chunk(0, 0)).not.toEqual(base);
    expect(height({}, -1).chunk(0, 0)).not.toEqual(base);
    // And with the place: two chunks of one world differ.
    expect(height({}, 1).chunk(1, 0)).not.toEqual(base);
  });

  it('joins neighbouring chunks without seams', () => {
    for (const seed of [1, 2, 3, 1000, -77]) {
      const hm = height({}, seed);
      for (let cx = 0; cx < 4; cx++) {
        for (let cy = 0; cy < 4; cy++) {
          const here = hm.chunk(cx, cy)!;
          const east = hm.chunk(cx + 1, cy)!;
          const south = hm.chunk(cx, cy + 1)!;
          // At most about 5 % of the amplitude per cell, by construction; a seam would be up to 255.
          expect(maxStep(column(here, 16, 15), column(east, 16, 0)), `seed ${seed} (${cx},${cy}) east`).toBeLessThanOrEqual(16);
          expect(maxStep(row(here, 16, 15), row(south, 16, 0)), `seed ${seed} (${cx},${cy}) south`).toBeLessThanOrEqual(16);
        }
      }
    }
  });

  it('is one function of world cells: a chunk of side 32 is four chunks of side 16 stitched', () => {
    const big = height({ resolution: 32 }).chunk(1, 2)!;
    const small = height({ resolution: 16 });
    for (let y = 0; y < 32; y++) {
      for (let x = 0; x < 32; x++) {
        const part = small.chunk(2 + (x >> 4), 4 + (y >> 4))!;
        expect(big[y * 32 + x], `cell ${x},${y}`).toBe(part[(y & 15) * 16 + (x & 15)]);
      }
    }
  });

  it('computes each chunk cell as the per-cell noise does', () => {
    for (const [resolution, cx, cy] of [[16, 3, 5], [7, 2, 9], [1, 40, 3], [100, 1, 0], [16, -2, -1]] as [number, number, number][]) {
      const hm = height({ resolution, amplitude: 200 }) as HeightmapTerrain;
      const bytes = hm.chunk(cx, cy);
      for (let y = 0; y < resolution; y++) {
        for (let x = 0; x < resolution; x++) {
          expect(bytes[y * resolution + x], `r ${resolution} chunk ${cx},${cy} cell ${x},${y}`).toBe(Math.round(hm.height(cx * resolution + x, cy * resolution + y) * 200));
        }
      }
    }
  });

  it('joins single-cell chunks too', () => {
    const hm = height({ resolution: 1 });
    for (let cx = 0; cx < 40; cx++) {
      expect(Math.abs(hm.chunk(cx, 5)![0]! - hm.chunk(cx + 1, 5)![0]!)).toBeLessThanOrEqual(16);
    }
  });

  it('computes a 16×16 chunk in well under a millisecond', () => {
    const hm = height({});
    for (let i = 0; i < 50; i++) hm.chunk(i, 0);
    const count = 500;
    const started = performance.now();
    for (let i = 0; i < count; i++) hm.chunk(i % 100, Math.floor(i / 100));
    // A loose bound (typical is some tens of microseconds) so that a busy machine does not fail it.
    expect((performance.now() - started) / count).toBeLessThan(0.5);
  });
});

describe('files', () => {
  it('reads <dir>/<cx>_<cy>.chunk as UTF-8 bytes, null when absent', () => {
    const source = memorySource({ 'terrain/2_3.chunk': 'héllo', 'maps/a/0_0.chunk': '' });
    const files = provider({ module: 'files' }, source);
    expect(files.chunk(2, 3)).toEqual(new Uint8Array(Buffer.from('héllo', 'utf8')));
    expect(files.chunk(3, 2)).toBeNull();
    expect(source.reads).toEqual(['terrain/2_3.chunk', 'terrain/3_2.chunk']);
    const custom = provider({ module: 'files', args: { dir: 'maps/a' } }, source);
    expect(custom.chunk(0, 0)).toEqual(new Uint8Array(0));
    expect(custom.chunk(2, 3)).toBeNull();
    expect(files.skipped).toBe(0);
  });

  it('treats a file over 1 MiB as absent and counts it, at the exact limit', () => {
    const source = memorySource({
      'terrain/0_0.chunk': 'a'.repeat(CHUNK_FILE_MAX_BYTES),
      'terrain/1_0.chunk': 'a'.repeat(CHUNK_FILE_MAX_BYTES + 1),
      // Under the limit in characters, over it in UTF-8 bytes.
      'terrain/2_0.chunk': 'é'.repeat(CHUNK_FILE_MAX_BYTES / 2 + 1),
    });
    const files = provider({ module: 'files' }, source) as FileTerrain;
    expect(files.chunk(0, 0)).toHaveLength(CHUNK_FILE_MAX_BYTES);
    expect(files.skipped).toBe(0);
    expect(files.chunk(1, 0)).toBeNull();
    expect(files.skipped).toBe(1);
    expect(files.lastSkipped).toContain('terrain/1_0.chunk');
    expect(files.chunk(2, 0)).toBeNull();
    expect(files.skipped).toBe(2);
    expect(files.lastSkipped).toContain('terrain/2_0.chunk');
  });

  it('never throws when the source does', () => {
    const source: ScriptSource = {
      read: () => {
        throw new Error('EISDIR');
      },
    };
    const files = provider({ module: 'files' }, source) as FileTerrain;
    expect(files.chunk(0, 0)).toBeNull();
    expect(files.skipped).toBe(1);
    expect(files.lastSkipped).toContain('EISDIR');
    expect(new TerrainStore(files, 4).get(0, 0)).toBeNull();
  });
});

describe('TerrainStore', () => {
  it('answers the encoded chunk in the grid and null outside it', () => {
    const hm = provider({ module: 'heightmap' });
    const store = new TerrainStore(hm, 4);
    expect(decode(store.get(3, 0))).toEqual(hm.chunk(3, 0));
    expect(decode(store.get(0, 3))).toEqual(hm.chunk(0, 3));
    for (const [cx, cy] of [[-1, 0], [0, -1], [4, 0], [0, 4], [1.5, 0], [0, NaN], [Infinity, 0]] as [number, number][]) {
      expect(store.get(cx, cy), `${cx},${cy}`).toBeNull();
    }
  });

  it('answers null where the provider has no chunk', () => {
    const store = new TerrainStore(provider({ module: 'files' }, memorySource({ 'terrain/1_1.chunk': 'x' })), 4);
    expect(store.get(0, 0)).toBeNull();
    expect(decode(store.get(1, 1))).toEqual(new Uint8Array([0x78]));
  });

  it('computes each chunk once, absent ones included', () => {
    const source = memorySource({ 'terrain/1_1.chunk': 'x' });
    const store = new TerrainStore(provider({ module: 'files' }, source), 4);
    for (let i = 0; i < 3; i++) {
      store.get(1, 1);
      store.get(2, 2);
    }
    expect(source.reads).toEqual(['terrain/1_1.chunk', 'terrain/2_2.chunk']);
  });

  it('drops the least recently used chunk past its entry cap', () => {
    const hm = counting(provider({ module: 'heightmap' }));
    const store = new TerrainStore(hm, 8, { entries: 2 });
    store.get(0, 0);
    store.get(1, 0);
    store.get(0, 0); // (1, 0) is now the oldest
    store.get(2, 0);
    expect(store.size).toBe(2);
    hm.calls.length = 0;
    store.get(0, 0);
    store.get(2, 0);
    expect(hm.calls).toEqual([]);
    store.get(1, 0);
    expect(hm.calls).toEqual(['1,0']);
  });

  it('drops chunks past its character budget', () => {
    const hm = counting(provider({ module: 'heightmap' }));
    const one = new TerrainStore(hm, 8).get(0, 0)!.length;
    const store = new TerrainStore(hm, 8, { chars: one * 2 + one / 2 });
    for (let cx = 0; cx < 4; cx++) store.get(cx, 0);
    expect(store.size).toBeLessThanOrEqual(2);
    hm.calls.length = 0;
    store.get(3, 0);
    expect(hm.calls).toEqual([]);
    store.get(0, 0);
    expect(hm.calls).toEqual(['0,0']);
  });

  it('preloads the readable in-grid entries and counts them', () => {
    const hm = counting(provider({ module: 'heightmap' }));
    const store = new TerrainStore(hm, 4);
    const list: JsonValue = [
      { cx: 0, cy: 0 },
      { x: 1, y: 2 },
      { cx: 3, cy: 3, x: 9, y: 9 }, // cx/cy win
      { cx: 0, cy: 0 }, // again: loaded once
      { x: 1, y: 2 },
      { cx: -1, cy: 0 },
      { cx: 4, cy: 0 },
      { x: 0, y: 4 },
      { cx: 1.5, cy: 0 },
      { cx: '1', cy: '1' },
      { cx: 1 }, // cy missing; its x/y are not read instead
      { cx: 2, x: 2, y: 2 },
      { y: 1 },
      [1, 1],
      'entry',
      7,
      null,
      true,
      {},
    ];
    expect(store.preload(list)).toBe(3);
    expect(hm.calls.sort()).toEqual(['0,0', '1,2', '3,3']);
    hm.calls.length = 0;
    expect(store.get(0, 0)).not.toBeNull();
    expect(store.get(1, 2)).not.toBeNull();
    expect(store.get(3, 3)).not.toBeNull();
    expect(hm.calls).toEqual([]);
  });

  it('preloads nothing from what is not a list', () => {
    const store = new TerrainStore(provider({ module: 'heightmap' }), 4);
    for (const bad of [null, 'x', 3, true, [], {}] as JsonValue[]) expect(store.preload(bad), JSON.stringify(bad)).toBe(0);
    expect(store.size).toBe(0);
  });

  it('preloads a list with holes (marshalled as an object)', () => {
    const store = new TerrainStore(provider({ module: 'heightmap' }), 4);
    expect(store.preload({ '1': { cx: 0, cy: 1 }, '3': { cx: 1, cy: 0 } })).toBe(2);
  });

  it('does not count in-grid entries that have no chunk', () => {
    const store = new TerrainStore(provider({ module: 'files' }, memorySource({ 'terrain/0_0.chunk': 'a', 'terrain/1_0.chunk': 'b' })), 4);
    expect(store.preload([{ cx: 0, cy: 0 }, { cx: 1, cy: 0 }, { cx: 2, cy: 0 }])).toBe(2);
  });

  it('computes at most its entry cap of chunks per preload', () => {
    const hm = counting(provider({ module: 'heightmap' }));
    const store = new TerrainStore(hm, 8, { entries: 3 });
    const list = Array.from({ length: 20 }, (_, i) => ({ cx: i % 8, cy: Math.floor(i / 8) }));
    expect(store.preload(list)).toBe(3);
    expect(hm.calls).toHaveLength(3);
  });

  it('refuses a grid size that is not a positive integer', () => {
    const hm = provider({ module: 'heightmap' });
    for (const bad of [0, -1, 1.5, NaN]) expect(() => new TerrainStore(hm, bad), String(bad)).toThrow(RangeError);
  });
});
