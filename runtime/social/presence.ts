import type { Presence } from '../schemas/presence';

export type { Presence } from '../schemas/presence';

/**
 * Presence (a status, plus an additive metadata object): a player
 * online on this node has a status — any JSON value the client sent, `online`
 * when absent, never checked against a list — and a small metadata object,
 * both set with `presence.update`, readable by friends over REST, and cleared
 * when their last socket closes. Nothing is persisted.
 */

/** What REST handlers and the ops plane read through `ctx.live.presence`. */
export interface LivePresence {
  /** The player's presence while they have a live socket on any node of the fleet, else null. */
  get(playerId: string): Presence | null;
  /** Distinct players with at least one authenticated socket on any node; throws when the fleet's presence is out of touch. */
  onlineCount(): number;
}

