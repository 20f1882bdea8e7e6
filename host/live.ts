import type { Server } from 'node:http';
import type { Ctx, LiveState } from '../runtime/context';
import { ApiError } from '../runtime/errors';
import { RPC_NAMESPACE, type GameInfo, type JsonObject, type ScriptBindings } from '../runtime/lua/api';
import { ScriptRpc } from '../runtime/lua/rpc';
import { MatchVm } from '../runtime/lua/match';
import { ChatHost } from './chat';
import { MatchHost, type GameHandle, type VmFactory } from './matches';
import { Matchmaker } from './matchmaker';
import { PresenceHost } from './presence';
import { RpcRegistry, type RpcHandler } from './rpc';
import { scriptBindings, scriptSend } from './script-bindings';
import type { SessionRegistry } from './sessions';
import { Gateway } from './ws';

export interface LiveOptions {
  /** The loaded game directory; without one the node declares no modes. */
  game?: GameHandle | null;
  /** Builds a match VM; the Lua runtime's `MatchVm.create` unless a test swaps it. */
  createVm?: VmFactory;
}

const NO_GAME: GameHandle = {
  info: { modes: new Map(), guestAuth: false, registration: null, notices: [] } satisfies GameInfo,
  source: { read: () => null },
};

/**
 * `ctx.live`: the node's real-time services, built in two steps because they
 * need the finished `Ctx` and `Ctx` needs them. `start` runs once the HTTP
 * server exists; until then only `push` works (and reaches nobody).
 */
export class LiveHost implements LiveState {
  #gateway: Gateway | null = null;
  #matches: MatchHost | null = null;
  #matchmaker: Matchmaker | null = null;
  #rpc: RpcRegistry | null = null;
  #chat: ChatHost | null = null;
  #presence: PresenceHost | null = null;

  constructor(private readonly options: LiveOptions = {}) {}

  start(ctx: Ctx, server: Server): void {
    const gateway = new Gateway(ctx);
    const bindings = scriptBindings(ctx);
    const createVm = this.options.createVm ?? ((o) => MatchVm.create({ ...o, services: { ...o.services, bindings } }));
    const matches = new MatchHost(ctx, gateway.sessions, this.options.game ?? NO_GAME, createVm);
    const matchmaker = new Matchmaker(ctx, gateway.sessions, matches);
    const rpc = new RpcRegistry(ctx);
    rpc.mount(RPC_NAMESPACE, scriptRpcHandler(ctx, this.options.game ?? NO_GAME, gateway.sessions, bindings));
    matches.attach(gateway);
    matchmaker.attach(gateway);
    rpc.attach(gateway);
    const chat = new ChatHost(ctx);
    const presence = new PresenceHost(ctx, gateway.sessions);
    chat.attach(gateway);
    presence.attach(gateway);
    gateway.attach(server);
    matchmaker.start();
    this.#gateway = gateway;
    this.#matches = matches;
    this.#matchmaker = matchmaker;
    this.#rpc = rpc;
    this.#chat = chat;
    this.#presence = presence;
  }

  /** Shutdown: stop forming matches, close sockets with 1001, stop match loops. */
  async close(): Promise<void> {
    this.#matchmaker?.close();
    await this.#gateway?.close();
    this.#matches?.close();
    this.#chat?.close();
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

  get chat(): ChatHost {
    return started(this.#chat);
  }

  get presence(): PresenceHost {
    return started(this.#presence);
  }

  push(playerId: string, frame: { type: string; payload: Record<string, unknown> }): number {
    return this.#gateway ? this.#gateway.sessions.push(playerId, frame) : 0;
  }

  disconnect(playerId: string): void {
    this.#gateway?.sessions.disconnect(playerId);
  }

  disconnectTokens(tokenIds: readonly string[]): void {
    this.#gateway?.sessions.disconnectTokens(tokenIds);
  }
}

/** `game.<name>` methods from the game directory's `rpc.lua`, answered in the registry's terms. */
function scriptRpcHandler(ctx: Ctx, game: GameHandle, sessions: SessionRegistry, bindings: ScriptBindings): RpcHandler {
  const scripts = new ScriptRpc({
    source: game.source,
    services: {
      log: ctx.log.child({ component: 'rpc_script' }),
      limits: ctx.limits,
      clock: ctx.clock,
      ids: ctx.ids,
      send: scriptSend(sessions),
      bindings,
    },
  });
  return (params, call) => {
    const r = scripts.call(call.method, call.playerId, params as JsonObject);
    if (r.ok) return r.result;
    if (r.unknown) throw new ApiError('rpc.unknown_method', 'No extension serves that method.');
    if (r.refused) throw new ApiError('validation_failed', 'The game script turned the call down.', r.reason ? { reason: r.reason } : {});
    throw new ApiError('internal');
  };
}

function started<T>(service: T | null): T {
  if (!service) throw new Error('live services used before start');
  return service;
}
