/**
 * Terrain providers: what a world mode's `terrain_provider(config)` names,
 * turned into per-zone chunks (chunk coordinates are zone coordinates) that
 * reach clients in `world.terrain` and scripts through `game.terrain`.
 *
 *  - `heightmap`: procedural heights from value noise over world cells, so a
 *    chunk depends only on its cells and the seed and neighbours join.
 *  - `files`: authored chunks, one game-directory file per chunk.
 *
 * A bad declaration is never fatal: the caller logs the problem and runs the
 * world without terrain.
 */
import { deflateSync } from 'node:zlib';
import type { JsonObject, JsonValue, ScriptSource } from '../../../runtime/lua/host-interface';

export interface TerrainProvider {
  readonly module: string;
  /** Raw chunk bytes, or null when this provider has no chunk there. */
  chunk(cx: number, cy: number): Uint8Array | null;
  /** Chunks this provider refused so far (too large, unreadable); absent for providers that never refuse. */
  readonly skipped?: number;
}

export type TerrainDeclaration = { ok: true; provider: TerrainProvider | null } | { ok: false; problem: string };

/** Reads what `terrain_provider(config)` returned (already marshalled to JSON; null/undefined = no terrain). */
export function terrainProvider(declared: JsonValue | undefined, source: ScriptSource, seed: number): TerrainDeclaration {
  if (declared === undefined || declared === null) return { ok: true, provider: null };
  if (!isObject(declared)) return refuse(`terrain_provider must return a table { module = "...", args = { ... } } or nil, not ${describe(declared)}`);
  for (const key of Object.keys(declared)) {
    if (key !== 'module' && key !== 'args') return refuse(`terrain_provider: unknown key '${key}' (known: module, args)`);
  }
  const module = declared.module;
  if (typeof module !== 'string') return refuse(`terrain_provider: module must be a string naming a provider (${Object.keys(PROVIDERS).join(', ')}), not ${describe(module)}`);
  const build = Object.hasOwn(PROVIDERS, module) ? PROVIDERS[module] : undefined;
  if (!build) return refuse(`terrain_provider: module '${module}' is unknown (known: ${Object.keys(PROVIDERS).join(', ')})`);
  const args = declared.args ?? {};
  if (!isObject(args)) return refuse(`terrain_provider ${module}: args must be a table, not ${describe(args)}`);
  const known = KNOWN_ARGS[module] ?? [];
  for (const key of Object.keys(args)) {
    // A misspelt arg would otherwise fall back to its default without a word.
    if (!known.includes(key)) return refuse(`terrain_provider ${module}: unknown arg '${key}' (known: ${known.join(', ')})`);
  }
  const built = build(args, source, seed);
  return typeof built === 'string' ? refuse(`terrain_provider ${module}: ${built}`) : { ok: true, provider: built };
}

/** base64 of the zlib stream (RFC 1950), as `world.terrain` carries a chunk. */
export function encodeChunk(bytes: Uint8Array): string {
  return deflateSync(bytes).toString('base64');
}

/** A built provider, or the problem with its args. */
type ProviderFactory = (args: JsonObject, source: ScriptSource, seed: number) => TerrainProvider | string;

const PROVIDERS: Record<string, ProviderFactory> = {
  heightmap: heightmapFromArgs,
  files: filesFromArgs,
};

const KNOWN_ARGS: Record<string, string[]> = {
  heightmap: ['resolution', 'amplitude', 'seed'],
  files: ['dir'],
};

function refuse(problem: string): { ok: false; problem: string } {
  return { ok: false, problem };
}

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Enough of a value to recognise it in a log line, never the whole of a large one. */
function describe(value: JsonValue | undefined): string {
  if (value === undefined) return 'nothing';
  const text = JSON.stringify(value);
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}

/** The integer at `args[name]` within [min, max], its default when absent, or the problem. */
function integerArg(args: JsonObject, name: string, min: number, max: number, fallback: number): number | string {
  const value = args[name];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    return `${name} must be an integer from ${min} to ${max}, not ${describe(value)}`;
  }
  return value;
}

// ---------------------------------------------------------------------------
// heightmap

/** Cells per chunk side when the script does not say. */
export const HEIGHTMAP_DEFAULT_RESOLUTION = 16;
export const HEIGHTMAP_MAX_RESOLUTION = 256;

/**
 * Octaves of value noise, their lattice spacing in world cells. Spacing in
 * cells (not chunks) keeps the slope between neighbouring cells bounded
 * whatever the resolution: each octave moves at most 1.5·weight/period of
 * the amplitude per cell (smoothstep's steepest slope is 1.5), about 5 % for
 * these four together.
 */
const OCTAVES: readonly { period: number; weight: number }[] = [
  { period: 64, weight: 8 },
  { period: 32, weight: 4 },
  { period: 16, weight: 2 },
  { period: 8, weight: 1 },
];
const OCTAVE_WEIGHT_SUM = OCTAVES.reduce((sum, o) => sum + o.weight, 0);

function heightmapFromArgs(args: JsonObject, _source: ScriptSource, worldSeed: number): TerrainProvider | string {
  const resolution = integerArg(args, 'resolution', 1, HEIGHTMAP_MAX_RESOLUTION, HEIGHTMAP_DEFAULT_RESOLUTION);
  if (typeof resolution === 'string') return resolution;
  const amplitude = integerArg(args, 'amplitude', 1, 255, 255);
  if (typeof amplitude === 'string') return amplitude;
  const seed = integerArg(args, 'seed', Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, worldSeed);
  if (typeof seed === 'string') return seed;
  return new HeightmapTerrain(resolution, amplitude, seed);
}

/** 32-bit avalanche (every input bit flips about half the output bits), so neighbouring lattice points look unrelated. */
function scramble(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x7feb352d);
  h ^= h >>> 15;
  h = Math.imul(h, 0x846ca68b);
  h ^= h >>> 16;
  return h >>> 0;
}

/** A world seed may use all 53 bits of a safe integer; both halves must move the terrain. */
function foldSeed(seed: number): number {
  const low = seed >>> 0;
  const high = Math.floor(seed / 0x1_0000_0000) | 0;
  return scramble(low ^ scramble(high ^ 0x9e3779b9));
}

/** Procedural heights: chunk (cx, cy) covers world cells [cx·r, cx·r + r) × [cy·r, cy·r + r). */
export class HeightmapTerrain implements TerrainProvider {
  readonly module = 'heightmap';
  readonly #salts: number[];

  constructor(
    readonly resolution: number,
    readonly amplitude: number,
    readonly seed: number,
  ) {
    const folded = foldSeed(seed);
    this.#salts = OCTAVES.map((_, i) => scramble((folded + Math.imul(i + 1, 0x9e3779b9)) | 0));
  }

  /** `resolution`² heights, row-major (row y, then column x), each 0..amplitude. */
  chunk(cx: number, cy: number): Uint8Array {
    const r = this.resolution;
    const sums = new Float64Array(r * r);
    // The same arithmetic as height(), but each octave's lattice values are hashed once per chunk
    // instead of four times per cell: a 256-side chunk would otherwise take tens of milliseconds.
    for (let i = 0; i < OCTAVES.length; i++) {
      const { period, weight } = OCTAVES[i]!;
      const salt = this.#salts[i]!;
      const xs = axis(cx * r, r, period);
      const ys = axis(cy * r, r, period);
      const width = xs.count + 1;
      const values = new Float64Array(width * (ys.count + 1));
      for (let ly = 0; ly <= ys.count; ly++) {
        for (let lx = 0; lx <= xs.count; lx++) values[ly * width + lx] = lattice(xs.first + lx, ys.first + ly, salt);
      }
      for (let y = 0; y < r; y++) {
        const above = ys.cell[y]! * width;
        const below = above + width;
        const ty = ys.t[y]!;
        for (let x = 0; x < r; x++) {
          const lx = xs.cell[x]!;
          const tx = xs.t[x]!;
          const a = values[above + lx]!;
          const b = values[above + lx + 1]!;
          const c = values[below + lx]!;
          const d = values[below + lx + 1]!;
          const top = a + (b - a) * tx;
          const bottom = c + (d - c) * tx;
          const k = y * r + x;
          sums[k] = sums[k]! + weight * (top + (bottom - top) * ty);
        }
      }
    }
    const out = new Uint8Array(r * r);
    for (let k = 0; k < out.length; k++) out[k] = Math.round((sums[k]! / OCTAVE_WEIGHT_SUM) * this.amplitude);
    return out;
  }

  /** Noise at one world cell, in [0, 1): the reference chunk() must agree with. */
  height(gx: number, gy: number): number {
    let sum = 0;
    for (let i = 0; i < OCTAVES.length; i++) {
      const { period, weight } = OCTAVES[i]!;
      const salt = this.#salts[i]!;
      const ix = Math.floor(gx / period);
      const iy = Math.floor(gy / period);
      const tx = smoothstep((gx - ix * period) / period);
      const ty = smoothstep((gy - iy * period) / period);
      const a = lattice(ix, iy, salt);
      const b = lattice(ix + 1, iy, salt);
      const c = lattice(ix, iy + 1, salt);
      const d = lattice(ix + 1, iy + 1, salt);
      const top = a + (b - a) * tx;
      const bottom = c + (d - c) * tx;
      sum += weight * (top + (bottom - top) * ty);
    }
    return sum / OCTAVE_WEIGHT_SUM;
  }
}

/** Where each of `length` cells from world cell `start` falls between lattice points `period` apart. */
function axis(start: number, length: number, period: number): { first: number; count: number; cell: Int32Array; t: Float64Array } {
  const first = Math.floor(start / period);
  const cell = new Int32Array(length);
  const t = new Float64Array(length);
  for (let k = 0; k < length; k++) {
    const g = start + k;
    const index = Math.floor(g / period);
    cell[k] = index - first;
    t[k] = smoothstep((g - index * period) / period);
  }
  return { first, count: Math.floor((start + length - 1) / period) - first + 1, cell, t };
}

function smoothstep(t: number): number {
  return t * t * (3 - 2 * t);
}

/** The value at a lattice point, in [0, 1). */
function lattice(ix: number, iy: number, salt: number): number {
  return scramble((ix + scramble((iy + salt) | 0)) | 0) / 0x1_0000_0000;
}

// ---------------------------------------------------------------------------
// files

/** A chunk file larger than this is refused: one chunk must not hold megabytes of a lane's memory. */
export const CHUNK_FILE_MAX_BYTES = 1024 * 1024;

function filesFromArgs(args: JsonObject, source: ScriptSource): TerrainProvider | string {
  const dir = args.dir ?? 'terrain';
  if (typeof dir !== 'string') return `dir must be a string, not ${describe(dir)}`;
  const problem = relativePathProblem(dir);
  if (problem) return `dir ${describe(dir)} ${problem}`;
  return new FileTerrain(source, dir);
}

/** Why `dir` is not a plain relative path inside the game directory, or null when it is. */
function relativePathProblem(dir: string): string | null {
  if (dir === '') return 'must not be empty';
  for (let i = 0; i < dir.length; i++) {
    const unit = dir.charCodeAt(i);
    if (unit < 0x20 || (unit >= 0x7f && unit < 0xa0)) return 'must not contain control characters';
  }
  // ScriptSource paths are '/'-separated; on Windows a backslash would be a second separator that escapes the segment checks below.
  if (dir.includes('\\')) return "must use '/' as its separator";
  if (dir.startsWith('/')) return 'must be relative to the game directory';
  for (const segment of dir.split('/')) {
    if (segment === '') return 'must not have empty segments';
    if (segment === '.' || segment === '..') return `must not have '${segment}' segments`;
  }
  return null;
}

/** Authored chunks: chunk (cx, cy) is the UTF-8 of the game-directory file `<dir>/<cx>_<cy>.chunk`. */
export class FileTerrain implements TerrainProvider {
  readonly module = 'files';
  #skipped = 0;
  #lastSkipped: string | null = null;

  constructor(
    private readonly source: ScriptSource,
    readonly dir: string,
  ) {}

  get skipped(): number {
    return this.#skipped;
  }

  /** The path of the most recent refused chunk and why, for whoever reports `skipped`. */
  get lastSkipped(): string | null {
    return this.#lastSkipped;
  }

  pathOf(cx: number, cy: number): string {
    return `${this.dir}/${cx}_${cy}.chunk`;
  }

  chunk(cx: number, cy: number): Uint8Array | null {
    const path = this.pathOf(cx, cy);
    let text: string | null;
    try {
      text = this.source.read(path);
    } catch (error) {
      return this.#skip(`${path}: unreadable (${error instanceof Error ? error.message : String(error)})`);
    }
    if (text === null) return null;
    // Every UTF-16 unit is at least one UTF-8 byte, so a long text is refused before it is encoded.
    if (text.length > CHUNK_FILE_MAX_BYTES) return this.#skip(`${path}: larger than ${CHUNK_FILE_MAX_BYTES} bytes`);
    const bytes = new TextEncoder().encode(text);
    if (bytes.length > CHUNK_FILE_MAX_BYTES) return this.#skip(`${path}: larger than ${CHUNK_FILE_MAX_BYTES} bytes`);
    return bytes;
  }

  #skip(why: string): null {
    this.#skipped++;
    this.#lastSkipped = why;
    return null;
  }
}

// ---------------------------------------------------------------------------
// the store

export interface TerrainStoreLimits {
  /** Chunks kept at most (absent ones included). */
  entries: number;
  /** Characters of encoded chunks kept at most; a large authored chunk weighs more than a small heightmap. */
  chars: number;
}

export const TERRAIN_STORE_DEFAULTS: TerrainStoreLimits = { entries: 4096, chars: 32 * 1024 * 1024 };

/** Encoded chunks of one world, computed once each and kept, least recently used dropped first. */
export class TerrainStore {
  /** Insertion order is recency order: a hit moves its key to the end. */
  readonly #kept = new Map<number, string | null>();
  readonly #limits: TerrainStoreLimits;
  #chars = 0;

  constructor(
    private readonly provider: TerrainProvider,
    private readonly gridSize: number,
    limits: Partial<TerrainStoreLimits> = {},
  ) {
    if (!Number.isInteger(gridSize) || gridSize < 1) throw new RangeError(`TerrainStore: gridSize must be a positive integer, not ${gridSize}`);
    this.#limits = { ...TERRAIN_STORE_DEFAULTS, ...limits };
  }

  /** Encoded chunk, or null outside the grid / no chunk. */
  get(cx: number, cy: number): string | null {
    if (!this.#inGrid(cx, cy)) return null;
    const key = cy * this.gridSize + cx;
    if (this.#kept.has(key)) {
      const data = this.#kept.get(key)!;
      this.#kept.delete(key);
      this.#kept.set(key, data);
      return data;
    }
    const bytes = this.provider.chunk(cx, cy);
    const data = bytes === null ? null : encodeChunk(bytes);
    // Absent chunks are kept too: an authored world asks for the same missing file every time a player nears it.
    this.#kept.set(key, data);
    this.#chars += data?.length ?? 0;
    this.#evict();
    return data;
  }

  /**
   * Accepts the script's preload list (JsonValue), computes the readable
   * in-grid entries, returns how many were loaded: distinct chunks that
   * exist. At most `entries` distinct chunks are computed per call, since
   * more would only push the first ones out again.
   */
  preload(list: JsonValue): number {
    // A Lua list with holes marshals as an object keyed "1", "3", …; its entries are still entries.
    const entries = Array.isArray(list) ? list : isObject(list) ? Object.values(list) : [];
    const seen = new Set<number>();
    let loaded = 0;
    for (const entry of entries) {
      if (seen.size >= this.#limits.entries) break;
      const coords = coordsOf(entry);
      if (!coords || !this.#inGrid(coords[0], coords[1])) continue;
      const key = coords[1] * this.gridSize + coords[0];
      if (seen.has(key)) continue;
      seen.add(key);
      if (this.get(coords[0], coords[1]) !== null) loaded++;
    }
    return loaded;
  }

  /** Chunks kept now (absent ones included). */
  get size(): number {
    return this.#kept.size;
  }

  #inGrid(cx: number, cy: number): boolean {
    return Number.isInteger(cx) && Number.isInteger(cy) && cx >= 0 && cy >= 0 && cx < this.gridSize && cy < this.gridSize;
  }

  #evict(): void {
    while (this.#kept.size > this.#limits.entries || this.#chars > this.#limits.chars) {
      const oldest = this.#kept.keys().next();
      if (oldest.done) return;
      this.#chars -= this.#kept.get(oldest.value)?.length ?? 0;
      this.#kept.delete(oldest.value);
    }
  }
}

/** `{cx, cy}` or `{x, y}` of a preload entry; an entry naming either of cx/cy is read as cx/cy only. */
function coordsOf(entry: JsonValue): [number, number] | null {
  if (!isObject(entry)) return null;
  const useC = 'cx' in entry || 'cy' in entry;
  const x = useC ? entry.cx : entry.x;
  const y = useC ? entry.cy : entry.y;
  return typeof x === 'number' && typeof y === 'number' ? [x, y] : null;
}
