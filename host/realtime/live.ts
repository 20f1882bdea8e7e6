import type { Server } from 'node:http';
import type { Ctx } from '../../runtime/contracts/context';
import type { LiveState } from '../../runtime/contracts/live';
import { ApiError } from '../../runtime/contracts/errors';
import { DEFAULT_BUDGETS, RPC_NAMESPACE, type Budgets, type FailureKind, type GameInfo, type JsonObject, type ScriptRpcResult } from '../../runtime/lua/host-interface';
import type { Settings } from '../../runtime/contracts/settings';
import { ChatHost } from './chat';
import { MatchHost } from './match/match-host';
import type { GameHandle } from '../game-directory';
import { ScriptPool } from './lanes/pool';
import { TickWheel } from './lanes/tick-wheel';
import { scriptWorkers } from './lanes/usable-cpus';
import { LANE_KINDS } from './lane-kinds';
import { Matchmaker } from './matchmaker';
import { BotFill } from './bot-fill';
import { PresenceHost } from './presence-host';
import { RpcRegistry, type RpcHandler } from './rpc';
import { awaitedScriptBindings, scriptBindings, scriptErrorSend, scriptSend } from './script-bindings';
import { Gateway } from './gateway';
import { outboundFrameCheck } from './frame-checks';
import { frameTable } from './frame-table';
import { WorldHost } from './world/world-host';
import { NO_METRICS, type MetricHooks } from '../metrics/registry';
import { Fleet } from '../fleet/fleet';
import type { DatagramPlane } from './datagram/plane';

export interface LiveOptions {
  /** The loaded game directory; without one the node declares no modes. */
  game?: GameHandle | null;
  /** The node's metric hooks; none when `metrics_port` is unset. */
  metrics?: MetricHooks;
  /** The fleet this node belongs to (host/fleet; a node without Redis is a fleet of one). */
  fleet: Fleet;
}

const NO_GAME: GameHandle = {
  info: { modes: new Map(), guestAuth: false, registration: null, notices: [] } satisfies GameInfo,
  source: { read: () => null },
  dir: null,
};

/** Every script's limits, from the operator's settings (decision 4; docs/decisions/0021). */
export function scriptBudgets(settings: Settings): Budgets {
  return {
    heavy: settings.lua_instruction_budget.init_tick,
    light: settings.lua_instruction_budget.other,
    heavyMs: settings.lua_time_budget_ms.init_tick,
    lightMs: settings.lua_time_budget_ms.other,
    heapBytes: settings.lua_heap_budget_mb * 1024 * 1024,
    bindingWaitMs: settings.lua_binding_wait_ms,
    loadMs: DEFAULT_BUDGETS.loadMs,
  };
}

/**
 * `ctx.live`: the node's real-time services, built in two steps because they
 * need the finished `Ctx` and `Ctx` needs them. `start` runs once the HTTP
 * server exists; until then only `push` works (and reaches nobody).
 */
export class LiveHost implements LiveState {
  #gateway: Gateway | null = null;
  #matches: MatchHost | null = null;
  #matchmaker: Matchmaker | null = null;
  #botFill: BotFill | null = null;
  #rpc: RpcRegistry | null = null;
  #chat: ChatHost | null = null;
  #worlds: WorldHost | null = null;
  #presence: PresenceHost | null = null;
  #pool: ScriptPool | null = null;
  #wheel: TickWheel | null = null;
  #fleet: Fleet | null = null;
  #datagrams: DatagramPlane | null = null;

  constructor(private readonly options: LiveOptions) {}

  /** `datagrams`: the node's datagram plane, already bound, when the `datagrams` setting turns it on. */
  start(ctx: Ctx, server: Server, datagrams: DatagramPlane | null = null): void {
    const metrics = this.options.metrics ?? NO_METRICS;
    const gateway = new Gateway(ctx, metrics);
    if (ctx.settings.response_checks) gateway.sessions.checkOut = outboundFrameCheck(ctx.log);
    const game = this.options.game ?? NO_GAME;
    const pool = new ScriptPool({
      workers: scriptWorkers(ctx.settings),
      gameDir: game.dir,
      source: game.source,
      budgets: scriptBudgets(ctx.settings),
      failingTicksMax: ctx.settings.match_failing_ticks_max,
      memoryBytes: ctx.settings.match_worker_memory_mb * 1024 * 1024,
      rateLimits: ctx.settings.rate_limits,
      bindings: scriptBindings(ctx),
      awaitedBindings: awaitedScriptBindings(ctx),
      log: ctx.log,
      limits: ctx.limits,
      clock: ctx.clock,
      ids: ctx.ids,
      kinds: LANE_KINDS,
    });
    const send = scriptSend(gateway.sessions, ctx.settings.ws_legacy_game_frames);
    const scriptError = scriptErrorSend(gateway.sessions, ctx.settings);
    pool.subscribe('lane', (e) => {
      if (e.k === 'log') return ctx.log[e.level](e.event, e.fields);
      if (e.k === 'send') return send(e.playerId, e.message);
      if (e.k === 'script_error') return scriptError(e.playerId, e.error);
      for (const [kind, count] of Object.entries(e.counts)) metrics.luaFailure(kind as FailureKind, count);
    });
    // The lanes' one clock: matches and worlds tick on it, and each slot's batch goes out after the slot.
    // Real time, not ctx.clock: the wheel schedules real timers, and lanes measure lateness against it.
    const wheel = new TickWheel(() => Date.now(), () => pool.flush(), pool.workers > 0 ? TickWheel.GRID : 1);
    const matches = new MatchHost(ctx, gateway.sessions, game, pool, wheel);
    const matchmaker = new Matchmaker(ctx, gateway.sessions, matches);
    const rpc = new RpcRegistry(ctx, datagrams?.methods() ?? null);
    if (datagrams) gateway.sessions.onSessionEnded((session) => datagrams.revokeSession(session));
    rpc.mount(RPC_NAMESPACE, scriptRpcHandler(pool));
    for (const ext of ctx.extensions?.list ?? []) {
      for (const [name, method] of Object.entries(ext.rpc ?? {})) {
        rpc.register(`${ext.name}.${name}`, (params, call) => method.handle(params, { playerId: call.playerId }), method.codes ? { codes: method.codes } : {});
      }
    }
    const chat = new ChatHost(ctx, gateway.sessions);
    const worlds = new WorldHost(ctx, gateway.sessions, game, pool, chat, matches.votes, wheel);
    if (datagrams) {
      worlds.datagrams = datagrams;
      datagrams.onInput = (playerId, input, seq) => worlds.inputFrom(playerId, input, seq);
    }
    chat.serveWorlds(worlds);
    const fleet = this.options.fleet;
    const presence = new PresenceHost(ctx, (players, frame) => void fleet.push(players, frame, 'fleet'), gateway.sessions, fleet.presence);
    gateway.serve(frameTable({ session: gateway, presence, chat, matchmaker, matches, worlds, rpc, votes: matches.votes }));
    // After the table: the fleet wraps the `match.join` and `world.join` it serves.
    const hosted = { matches: () => matches.liveIds(), worlds: () => worlds.liveIds() };
    fleet.attach({ sessions: gateway.sessions, chat, gateway, hosted });
    this.#fleet = fleet;
    gateway.attach(server);
    matchmaker.start();
    const botFill = new BotFill(ctx, matchmaker, () => game.info.modes.values());
    botFill.start();
    this.#botFill = botFill;
    this.#gateway = gateway;
    this.#matches = matches;
    this.#matchmaker = matchmaker;
    this.#rpc = rpc;
    this.#chat = chat;
    this.#worlds = worlds;
    this.#presence = presence;
    this.#pool = pool;
    this.#wheel = wheel;
    this.#datagrams = datagrams;
  }

  /** Shutdown: stop forming matches, close sockets with 1001, stop match loops. */
  async close(): Promise<void> {
    this.#matchmaker?.close();
    this.#botFill?.close();
    await this.#gateway?.close();
    await this.#worlds?.close();
    this.#matches?.close();
    this.#wheel?.close();
    this.#chat?.close();
    await this.#pool?.close();
    await this.#datagrams?.close();
  }

  get gateway(): Gateway {
    return started(this.#gateway);
  }

  get matches(): MatchHost {
    return started(this.#matches);
  }

  get matchmaker(): Matchmaker {
    return started(this.#matchmaker);
  }

  get rpc(): RpcRegistry {
    return started(this.#rpc);
  }

  get worlds(): WorldHost {
    return started(this.#worlds);
  }

  get chat(): ChatHost {
    return started(this.#chat);
  }

  get presence(): PresenceHost {
    return started(this.#presence);
  }

  /** The datagram plane, or null when it is off (docs/datagrams.md). */
  get datagrams(): DatagramPlane | null {
    return this.#datagrams;
  }

  /** On a fleet, the player's sockets on every node; the count is of the sockets this node reached at once. */
  push(playerId: string, frame: { type: string; payload: Record<string, unknown> }): number {
    return this.#fleet ? this.#fleet.push([playerId], frame) : 0;
  }

  disconnect(playerId: string): void {
    this.#fleet?.disconnect(playerId);
  }

  disconnectTokens(tokenIds: readonly string[]): void {
    this.#fleet?.disconnectTokens(tokenIds);
  }
}

/** `game.<name>` methods from the game directory's `rpc.lua`, run in the script pool and answered in the registry's terms. */
function scriptRpcHandler(pool: ScriptPool): RpcHandler {
  return async (params, call) => {
    const r = await pool.request<ScriptRpcResult>(null, LOST_RPC, (req) => ({ kind: 'rpc', op: 'call', req, method: call.method, playerId: call.playerId, params: params as JsonObject }));
    if (r.ok) return r.result;
    if (r.unknown) throw new ApiError('rpc.unknown_method', 'No extension serves that method.');
    if (r.refused) throw new ApiError('validation_failed', 'The game script turned the call down.', r.reason ? { reason: r.reason } : {});
    throw new ApiError('internal');
  };
}

const LOST_RPC: ScriptRpcResult = { ok: false, unknown: false, refused: false, kind: 'error', message: 'worker_lost' };

function started<T>(service: T | null): T {
  if (!service) throw new Error('live services used before start');
  return service;
}
