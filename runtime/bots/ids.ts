/**
 * Who a bot is: its name rule, its player id, and how the rest of the
 * product tells a bot from a person. Human player ids are UUIDs, so the
 * `bot_` prefix can never collide with one.
 */

/** Names a bot gets when its bot script declares no `names` global. */
export const DEFAULT_BOT_NAMES: readonly string[] = ['Spark', 'Blitz', 'Volt', 'Neon', 'Pulse'];
/** Bots one match may hold: a hard limit, beyond which `game.bots.add` is a logged no-op. */
export const MAX_BOTS_PER_MATCH = 64;
/** `game.bots.add(name)` and the names a bot script declares. */
export const BOT_NAME = /^[A-Za-z0-9_-]{1,32}$/;

const PREFIX = 'bot_';
const SUFFIX_CHARS = 'abcdefghijklmnopqrstuvwxyz0123456789';
const SUFFIX_LENGTH = 6;

export function isBotId(playerId: string): boolean {
  return playerId.startsWith(PREFIX);
}

/** `bot_<name>_<6 random chars>`; `random` returns [0, 1). */
export function mintBotId(name: string, random: () => number = Math.random): string {
  let suffix = '';
  for (let i = 0; i < SUFFIX_LENGTH; i++) suffix += SUFFIX_CHARS[Math.floor(random() * SUFFIX_CHARS.length)];
  return `${PREFIX}${name}_${suffix}`;
}

/** The name part of a bot id (names may contain `_`, the suffix never does); null for a human id. */
export function botNameOf(playerId: string): string | null {
  if (!isBotId(playerId)) return null;
  const cut = playerId.lastIndexOf('_');
  return cut > PREFIX.length ? playerId.slice(PREFIX.length, cut) : null;
}
