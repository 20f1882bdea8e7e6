/**
 * The `game` table a match VM sees: identity and logging
 * (`id`, `log`), messaging (`broadcast`, `send`), match control (`match`, `bots`), plus whatever domain bindings
 * the host supplies. Functions are created once per VM, never per call.
 * Wrong arguments answer `{error = "..."}` instead of raising, whatever the function's usual answer.
 */
import { RESERVED_LEAVES, type InstanceServices, type JsonObject, type MatchServices, type ScriptBinding, type ScriptServices, type WorldServices, type ZoneServices } from './host-interface';
import { pushSpatialTable } from './spatial';
import { isObjectJson, jsString, luaString, MarshalError, pushJson, toJson } from './marshal';
import { lua, type LuaFunction, type Sandbox } from './vm';
import { BOT_NAME } from '../bots/ids';

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

/**
 * A match VM gets the whole table; the RPC VM has no instance, so no
 * broadcast and no match control. World and zone VMs broadcast to the
 * world's players and reach `game.spatial` and `game.terrain`; only a zone
 * has `game.zone` and the zone forms of the spatial queries.
 */
export type GameTableContext =
  | { kind: 'match'; matchId: string; mode: string; file: string; services: MatchServices; probe?: boolean }
  | { kind: 'world'; worldId: string; mode: string; file: string; services: WorldServices }
  | { kind: 'zone'; worldId: string; mode: string; file: string; services: ZoneServices }
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
  const matchId = context.kind === 'match' ? context.matchId : context.kind === 'rpc' ? null : context.worldId;
  const mode = context.kind === 'rpc' ? null : context.mode;
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

  if (context.kind !== 'rpc') installInstanceFunctions(functions, matchId!, context.services);

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
  } else if (context.kind !== 'rpc') {
    // World and zone scripts get an error envelope, not a nil index: `game.match.*` belongs to match VMs only.
    pushTable(L, { set_joinable: (L) => envelopeError(L, 'game.match is available to match scripts only') });
    lua.lua_setfield(L, -2, luaString('match'));
  }
  if (context.kind !== 'rpc') {
    pushTable(L, botFunctions(context.kind === 'match' ? context.services : null));
    lua.lua_setfield(L, -2, luaString('bots'));
  }

  if (context.kind === 'world' || context.kind === 'zone') {
    // Queries walk whole tables inside one Lua call: they charge the instruction budget for what they looked at.
    pushSpatialTable(L, context.kind === 'zone' ? context.services.spatial : null, (L, n) => sandbox.charge(L, n));
    lua.lua_setfield(L, -2, luaString('spatial'));
    const services = context.services;
    pushTable(L, terrainFunctions(() => services.terrain));
    lua.lua_setfield(L, -2, luaString('terrain'));
  }
  if (context.kind === 'zone') {
    pushTable(L, zoneFunctions(context.services));
    lua.lua_setfield(L, -2, luaString('zone'));
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
      // Neither the binding's wall-clock time nor its answer (a board's top 100, a stored value,
      // marshalled by the host) is seen by the count hook: both are checked here.
      sandbox.settleHeapBaseline();
      const result = binding(args, { matchId, mode });
      pushJson(L, result);
      sandbox.check(L);
      return 1;
    });
  for (const [namespace, bindings] of Object.entries(services.bindings ?? {})) {
    if (['id', 'log', 'broadcast', 'send', 'match', 'bots', 'spatial', 'terrain', 'zone'].includes(namespace)) continue;
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

  if (context.kind === 'match' && context.probe) stubForProbe(L);
  lua.lua_setglobal(L, luaString('game'));
}

/**
 * A probe VM's `game` table (the table on top of the stack): every function
 * that could change something answers false and does nothing; `game.id`
 * stays, since it changes nothing.
 */
function stubForProbe(L: any): void {
  const table = lua.lua_gettop(L);
  const stub = (L: any) => {
    lua.lua_pushboolean(L, false);
    return 1;
  };
  const names: string[] = [];
  lua.lua_pushnil(L);
  while (lua.lua_next(L, table) !== 0) {
    names.push(jsString(lua.lua_tostring(L, -2)));
    lua.lua_pop(L, 1);
  }
  for (const name of names) {
    if (name === 'id') continue;
    const key = luaString(name);
    if (lua.lua_getfield(L, table, key) === lua.LUA_TTABLE) {
      const inner: string[] = [];
      lua.lua_pushnil(L);
      while (lua.lua_next(L, -2) !== 0) {
        inner.push(jsString(lua.lua_tostring(L, -2)));
        lua.lua_pop(L, 1);
      }
      for (const fn of inner) {
        lua.lua_pushcfunction(L, stub);
        lua.lua_setfield(L, -2, luaString(fn));
      }
      lua.lua_pop(L, 1);
    } else {
      lua.lua_pop(L, 1);
      lua.lua_pushcfunction(L, stub);
      lua.lua_setfield(L, table, key);
    }
  }
}

function pushTable(L: any, functions: Record<string, LuaFunction>): void {
  lua.lua_createtable(L, 0, Object.keys(functions).length);
  for (const [name, fn] of Object.entries(functions)) {
    lua.lua_pushcfunction(L, fn);
    lua.lua_setfield(L, -2, luaString(name));
  }
}

/**
 * `game.bots` (match VMs only): asynchronous, so a full match, a duplicate name or the
 * bot ceiling is found out by the host afterwards and is a silent no-op.
 */
function botFunctions(services: MatchServices | null): Record<string, LuaFunction> {
  const matchOnly = (L: any) => envelopeError(L, 'game.bots is available to match scripts only');
  if (services === null) return { add: matchOnly, remove: matchOnly };
  return {
    add: (L) => {
      const name = stringArg(L, 1);
      if (name === null || !BOT_NAME.test(name)) return envelopeError(L, 'game.bots.add(name): name must be 1-32 characters of A-Z a-z 0-9 _ -');
      services.bots?.('add', name);
      return pushTrue(L);
    },
    remove: (L) => {
      const name = stringArg(L, 1);
      if (name === null) return envelopeError(L, 'game.bots.remove(name_or_id): a bot name or id is required');
      services.bots?.('remove', name);
      return pushTrue(L);
    },
  };
}

/** A number argument, or null. */
function numberArg(L: any, index: number): number | null {
  return lua.lua_type(L, index) === lua.LUA_TNUMBER ? lua.lua_tonumber(L, index) : null;
}

const TERRAIN_UNAVAILABLE = 'terrain not available: the mode declares no terrain_provider';

/** `game.terrain`: the world's chunks, as clients receive them in `world.terrain`. */
function terrainFunctions(access: () => WorldServices['terrain']): Record<string, LuaFunction> {
  return {
    get_chunk: (L) => {
      const terrain = access();
      if (!terrain) return envelopeError(L, TERRAIN_UNAVAILABLE);
      const cx = numberArg(L, 1);
      const cy = numberArg(L, 2);
      if (cx === null || cy === null || !Number.isInteger(cx) || !Number.isInteger(cy)) return envelopeError(L, 'game.terrain.get_chunk(cx, cy): integers are required');
      const data = terrain.get(cx, cy);
      if (data === null) return envelopeError(L, 'no terrain chunk there');
      lua.lua_createtable(L, 0, 1);
      lua.lua_pushstring(L, luaString(data));
      lua.lua_setfield(L, -2, luaString('ok'));
      return 1;
    },
    preload: (L) => {
      const terrain = access();
      if (!terrain) return envelopeError(L, TERRAIN_UNAVAILABLE);
      const list = lua.lua_type(L, 1) === lua.LUA_TTABLE ? jsonArg(L, 1) : null;
      if (list) terrain.preload(list.value ?? null);
      return pushTrue(L);
    },
  };
}

/** Largest `game.zone.apply` event, in bytes of JSON. */
const EFFECT_LIMIT_BYTES = 4096;

/** `game.zone`: entities this zone spawns, despawns, and effects it sends its neighbours. */
function zoneFunctions(services: ZoneServices): Record<string, LuaFunction> {
  return {
    spawn: (L) => {
      const template = stringArg(L, 1);
      const x = numberArg(L, 2);
      const y = numberArg(L, 3);
      if (template === null || x === null || y === null) return envelopeError(L, 'game.zone.spawn(template_id, x, y[, overrides]): a template id and numeric x, y are required');
      let overrides: JsonObject = {};
      if (lua.lua_type(L, 4) === lua.LUA_TTABLE) {
        const encoded = jsonArg(L, 4);
        if (!encoded || !isObjectJson(encoded.value)) return envelopeError(L, 'game.zone.spawn: overrides must be a table of fields');
        overrides = encoded.value;
      }
      lua.lua_pushboolean(L, services.spawn(template, x, y, overrides));
      return 1;
    },
    despawn: (L) => {
      const id = stringArg(L, 1);
      if (id === null) return envelopeError(L, 'game.zone.despawn(entity_id): an entity id is required');
      services.despawn(id);
      return pushTrue(L);
    },
    apply: (L) => {
      const id = stringArg(L, 1);
      if (id === null || lua.lua_gettop(L) < 2) return envelopeError(L, 'game.zone.apply(entity_id, event): an entity id and an event are required');
      const encoded = jsonArg(L, 2);
      if (!encoded || JSON.stringify(encoded.value ?? null).length > EFFECT_LIMIT_BYTES) {
        lua.lua_pushboolean(L, false);
        return 1;
      }
      lua.lua_pushboolean(L, services.apply(id, encoded.value ?? null));
      return 1;
    },
  };
}

/** `game.broadcast`: only an instance has players to broadcast to. */
function installInstanceFunctions(functions: Record<string, LuaFunction>, matchId: string, services: InstanceServices): void {
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
