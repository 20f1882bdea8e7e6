/**
 * The `game` table a match VM sees: identity and logging
 * (7.3), messaging (7.4), match control (7.5), plus whatever domain bindings
 * the host supplies. Functions are created once per VM, never per call.
 * Wrong arguments answer `{error = "..."}` instead of raising (7.1).
 */
import { RESERVED_LEAVES, type JsonObject, type MatchServices, type ScriptBinding, type ScriptServices } from './api';
import { isObjectJson, jsString, luaString, MarshalError, pushJson, toJson } from './marshal';
import { lua, type LuaFunction, type Sandbox } from './vm';

const LEAF = /^[A-Za-z0-9_-]{1,64}$/;
const BROADCAST_LIMIT_BYTES = 64 * 1024;
const LOG_MESSAGE_MAX = 500;
const LOG_META_MAX = 2048;
const LEVELS: Record<string, 'debug' | 'info' | 'warn' | 'error'> = {
  debug: 'debug',
  info: 'info',
  warn: 'warn',
  warning: 'warn',
  error: 'error',
};

/** A match VM gets the whole table; the RPC VM has no instance, so no broadcast and no match control. */
export type GameTableContext =
  | { kind: 'match'; matchId: string; mode: string; file: string; services: MatchServices }
  | { kind: 'rpc'; file: string; services: ScriptServices };

function envelopeError(L: any, message: string): number {
  lua.lua_createtable(L, 0, 1);
  lua.lua_pushstring(L, luaString(message));
  lua.lua_setfield(L, -2, luaString('error'));
  return 1;
}

function pushTrue(L: any): number {
  lua.lua_pushboolean(L, true);
  return 1;
}

function stringArg(L: any, index: number): string | null {
  return lua.lua_type(L, index) === lua.LUA_TSTRING ? jsString(lua.lua_tostring(L, index)) : null;
}

/** Encodes an argument, or null when it cannot be (cycle). */
function jsonArg(L: any, index: number) {
  try {
    return { value: toJson(L, index) };
  } catch (err) {
    if (err instanceof MarshalError) return null;
    throw err;
  }
}

export function installGameTable(sandbox: Sandbox, context: GameTableContext): void {
  const L = sandbox.L;
  const { services } = context;
  const matchId = context.kind === 'match' ? context.matchId : null;
  const mode = context.kind === 'match' ? context.mode : null;
  // Log lines are rate-limited per instance; the RPC VM is one instance of its own.
  const logKey = matchId ?? `rpc:${context.file}`;

  const functions: Record<string, LuaFunction> = {
    id: (L) => {
      lua.lua_pushstring(L, luaString(services.ids.uuid()));
      return 1;
    },

    log: (L) => {
      const level = LEVELS[stringArg(L, 1) ?? ''];
      if (!level) return envelopeError(L, 'game.log(level, message[, meta]): level must be debug, info, warn, warning or error');
      if (lua.lua_gettop(L) < 2) return envelopeError(L, 'game.log(level, message[, meta]): message is required');
      if (lua.lua_gettop(L) >= 3 && lua.lua_type(L, 3) !== lua.LUA_TTABLE) {
        return envelopeError(L, 'game.log(level, message[, meta]): meta must be a table');
      }
      if (!services.limits.take('log', logKey).ok || !services.limits.take('log_global', 'node').ok) {
        lua.lua_pushboolean(L, false);
        return 1;
      }
      let message = stringArg(L, 2);
      if (message === null) {
        const encoded = jsonArg(L, 2);
        message = encoded ? JSON.stringify(encoded.value ?? null) : '(unencodable)';
      }
      // Control bytes (except tab) would let a script forge log lines.
      message = message.replace(/[\x00-\x08\x0a-\x1f\x7f]/g, '').slice(0, LOG_MESSAGE_MAX);
      let meta: unknown;
      if (lua.lua_gettop(L) >= 3) {
        const encoded = jsonArg(L, 3);
        if (!encoded) meta = { _unencodable: true };
        else meta = JSON.stringify(encoded.value ?? {}).length > LOG_META_MAX ? { _truncated: true } : encoded.value;
      }
      services.log[level]('game.log', {
        script: context.file,
        context: context.kind,
        ...(matchId === null ? {} : { match_id: matchId }),
        message,
        ...(meta === undefined ? {} : { meta }),
      });
      return pushTrue(L);
    },

    send: (L) => {
      const playerId = stringArg(L, 1);
      if (playerId === null || lua.lua_gettop(L) < 2) return envelopeError(L, 'game.send(player_id, message): player_id must be a string');
      const encoded = jsonArg(L, 2);
      if (!encoded) return envelopeError(L, 'game.send: message cannot be encoded (cycle)');
      services.send(playerId, encoded.value ?? null);
      return pushTrue(L);
    },
  };

  if (context.kind === 'match') installInstanceFunctions(functions, context.matchId, context.services);

  lua.lua_createtable(L, 0, 8);
  for (const [name, fn] of Object.entries(functions)) {
    lua.lua_pushcfunction(L, fn);
    lua.lua_setfield(L, -2, luaString(name));
  }

  if (context.kind === 'match') {
    lua.lua_createtable(L, 0, 1);
    lua.lua_pushcfunction(L, (L: any) => {
      if (lua.lua_type(L, 1) !== lua.LUA_TBOOLEAN) return envelopeError(L, 'game.match.set_joinable(joinable): a boolean is required');
      context.services.setJoinable(lua.lua_toboolean(L, 1));
      return pushTrue(L);
    });
    lua.lua_setfield(L, -2, luaString('set_joinable'));
    lua.lua_setfield(L, -2, luaString('match'));
  }

  // Domain bindings exist only when the host provides them: no pretend stubs.
  const pushBinding = (label: string, binding: ScriptBinding) =>
    lua.lua_pushcfunction(L, (L: any) => {
      const args = [];
      for (let i = 1; i <= lua.lua_gettop(L); i++) {
        const encoded = jsonArg(L, i);
        if (!encoded) return envelopeError(L, `game.${label}: argument ${i} cannot be encoded`);
        args.push(encoded.value ?? null);
      }
      const result = binding(args, { matchId, mode });
      sandbox.checkDeadline(L);
      pushJson(L, result);
      return 1;
    });
  for (const [namespace, bindings] of Object.entries(services.bindings ?? {})) {
    if (['id', 'log', 'broadcast', 'send', 'match'].includes(namespace)) continue;
    if (typeof bindings === 'function') {
      pushBinding(namespace, bindings);
    } else {
      lua.lua_createtable(L, 0, 4);
      for (const [name, binding] of Object.entries(bindings)) {
        pushBinding(`${namespace}.${name}`, binding);
        lua.lua_setfield(L, -2, luaString(name));
      }
    }
    lua.lua_setfield(L, -2, luaString(namespace));
  }

  lua.lua_setglobal(L, luaString('game'));
}

/** `game.broadcast`: only an instance has players to broadcast to. */
function installInstanceFunctions(functions: Record<string, LuaFunction>, matchId: string, services: MatchServices): void {
  functions.broadcast = (L) => {
    const event = stringArg(L, 1);
    if (event === null || !LEAF.test(event)) {
      return envelopeError(L, 'game.broadcast(event[, payload]): event must be 1-64 characters of A-Z a-z 0-9 _ -');
    }
    if (RESERVED_LEAVES.has(event)) return envelopeError(L, `game.broadcast: '${event}' is a reserved event name`);
    const encoded = lua.lua_type(L, 2) === lua.LUA_TTABLE ? jsonArg(L, 2) : { value: {} };
    if (!encoded) {
      services.log.warn('game_broadcast_rejected', { match_id: matchId, leaf: event, reason: 'unencodable' });
      return pushTrue(L);
    }
    const payload: JsonObject = isObjectJson(encoded.value) ? encoded.value : {};
    if (JSON.stringify(payload).length > BROADCAST_LIMIT_BYTES) {
      services.log.warn('game_broadcast_rejected', { match_id: matchId, leaf: event, reason: 'too_large' });
      return pushTrue(L);
    }
    services.broadcast(event, payload);
    return pushTrue(L);
  };
}
