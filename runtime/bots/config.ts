/**
 * The `bots` mode global (`{script, min_players, enabled}`): read off the mode
 * script's globals as plain JSON, so an operator's `game_modes` entry and
 * a script declare bots alike.
 */
import type { JsonValue } from '../contracts/json';
import { BOT_NAME, DEFAULT_BOT_NAMES, MAX_BOTS_PER_MATCH } from './ids';

/** A match mode's bots: who fills its queue and what drives them. */
export interface BotsConfig {
  /** The bot script, relative to the game directory (resolved from the mode script's directory). */
  script: string;
  /** Queue fill target: tickets (humans and bots) a waiting human is grouped with. */
  min_players: number;
  enabled: boolean;
  /** The bot script's `names`, or the defaults. */
  names: string[];
}

export interface BotsInput {
  /** The `bots` value (a table, or anything else, which means no bots). */
  value: JsonValue | undefined;
  /** The mode script, relative to the game directory. */
  modeFile: string;
  match_size: number;
  max_players: number;
  /** The bot script's `names` global, read when the script loads (undefined when it does not). */
  namesOf(script: string): JsonValue | undefined;
  notice(message: string): void;
}

export function readBotsConfig(input: BotsInput): BotsConfig | null {
  const { value } = input;
  if (value === null || value === undefined || typeof value !== 'object' || Array.isArray(value)) {
    if (Array.isArray(value) && value.length > 0) input.notice("'bots' must be a table with a 'script' key; ignored");
    return null;
  }
  // The reference drops a table without `script` whole: no bots at all.
  if (typeof value.script !== 'string') return null;
  const script = resolveBotScript(input.modeFile, value.script);
  if (script === null) {
    input.notice(`bots.script '${value.script.slice(0, 200)}' leaves the game directory; bots disabled for this mode`);
    return null;
  }
  const asked = typeof value.min_players === 'number' && Number.isFinite(value.min_players) ? Math.trunc(value.min_players) : null;
  const min_players = Math.min(asked !== null && asked > 0 ? asked : input.match_size, MAX_BOTS_PER_MATCH, input.max_players);
  return {
    script,
    min_players,
    enabled: typeof value.enabled === 'boolean' ? value.enabled : true,
    names: botNames(input.namesOf(script)),
  };
}

/**
 * `script` relative to the mode script's directory, normalised; null when
 * it is absolute or climbs out of the game directory.
 */
export function resolveBotScript(modeFile: string, script: string): string | null {
  if (script.length === 0 || script.startsWith('/') || script.includes('\\') || /[\x00-\x1f\x7f]/.test(script)) return null;
  const slash = modeFile.lastIndexOf('/');
  const parts = slash < 0 ? [] : modeFile.slice(0, slash).split('/');
  for (const segment of script.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (parts.length === 0) return null;
      parts.pop();
    } else {
      parts.push(segment);
    }
  }
  return parts.length === 0 ? null : parts.join('/');
}

/** The usable entries of a `names` array (the id carries the name, so the `game.bots.add` rule applies); defaults when none. */
function botNames(value: JsonValue | undefined): string[] {
  if (!Array.isArray(value)) return [...DEFAULT_BOT_NAMES];
  const names = value.filter((n): n is string => typeof n === 'string' && BOT_NAME.test(n));
  return names.length > 0 ? names : [...DEFAULT_BOT_NAMES];
}
