import { ApiError } from './errors';
import { byteLength, isPlainObject } from './frames';

/**
 * Presence (wire-protocol 10.1, extended): a player online on this node has a
 * status (default `online`) and a small metadata object, set with
 * `presence.update`, pushed to their accepted friends as `presence.updated`,
 * and cleared when their last socket closes. Nothing is persisted.
 */

export interface Presence {
  status: string;
  metadata: Record<string, unknown>;
}

/** What REST handlers and the ops plane read through `ctx.live.presence`. */
export interface LivePresence {
  /** The player's presence while they have a live socket on this node, else null. */
  get(playerId: string): Presence | null;
  /** Distinct players with at least one authenticated socket on this node. */
  onlineCount(): number;
}

export const STATUS_MAX_BYTES = 64;
export const METADATA_MAX_BYTES = 1024;
export const DEFAULT_STATUS = 'online';

/** Validates a `presence.update` payload: `status` a string of 1-64 bytes, `metadata` an object of at most 1 KiB encoded. */
export function parsePresenceUpdate(payload: Record<string, unknown>): Presence {
  const status = payload.status ?? DEFAULT_STATUS;
  if (typeof status !== 'string' || status === '' || byteLength(status) > STATUS_MAX_BYTES) {
    throw new ApiError('invalid_payload', `status must be a string of 1-${STATUS_MAX_BYTES} bytes.`, { field: 'status' });
  }
  const metadata = payload.metadata ?? {};
  if (!isPlainObject(metadata)) throw new ApiError('invalid_payload', 'metadata must be an object.', { field: 'metadata' });
  if (byteLength(JSON.stringify(metadata)) > METADATA_MAX_BYTES) {
    throw new ApiError('invalid_payload', `metadata must encode to at most ${METADATA_MAX_BYTES} bytes.`, { field: 'metadata' });
  }
  return { status, metadata };
}
