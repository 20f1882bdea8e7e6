/**
 * The surface the host uses to run Lua game scripts. It is
 * host-neutral: file access, clocks, ids, logging and rate limits come in
 * through the interfaces below, never through `node:*`.
 *
 * Lifecycle of a match as the host drives it:
 *
 *   const vm = MatchVm.create({ source, mode, matchId, services });
 *   vm.init()                       -> CallResult (failure: do not create the match)
 *   vm.join(playerId, ctx)          -> JoinResult (refusal is a normal answer)
 *   vm.input(playerId, input)       -> queued; applied at the next tick in arrival order
 *   vm.tick()                       -> TickResult: inputs, hot-reload check, tick(state), finish check
 *   vm.viewJson(playerId)           -> that player's `match.state` payload as JSON text (never throws)
 *   vm.voteRequested()              -> after a tick that did not finish: a vote config (JSON) or null
 *   vm.voteResolved(template, result) -> CallResult (a vote closed)
 *   vm.leave(playerId)              -> CallResult (the player is gone either way)
 *   vm.finished()                   -> null | { result }
 *   vm.close()
 *
 * Every callback runs synchronously under an instruction budget, a
 * wall-clock deadline and a heap bound; a script that errors, loops or
 * allocates without bound loses that call only.
 *
 * Where things live:
 *   runtime/lua/game-declarations.ts loadGame(source, operatorModes?): GameInfo   (throws GameLoadError)
 *   runtime/lua/game-table.ts        the `game` table a script calls
 *   runtime/lua/match.ts             class MatchVm implements MatchRuntime; MatchVm.create(options) (throws if the body fails)
 *   runtime/lua/marshal.ts           Lua <-> JSON
 *   host/game-directory.ts           loadGameDirectory(dir, operatorModes, log) ->
 *                                      { info: GameInfo (refreshed on rescans), source: ScriptSource,
 *                                        onChange(listener: (info: GameInfo) => void): () => void, close() }
 */
import type { Clock, RateLimiter } from '../contracts/context';
import type { IdSource } from '../platform/ids';
import type { Logger } from '../platform/log';
import type { JsonObject, JsonValue } from '../contracts/json';
import type { BotsConfig } from '../bots/config';
import type { ZoneSpatial } from './spatial';

// Bindings and hosts read a script's values under the script surface's names.
export type { JsonObject, JsonValue } from '../contracts/json';

/**
 * A table a reader wants as named fields: an object as it is, an empty
 * table nested in what was read (which encodes as `[]`) as `{}`, anything
 * else null.
 */
export function asObjectJson(value: JsonValue | undefined): JsonObject | null {
  if (isObjectJson(value)) return value;
  return Array.isArray(value) && value.length === 0 ? {} : null;
}

/** True when the value is a table that encoded as a JSON object (not an array). */
export function isObjectJson(value: JsonValue | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** File access, confined to the game directory; the host supplies it. */
export interface ScriptSource {
  /** Text of a file given by a '/'-separated path relative to the game directory, or null when absent. */
  read(relativePath: string): string | null;
  /**
   * A token that changes whenever the file changes (the host bumps it from its
   * watcher). A live VM compares it before each tick and re-evaluates its
   * script when it moved (hot reload). Omit to disable hot reload.
   */
  revision?(relativePath: string): number;
}

/** One mode as the game directory declares it, after the operator's `game_modes` overrides. */
export interface ModeInfo {
  name: string;
  kind: 'match' | 'world';
  /** Script path relative to the game directory. */
  file: string;
  match_size: number;
  max_players: number;
  min_players: number;
  /** `fill` or `skill_based`; any other string behaves as `fill`. */
  strategy: string;
  listed: boolean;
  quick_play: boolean;
  /** `shared` calls `get_state(state)` once per tick for everybody. */
  state_strategy: 'per_player' | 'shared';
  /** Vetoes each player may spend on this match's votes (global `veto_tokens`, default 0). */
  veto_tokens: number;
  /** The operator's `game_modes` entry for this mode (handed to `init(config)`), or {}. */
  operator: JsonObject;
  /** The world-only globals; null for a match mode. */
  world: WorldSettings | null;
  /** The `bots` global after its rules (docs/decisions/0039); absent or null: no bots. */
  bots?: BotsConfig | null;
}

/** A world mode's globals after defaults (each documented in docs/worlds.md). */
export interface WorldSettings {
  /** Milliseconds between world ticks. */
  tick_rate: number;
  /** Zones per side. */
  grid_size: number;
  /** World units per zone side. */
  zone_size: number;
  /** Zones a player watches in each direction around its own (0: its own only). */
  view_radius: number;
  /** World ticks per `world.tick` delta. */
  broadcast_interval: number;
  /** Kept alive when empty, and snapshotted so it outlives a restart. */
  persistent: boolean;
  empty_grace_ms: number;
  /** 0 removes a player at disconnect, -1 keeps it, N keeps it N ms. */
  player_ttl_ms: number;
  /** Zones start on demand; otherwise every zone starts with the world. */
  lazy_zones: boolean;
  /** An idle lazy zone (no players, no entities, no `_keep_hot`) stops after this long. */
  zone_idle_timeout: number;
  max_active_zones: number;
  /** A zone holding no player ticks once every this many world ticks. */
  cold_tick_divisor: number;
  /** Fraction of `zone_size` along each edge that neighbours see (`game.spatial.neighbours_*`). */
  border_band: number;
}

export interface GameInfo {
  modes: Map<string, ModeInfo>;
  /** Deployment-wide `guest_auth` (only a literal `true` counts). */
  guestAuth: boolean;
  /** `script_registration` (alias `registration`), null when unset or unrecognised. */
  registration: 'open' | 'oauth_only' | 'closed' | null;
  /** Non-fatal findings (ignored globals, bad values), for the host to log at boot. */
  notices: { file: string; message: string }[];
}

/** Operator overrides per mode (setting `game_modes`). */
export type OperatorModes = Record<string, JsonObject>;

/** Thrown by `loadGame` on a broken game directory; `file` names the culprit. */
export class GameLoadError extends Error {
  constructor(readonly file: string, detail: string) {
    super(`${file}: ${detail}`);
    this.name = 'GameLoadError';
  }
}

/**
 * Per-callback limits (docs/decisions/0021 gives the defaults and their
 * ceilings): an instruction count, a wall-clock deadline and a heap growth
 * bound; whichever is reached first stops the call.
 */
export interface Budgets {
  /** Instructions for `init`, `tick` and script (re)evaluation. Default 1,000,000. */
  heavy: number;
  /** Instructions for every other callback. Default 200,000. */
  light: number;
  /** Wall-clock ms for `init`, `tick` and (re)evaluation; also caps the whole of one match tick. */
  heavyMs: number;
  /** Wall-clock ms for every other callback (`join`, `leave`, `handle_input`, `get_state`, an RPC method). */
  lightMs: number;
  /** Bytes one call may grow the heap (JavaScript heap plus external memory) by. */
  heapBytes: number;
  /** Wall-clock ms a call may wait for awaited bindings without it counting against its deadline (runtime/lua/vm.ts). */
  bindingWaitMs: number;
  /**
   * Wall-clock ms for running a script's body: when a VM is built, on hot
   * reload, and for the loader's probes. Compiling and running a body with
   * its modules takes longer than a tick, and happens once per VM or edit.
   */
  loadMs: number;
}

/**
 * A `game.<namespace>.<function>` binding the host adds when it has the domain
 * behind it (economy, storage, leaderboard, notify ...). Arguments arrive
 * marshalled; the return value goes back to Lua (error envelopes for bad
 * arguments are the binding's job). Must answer synchronously: a write
 * that completes later returns `true` and finishes in the background. A
 * namespace the host does not provide is simply absent from `game`.
 */
export type ScriptBinding = (args: JsonValue[], caller: { matchId: string | null; mode: string | null }) => JsonValue;
/** `game.<namespace>.<function>` for a table of bindings, `game.<name>` for a lone one (`notify`). */
export type ScriptBindings = Record<string, ScriptBinding | Record<string, ScriptBinding>>;

/**
 * A binding whose answer waits on the database (`game.economy.*`): it runs on
 * the main thread while the calling script's worker blocks for the answer,
 * so only scripts in worker threads have it. The worker stops waiting at the
 * calling callback's deadline; `claim()`, called as the last step before the
 * change commits, says whether the caller is still waiting and, when true,
 * holds it until the answer comes. A binding rolls its change back when
 * `claim()` is false, so a script never misses a change that happened, nor
 * sees one that did not.
 */
export type AwaitedBinding = (args: JsonValue[], caller: { matchId: string | null; mode: string | null }, claim: () => boolean) => Promise<JsonValue>;
/** `game.<namespace>.<function>`. */
export type AwaitedBindings = Record<string, Record<string, AwaitedBinding>>;

/** What any game VM may do to the world outside it. */
export interface ScriptServices {
  log: Logger;
  /** Groups used: `script_log` (failing calls, keyed on call site), `log` (per match), `log_global`. */
  limits: RateLimiter;
  clock: Clock;
  ids: IdSource;
  /** `game.send`: host sends `module.message` `{module: "lua", message}` to that player if connected. */
  send(playerId: string, message: JsonValue): void;
  /** Optional domain bindings (7.6-7.9); absent namespaces are not registered. */
  bindings?: ScriptBindings;
  /** Told of every failed callback, including those the `script_log` limit keeps out of the log (the host counts them). */
  failed?(kind: FailureKind): void;
  /**
   * A callback failed on this player's input (`handle_input`), at most once a second per match or zone;
   * the host sends it to the player as `module.error` when development errors are on, and drops it otherwise.
   */
  scriptError?(playerId: string, error: ScriptErrorReport): void;
}

/** The payload of `module.error` but its `module`: which callback of which file failed, and how. */
export interface ScriptErrorReport {
  callback: string;
  script: string;
  message: string;
}

/** An instance (a match, a world and its zones) has players to broadcast to. */
export interface InstanceServices extends ScriptServices {
  /** `game.broadcast`: leaf already validated (not reserved), payload an object. Host sends `match.<leaf>` or `world.<leaf>`. */
  broadcast(leaf: string, payload: JsonObject): void;
}

/** A match VM's services: an instance with a joinable flag. */
export interface MatchServices extends InstanceServices {
  /** `game.match.set_joinable`. */
  setJoinable(joinable: boolean): void;
  /** `game.bots.add(name)` (name already checked) / `game.bots.remove(name_or_id)`: carried out by the host after the call. */
  bots?(op: 'add' | 'remove', name: string): void;
}

/** A world's terrain as scripts reach it (`game.terrain`). */
export interface TerrainAccess {
  /** The chunk as `world.terrain` carries it (base64 of zlib), or null when there is none. */
  get(cx: number, cy: number): string | null;
  /** Loads the listed chunks ahead of time; unreadable entries are skipped. */
  preload(list: JsonValue): void;
}

/** A world or zone VM's services. */
export interface WorldServices extends InstanceServices {
  /** Null when the mode declares no terrain provider. */
  terrain: TerrainAccess | null;
}

/** A zone VM's services: its entities' life and its neighbours. */
export interface ZoneServices extends WorldServices {
  /** `game.zone.spawn`: true when the template is declared (the entity appears after this tick's steps). */
  spawn(template: string, x: number, y: number, overrides: JsonObject): boolean;
  /** `game.zone.despawn`: the entity goes after this tick's steps. */
  despawn(entityId: string): void;
  /** `game.zone.apply`: true when a neighbouring zone publishes the entity and this caller's budget allows. */
  apply(entityId: string, event: JsonValue): boolean;
  /** What the spatial queries' zone forms read. */
  spatial: ZoneSpatial;
}

/**
 * The game's RPC script (our rule: the script API has no RPC hook of its own):
 * `rpc.lua` at the root of the game directory defines a global table `rpc`
 * of functions `(player_id, params)`, served as methods `game.<name>`.
 */
export const RPC_SCRIPT = 'rpc.lua';
export const RPC_NAMESPACE = 'game';

/** The answer of one script RPC call. */
export type ScriptRpcResult =
  | { ok: true; result: JsonObject }
  /** No function of that name in the script's `rpc` table (or no script). */
  | { ok: false; unknown: true }
  /** The function returned `nil`/`false` [, reason]: the call was understood and turned down. */
  | { ok: false; unknown: false; refused: true; reason?: string }
  | { ok: false; unknown: false; refused: false; kind: FailureKind; message: string };

export interface MatchVmOptions {
  source: ScriptSource;
  mode: ModeInfo;
  matchId: string;
  services: MatchServices;
  budgets?: Partial<Budgets>;
}

/**
 * Why a callback failed (the `reason_class` of its log line). The three
 * limit kinds: `timeout` (wall-clock deadline), `heap_exhausted` (heap
 * budget, string length or stack depth), `instructions_exhausted`.
 */
export type FailureKind = 'error' | 'malformed' | LimitKind;
export type LimitKind = 'timeout' | 'heap_exhausted' | 'instructions_exhausted';

export function isLimitKind(kind: FailureKind): kind is LimitKind {
  return kind === 'timeout' || kind === 'heap_exhausted' || kind === 'instructions_exhausted';
}
export type CallResult = { ok: true } | { ok: false; kind: FailureKind; message: string };

export type JoinResult =
  | { ok: true }
  /** The script turned the player away (`nil`/`false`[, reason]); reason kept only if printable ASCII ≤ 64 bytes. */
  | { ok: false; refused: true; reason?: string }
  | { ok: false; refused: false; kind: FailureKind; message: string };

export interface MatchOutcome {
  /** The `result` of `match.finished`: the script's `_result` table, `{}` without one. */
  result: JsonObject;
}

export interface TickResult {
  /** Failed `handle_input` calls of this tick (each lost only its own input). */
  inputFailures: number;
  /** Inputs dropped since the last tick because more than MAX_QUEUED_INPUTS waited (the oldest go). */
  inputsDropped: number;
  /** The `tick` callback itself. */
  tick: CallResult;
  /** Non-null once the match is over (by `_finished`, or `state_too_large`). */
  finished: MatchOutcome | null;
}

/** The match VM contract; `MatchVm` in runtime/lua/match.ts implements it. */
export interface MatchRuntime {
  readonly matchId: string;
  readonly mode: ModeInfo;
  init(): CallResult;
  join(playerId: string, ctx?: JsonObject): JoinResult;
  leave(playerId: string): CallResult;
  /** Queues one `match.input` payload (an object); applied at the next tick. */
  input(playerId: string, input: JsonObject): void;
  tick(): TickResult;
  /**
   * After a tick that did not finish: the player's `match.state` payload as
   * JSON text (`{}` when `get_state` fails or returns a non-table). The
   * shared strategy calls `get_state(state)` once per tick and returns the
   * same text to everybody. A view over 1 MiB ends the match with
   * `state_too_large` and returns `{}`: check `finished()` after the views.
   */
  viewJson(playerId: string): string;
  /** After a tick that did not finish: `vote_requested(state)`'s table as JSON, or null for no vote. */
  voteRequested(): JsonValue;
  /** `vote_resolved(template, result, state)`; a failed call keeps the state. */
  voteResolved(template: string, result: JsonObject): CallResult;
  finished(): MatchOutcome | null;
  /** Re-evaluates the script now (hot reload). The state survives; a broken file keeps the old code. */
  reload(): { ok: true } | { ok: false; error: string };
  /** The last callback a limit stopped since the previous ask, or null. */
  takeLimitFailure(): { callback: string; kind: LimitKind } | null;
  close(): void;
}

/** Leaves a script may not broadcast under `match.` / `world.`. */
export const RESERVED_LEAVES: ReadonlySet<string> = new Set([
  'ack',
  'finished',
  'joined',
  'left',
  'list',
  'matched',
  'matchmaker_expired',
  'matchmaker_failed',
  'phase_changed',
  'state',
  'terrain',
  'tick',
  'vote_result',
  'vote_start',
  'vote_tally',
  'vote_vetoed',
]);

/**
 * The deadlines keep one worker's other matches on their 100 ms cadence: a
 * match that hits its cap every tick takes at most 30 ms of each period
 * (docs/decisions/0021). The reference's per-callback ceilings (500 ms for
 * `tick`, 200 ms for `join`) are the most an operator may set.
 */
export const DEFAULT_BUDGETS: Budgets = { heavy: 1_000_000, light: 200_000, heavyMs: 30, lightMs: 20, heapBytes: 32 * 1024 * 1024, bindingWaitMs: 250, loadMs: 250 };
/** Upper bounds for the operator's deadlines (the reference's per-callback ceilings). */
export const DEADLINE_CEILINGS_MS = { heavy: 500, light: 200 } as const;

/** Serialised state or view above this ends the match with `state_too_large`. */
export const STATE_LIMIT_BYTES = 1024 * 1024;
