import { z } from 'zod';
import { JsonObject } from './common';
import type { PushContract } from './frame-contract';

/**
 * The `module.*` pushes: what game scripts and extensions send one player,
 * outside any match or world broadcast. `module` names the producer: `lua`
 * for game scripts, the extension's name for an extension. `game.message`
 * and `game.error` are the deprecated twins the asobi family still sends
 * first (setting `ws_legacy_game_frames`); `module.event` has none.
 */

/** What `game.send` delivers, under `module.message` and its legacy twin alike. */
const ScriptMessage = z.object({ module: z.literal('lua'), message: z.unknown() });

/** A dotted event name: `<domain>.<name>`, each part 1+ of `A-Z a-z 0-9 _ -`, at most 64 bytes in all. */
export const EventName = z.string().max(64).regex(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);

/** Encoded `module.event` data stays under this many bytes, as on the reference server. */
export const MAX_EVENT_DATA_BYTES = 65_536;

export const ModuleEvent = z.object({
  module: z.string().meta({ description: 'the extension that sent it' }),
  event: EventName.meta({ description: '`<domain>.<name>`, at most 64 bytes, each part of `A-Z a-z 0-9 _ -`' }),
  data: JsonObject.meta({ description: 'always an object, encoded under 64 KiB' }),
});

/** A script callback that failed while handling this player's input, as development errors report it. */
export const ScriptError = z.object({
  module: z.literal('lua'),
  callback: z.string().meta({ description: 'the callback that failed, `handle_input`' }),
  script: z.string().meta({ description: 'the script file, relative to the game directory (e.g. `arena.lua`)' }),
  message: z.string().meta({ description: 'the Lua error, or which limit the callback reached' }),
});

export const modulePushes: PushContract[] = [
  {
    type: 'module.message',
    summary: 'A game script\'s message to this one player (`game.send`).',
    payload: ScriptMessage,
  },
  {
    type: 'game.message',
    summary: 'Deprecated twin of `module.message`, sent just before it with the same payload unless `ws_legacy_game_frames` is false.',
    payload: ScriptMessage,
  },
  {
    type: 'module.event',
    summary: 'A named event an extension pushes to this one player, on whichever node of the fleet the player\'s sockets are. No legacy twin.',
    payload: ModuleEvent,
  },
  {
    type: 'module.error',
    summary:
      'Development only: a script\'s `handle_input` failed on this player\'s input (match or world zone), at most one a second per match or zone. Sent only when the operator sets `dev_errors` and never in production.',
    payload: ScriptError,
  },
  {
    type: 'game.error',
    summary: 'Deprecated twin of `module.error`, sent just before it with the same payload unless `ws_legacy_game_frames` is false.',
    payload: ScriptError,
  },
];
