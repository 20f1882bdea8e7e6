import type { Ctx } from '../../runtime/contracts/context';
import { ApiError } from '../../runtime/contracts/errors';
import type { AwaitedBindings, JsonValue, ScriptBinding, ScriptBindings, ScriptErrorReport, ScriptServices } from '../../runtime/lua/host-interface';
import type { Settings } from '../../runtime/contracts/settings';
import { economyBindings } from '../../runtime/economy/bindings';
import { receiptBindings } from '../../runtime/receipts/bindings';
import { storageBindings } from '../../runtime/storage/bindings';
import { leaderboardBindings } from '../../runtime/leaderboards/bindings';
import { chatBindings } from '../../runtime/social/chat-bindings';
import { notifyInBackground, type NotificationView } from '../../runtime/social/notifications';
import type { SessionRegistry } from './sessions';

/**
 * What game VMs reach on this node: `game.send`, and the domain bindings of
 * the `game` table it can back.
 * Every game VM, match or RPC, gets the same set.
 */
export function scriptBindings(ctx: Ctx): ScriptBindings {
  return { notify: notifyBinding(ctx), notify_many: notifyManyBinding(ctx), leaderboard: leaderboardBindings(ctx.leaderboards, ctx.clock), chat: chatBindings(ctx) };
}

/** The bindings whose answers wait on the database: scripts in worker threads only. */
export function awaitedScriptBindings(ctx: Ctx): AwaitedBindings {
  // With the `storage` setting off the namespace is absent, so indexing `game.storage` raises, in every VM kind.
  return { economy: economyBindings(ctx), receipts: receiptBindings(ctx), ...(ctx.settings.storage ? { storage: storageBindings(ctx) } : {}) };
}

/**
 * `game.send`: the player's sockets, on whichever node of the fleet, get
 * `module.message {module: "lua", message}`; with `ws_legacy_game_frames`
 * (the default) the deprecated `game.message` first, with the same payload,
 * which JavaScript games of the asobi family still listen for.
 */
export function scriptSend(sessions: SessionRegistry, legacyFrames: boolean): ScriptServices['send'] {
  return (playerId, message) => {
    const payload = { module: 'lua', message };
    if (legacyFrames) sessions.reach(playerId, { type: 'game.message', payload });
    sessions.reach(playerId, { type: 'module.message', payload });
  };
}

/**
 * Development errors: the player whose input a callback failed on gets
 * `module.error {module: "lua", callback, script, message}`, after its
 * deprecated twin `game.error` unless `ws_legacy_game_frames` is false, on
 * whichever node holds its sockets. With `dev_errors` off (the default, and
 * always in production) the report is dropped here: the failure is in the log.
 */
export function scriptErrorSend(sessions: SessionRegistry, settings: Pick<Settings, 'dev_errors' | 'ws_legacy_game_frames'>): (playerId: string, error: ScriptErrorReport) => void {
  if (!settings.dev_errors) return () => {};
  return (playerId, error) => {
    const payload = { module: 'lua', callback: error.callback, script: error.script, message: error.message };
    if (settings.ws_legacy_game_frames) sessions.reach(playerId, { type: 'game.error', payload });
    sessions.reach(playerId, { type: 'module.error', payload });
  };
}

const NOTIFY_USAGE = 'game.notify(player_id, type, subject[, data]): player_id, type and subject must be strings';
const NOTIFY_MANY_USAGE = 'game.notify_many(player_ids, type, subject[, data]): player_ids must be an array, type and subject strings';

/** `game.notify` → `{ok = notification}` (without `id`, as rows reach Lua) or `{error = reason}`. */
function notifyBinding(ctx: Ctx): ScriptBinding {
  return ([playerId, type, subject, data]): JsonValue => {
    if (typeof playerId !== 'string' || typeof type !== 'string' || typeof subject !== 'string') return { error: NOTIFY_USAGE };
    const sent = send(ctx, playerId, type, subject, data);
    return sent ? { ok: forLua(sent) } : { error: 'invalid_notification' };
  };
}

/** `game.notify_many` → `{ok = {player ids notified}}`; bad recipients shorten the list. */
function notifyManyBinding(ctx: Ctx): ScriptBinding {
  return ([playerIds, type, subject, data]): JsonValue => {
    if (!Array.isArray(playerIds) || typeof type !== 'string' || typeof subject !== 'string') return { error: NOTIFY_MANY_USAGE };
    const notified: string[] = [];
    for (const playerId of playerIds) if (typeof playerId === 'string' && send(ctx, playerId, type, subject, data)) notified.push(playerId);
    return { ok: notified };
  };
}

function send(ctx: Ctx, playerId: string, type: string, subject: string, data: JsonValue | undefined): NotificationView | null {
  // Data that is not a table (or is a list) is sent as {}.
  const content = data !== null && typeof data === 'object' && !Array.isArray(data) ? data : {};
  try {
    return notifyInBackground(ctx, { playerId, type, subject, content });
  } catch (err) {
    if (err instanceof ApiError && err.code === 'validation_failed') return null;
    throw err;
  }
}

function forLua(n: NotificationView): JsonValue {
  const { id: _id, ...rest } = n;
  return rest as JsonValue;
}
