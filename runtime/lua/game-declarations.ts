/**
 * Reads what a game directory declares: its modes
 * with their globals, and the deployment-wide `guest_auth` and
 * registration posture. Every script body runs in a throwaway sandbox
 * without the `game` table, so top-level code must be side-effect free.
 */
import {
  DEFAULT_BUDGETS,
  GameLoadError,
  type GameInfo,
  type JsonObject,
  type JsonValue,
  type ModeInfo,
  type WorldSettings,
  type OperatorModes,
  type ScriptServices,
  type ScriptSource,
  RPC_SCRIPT,
} from './host-interface';
import { silentLogger } from '../platform/log';
import { readBotsConfig } from '../bots/config';
import { isObjectJson, jsString, toJson } from './marshal';
import { ScriptRpc } from './rpc';
import { lauxlib, lua, Sandbox, to_luastring } from './vm';

export const MULTI_MODE_MANIFEST = 'config.lua';
export const SINGLE_MODE_SCRIPT = 'match.lua';
export const SINGLE_MODE_NAME = 'default';
/**
 * Deadline of one body probe. Probes run on the main thread at boot and on a
 * live rescan after an edit, so they get the body deadline, not the
 * reference's 2 s loader ceiling.
 */
const LOADER_MS = DEFAULT_BUDGETS.loadMs;

/** Directory part of a game-relative path ('' for the root). */
export function dirOf(file: string): string {
  const slash = file.lastIndexOf('/');
  return slash < 0 ? '' : file.slice(0, slash);
}

/** A manifest path must stay inside the game directory. */
export function checkScriptPath(path: string): string | null {
  if (path.length === 0) return 'empty path';
  if (path.startsWith('/')) return 'absolute path';
  if (/[\x00-\x1f\x7f]/.test(path)) return 'control character in path';
  for (const segment of path.split('/')) {
    if (segment === '') return 'empty path segment';
    if (segment === '.' || segment === '..') return `'${segment}' segment in path`;
  }
  return null;
}

/** Runs a script body in a fresh sandbox; throws GameLoadError naming the file. */
export function evaluateScript(source: ScriptSource, file: string): Sandbox {
  const text = source.read(file);
  if (text === null) throw new GameLoadError(file, 'file not found');
  const sandbox = new Sandbox({ source, baseDir: dirOf(file) });
  const compiled = sandbox.compile(text, '@' + file);
  if (!compiled.ok) throw new GameLoadError(file, `script_load_failed: ${compiled.message}`);
  const ran = sandbox.call(0, DEFAULT_BUDGETS.heavy, LOADER_MS);
  if (!ran.ok) throw new GameLoadError(file, `script_load_failed: ${ran.message}`);
  return sandbox;
}

/** What a probe VM reaches: nothing leaves it (probes change nothing). */
const PROBE_SERVICES: ScriptServices = {
  log: silentLogger,
  limits: { take: () => ({ ok: false, retryAfterMs: 0 }), check: () => ({ ok: false, retryAfterMs: 0 }) },
  clock: { now: () => Date.now() },
  ids: { uuid: () => '00000000-0000-7000-8000-000000000000' },
  send: () => {},
};

/** Reads globals off a sandbox whose body has run. */
class Globals {
  constructor(
    private readonly sandbox: Sandbox,
    private readonly file: string,
    private readonly notices: GameInfo['notices'],
  ) {}

  private with<T>(name: string, read: (L: any, type: number) => T): T {
    const L = this.sandbox.L;
    const type = lua.lua_getglobal(L, to_luastring(name));
    try {
      return read(L, type);
    } finally {
      lua.lua_pop(L, 1);
    }
  }

  integer(name: string): number | null {
    return this.with(name, (L, type) => (type === lua.LUA_TNUMBER ? Math.trunc(lua.lua_tonumber(L, -1)) : null));
  }

  number(name: string): number | null {
    return this.with(name, (L, type) => (type === lua.LUA_TNUMBER ? lua.lua_tonumber(L, -1) : null));
  }

  positive(name: string): number | null {
    const n = this.integer(name);
    return n !== null && n > 0 ? n : null;
  }

  string(name: string): string | null {
    return this.with(name, (L, type) => (type === lua.LUA_TSTRING ? jsString(lua.lua_tostring(L, -1)) : null));
  }

  /** A table global as JSON (undefined when it is not a table or cannot be encoded). */
  table(name: string): JsonValue | undefined {
    return this.with(name, (L, type) => {
      if (type !== lua.LUA_TTABLE) return undefined;
      try {
        return toJson(L, -1);
      } catch {
        return undefined;
      }
    });
  }

  /** Strict boolean: any other non-nil value is ignored with a notice. */
  boolean(name: string): boolean | null {
    return this.with(name, (L, type) => {
      if (type === lua.LUA_TBOOLEAN) return lua.lua_toboolean(L, -1);
      if (type !== lua.LUA_TNIL) {
        this.notices.push({ file: this.file, message: `lua_config_global_ignored: '${name}' is not a boolean` });
      }
      return null;
    });
  }
}

function readRegistration(globals: Globals, file: string, notices: GameInfo['notices']): GameInfo['registration'] {
  // Decision 1: `script_registration` wins over its alias `registration`.
  const value = globals.string('script_registration') ?? globals.string('registration');
  if (value === null) return null;
  if (value === 'open' || value === 'oauth_only' || value === 'closed') return value;
  notices.push({ file, message: `unrecognised registration mode '${value}' ignored` });
  return null;
}

function readMode(source: ScriptSource, name: string, file: string, operator: JsonObject | undefined, notices: GameInfo['notices']): ModeInfo {
  const sandbox = evaluateScript(source, file);
  const g = new Globals(sandbox, file, notices);
  const kind = g.string('game_type') === 'world' ? 'world' : 'match';
  const state_strategy = g.string('state_strategy') === 'shared' ? 'shared' : 'per_player';
  if (operator) return withBots(operatorMode(name, file, kind, state_strategy, operator), operator.bots, source, notices);
  const matchSize = g.integer('match_size');
  if (matchSize === null) throw new GameLoadError(file, 'match_size is missing');
  if (matchSize <= 0) throw new GameLoadError(file, 'match_size must be a positive integer');
  return withBots({
    name,
    kind,
    file,
    match_size: matchSize,
    max_players: g.positive('max_players') ?? matchSize,
    min_players: g.positive('min_players') ?? matchSize,
    strategy: g.string('strategy') ?? 'fill',
    listed: g.boolean('listed') ?? kind === 'world',
    quick_play: g.boolean('quick_play') ?? kind === 'world',
    state_strategy,
    veto_tokens: Math.max(0, g.integer('veto_tokens') ?? 0),
    operator: {},
    world: kind === 'world' ? worldSettings((name) => g.number(name), (name) => g.boolean(name)) : null,
  }, g.table('bots'), source, notices);
}

/** Match modes only: the `bots` global, with the bot script's `names` read in a probe of their own. */
function withBots(mode: ModeInfo, value: JsonValue | undefined, source: ScriptSource, notices: GameInfo['notices']): ModeInfo {
  if (mode.kind !== 'match' || value === undefined) return mode;
  const bots = readBotsConfig({
    value,
    modeFile: mode.file,
    match_size: mode.match_size,
    max_players: mode.max_players,
    namesOf: (script) => {
      try {
        return new Globals(evaluateScript(source, script), script, notices).table('names');
      } catch (err) {
        // A broken or missing bot script still fills the queue: its bots play the built-in AI.
        notices.push({ file: script, message: `bot script not loaded (bots use the built-in AI): ${(err as Error).message}` });
        return undefined;
      }
    },
    notice: (message) => notices.push({ file: mode.file, message }),
  });
  return bots === null ? mode : { ...mode, bots };
}

/**
 * The world-only globals with their defaults; a value of the wrong type or
 * out of range keeps the default. Scripts and operator entries read alike.
 */
function worldSettings(number: (name: string) => number | null, boolean: (name: string) => boolean | null): WorldSettings {
  const positive = (name: string, fallback: number) => {
    const n = number(name);
    return n !== null && Number.isFinite(n) && Math.trunc(n) > 0 ? Math.trunc(n) : fallback;
  };
  const gridSize = Math.min(positive('grid_size', 10), WORLD_GRID_MAX);
  const viewRadius = number('view_radius');
  const ttl = number('player_ttl_ms');
  const band = number('border_band');
  return {
    tick_rate: Math.max(positive('tick_rate', 50), WORLD_TICK_MIN_MS),
    grid_size: gridSize,
    zone_size: positive('zone_size', 200),
    view_radius: viewRadius !== null && Number.isFinite(viewRadius) && viewRadius >= 0 ? Math.min(Math.trunc(viewRadius), WORLD_VIEW_RADIUS_MAX) : 1,
    broadcast_interval: positive('broadcast_interval', 3),
    persistent: boolean('persistent') ?? false,
    empty_grace_ms: positive('empty_grace_ms', 0),
    player_ttl_ms: ttl !== null && Number.isFinite(ttl) && Math.trunc(ttl) >= -1 ? Math.trunc(ttl) : 0,
    lazy_zones: boolean('lazy_zones') ?? gridSize > 100,
    zone_idle_timeout: positive('zone_idle_timeout', 30_000),
    max_active_zones: positive('max_active_zones', 10_000),
    cold_tick_divisor: positive('cold_tick_divisor', 1),
    border_band: band !== null && band >= 0 && band <= 1 ? band : 0,
  };
}

/** Operator-declared worlds hold this many players unless the entry says otherwise (script worlds default to match_size). */
const OPERATOR_WORLD_MAX_PLAYERS = 500;
/** A world's grid is at most this many zones per side (zone coordinates stay small integers). */
export const WORLD_GRID_MAX = 1000;
/** Faster ticks than this would leave no time between them for a world's zones. */
export const WORLD_TICK_MIN_MS = 10;
/** Beyond this a player would watch more zones than one frame budget carries. */
export const WORLD_VIEW_RADIUS_MAX = 5;

/**
 * An operator's `game_modes` entry replaces the script's mode configuration
 * as a whole; it is not merged with the script's globals key by key, so what
 * a mode does never depends on which keys the two happen to share. A key the
 * entry leaves out takes its default, and an entry without `match_size`
 * cannot describe a mode: the boot stops naming it.
 */
function operatorMode(name: string, file: string, kind: ModeInfo['kind'], state_strategy: ModeInfo['state_strategy'], entry: JsonObject): ModeInfo {
  const matchSize = entry.match_size;
  if (typeof matchSize !== 'number' || !Number.isInteger(matchSize) || matchSize <= 0) {
    throw new GameLoadError('(game_modes setting)', `mode '${name}': match_size is missing; an operator entry replaces the script's whole mode configuration`);
  }
  const int = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : null);
  return {
    name,
    kind,
    file,
    match_size: matchSize,
    max_players: int(entry.max_players) ?? (kind === 'world' ? OPERATOR_WORLD_MAX_PLAYERS : matchSize),
    min_players: int(entry.min_players) ?? matchSize,
    strategy: typeof entry.strategy === 'string' ? entry.strategy : 'fill',
    listed: typeof entry.listed === 'boolean' ? entry.listed : kind === 'world',
    quick_play: typeof entry.quick_play === 'boolean' ? entry.quick_play : kind === 'world',
    state_strategy,
    veto_tokens: typeof entry.veto_tokens === 'number' && Number.isInteger(entry.veto_tokens) && entry.veto_tokens > 0 ? entry.veto_tokens : 0,
    operator: entry,
    world:
      kind === 'world'
        ? worldSettings(
            (name) => (typeof entry[name] === 'number' ? (entry[name] as number) : null),
            (name) => (typeof entry[name] === 'boolean' ? (entry[name] as boolean) : null),
          )
        : null,
  };
}

/**
 * Loads a game directory. All or nothing: the first broken script throws a
 * GameLoadError naming it (the host refuses to boot, or keeps the last good
 * set on a live rescan).
 */
export function loadGame(source: ScriptSource, operatorModes: OperatorModes = {}): GameInfo {
  const rpcError = new ScriptRpc({ source, services: PROBE_SERVICES }).loadError();
  if (rpcError !== null) throw new GameLoadError(RPC_SCRIPT, `script_load_failed: ${rpcError}`);
  const notices: GameInfo['notices'] = [];
  const modes = new Map<string, ModeInfo>();
  if (source.read(MULTI_MODE_MANIFEST) !== null) {
    const sandbox = evaluateManifest(source);
    const entries = readManifestEntries(sandbox);
    const info = readPosture(sandbox, MULTI_MODE_MANIFEST, notices);
    for (const [name, file] of entries) modes.set(name, readMode(source, name, file, operatorModes[name], notices));
    return finish(info, modes, operatorModes, notices);
  }
  if (source.read(SINGLE_MODE_SCRIPT) !== null) {
    const sandbox = evaluateScript(source, SINGLE_MODE_SCRIPT);
    const info = readPosture(sandbox, SINGLE_MODE_SCRIPT, notices);
    modes.set(SINGLE_MODE_NAME, readMode(source, SINGLE_MODE_NAME, SINGLE_MODE_SCRIPT, operatorModes[SINGLE_MODE_NAME], notices));
    return finish(info, modes, operatorModes, notices);
  }
  // Neither file: zero modes, and no stale guest_auth.
  return finish({ guestAuth: false, registration: null }, modes, operatorModes, notices);
}

function finish(
  posture: Pick<GameInfo, 'guestAuth' | 'registration'>,
  modes: Map<string, ModeInfo>,
  operatorModes: OperatorModes,
  notices: GameInfo['notices'],
): GameInfo {
  for (const name of Object.keys(operatorModes)) {
    if (!modes.has(name)) notices.push({ file: '(game_modes setting)', message: `mode '${name}' is not declared by the game; entry ignored` });
  }
  return { modes, guestAuth: posture.guestAuth, registration: posture.registration, notices };
}

function readPosture(sandbox: Sandbox, file: string, notices: GameInfo['notices']): Pick<GameInfo, 'guestAuth' | 'registration'> {
  const g = new Globals(sandbox, file, notices);
  return { guestAuth: g.boolean('guest_auth') === true, registration: readRegistration(g, file, notices) };
}

/** `config.lua` runs with `require` disabled (no base directory) and must return the mode table. */
function evaluateManifest(source: ScriptSource): Sandbox {
  const file = MULTI_MODE_MANIFEST;
  const text = source.read(file)!;
  const sandbox = new Sandbox({ source, baseDir: '' });
  sandbox.setGlobalFunction('require', (L) => lauxlib.luaL_error(L, to_luastring('require is not available in config.lua')));
  const compiled = sandbox.compile(text, '@' + file);
  if (!compiled.ok) throw new GameLoadError(file, compiled.message);
  const ran = sandbox.call(0, DEFAULT_BUDGETS.heavy, LOADER_MS);
  if (!ran.ok) throw new GameLoadError(file, ran.message);
  const L = sandbox.L;
  if (ran.results < 1 || lua.lua_type(L, -ran.results) !== lua.LUA_TTABLE) {
    throw new GameLoadError(file, 'config.lua must return a table of mode name -> script path');
  }
  lua.lua_settop(L, lua.lua_gettop(L) - ran.results + 1);
  return sandbox;
}

function readManifestEntries(sandbox: Sandbox): [string, string][] {
  const file = MULTI_MODE_MANIFEST;
  const manifest = toJson(sandbox.L, -1);
  lua.lua_pop(sandbox.L, 1);
  if (Array.isArray(manifest)) throw new GameLoadError(file, 'config.lua entries must be mode name = "script path"');
  if (!isObjectJson(manifest)) return [];
  const entries: [string, string][] = [];
  const errors: string[] = [];
  for (const [name, path] of Object.entries(manifest)) {
    if (/^-?\d+$/.test(name)) {
      errors.push(`entry ${name}: mode names must be strings (name = "path")`);
      continue;
    }
    if (typeof path !== 'string') {
      errors.push(`mode '${name}': script path must be a string`);
      continue;
    }
    const problem = checkScriptPath(path);
    if (problem) errors.push(`mode '${name}': ${problem} ('${path}')`);
    else entries.push([name, path]);
  }
  if (errors.length > 0) throw new GameLoadError(file, `game mode config error: ${errors.join('; ')}`);
  return entries.sort((a, b) => a[0].localeCompare(b[0]));
}
