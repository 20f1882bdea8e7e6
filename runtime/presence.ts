import { ApiError } from './errors';
import { byteLength, isPlainObject } from './frames';

/**
 * Presence (a status, plus an additive metadata object): a player
 * online on this node has a status — any JSON value the client sent, `online`
 * when absent, never checked against a list — and a small metadata object,
 * both set with `presence.update`, readable by friends over REST, and cleared
 * when their last socket closes. Nothing is persisted or pushed.
 */

export interface Presence {
  status: unknown;
  metadata: Record<string, unknown>;
}

/** What REST handlers and the ops plane read through `ctx.live.presence`. */
export interface LivePresence {
  /** The player's presence while they have a live socket on this node, else null. */
  get(playerId: string): Presence | null;
  /** Distinct players with at least one authenticated socket on this node. */
  onlineCount(): number;
}

export const METADATA_MAX_BYTES = 1024;
export const DEFAULT_STATUS = 'online';

/** Reads a `presence.update` payload: an object; `metadata`, when given, an object of at most 1 KiB encoded. */
export function parsePresenceUpdate(payload: unknown): Presence {
  if (!isPlainObject(payload)) throw new ApiError('invalid_payload', 'presence.update takes an object.');
  const status = 'status' in payload ? payload.status : DEFAULT_STATUS;
  const metadata = payload.metadata ?? {};
  if (!isPlainObject(metadata)) throw new ApiError('invalid_payload', 'metadata must be an object.', { field: 'metadata' });
  if (byteLength(JSON.stringify(metadata)) > METADATA_MAX_BYTES) {
    throw new ApiError('invalid_payload', `metadata must encode to at most ${METADATA_MAX_BYTES} bytes.`, { field: 'metadata' });
  }
  return { status, metadata };
}
