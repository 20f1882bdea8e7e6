import type { Ctx } from '../../runtime/contracts/context';
import { acceptedFriendIds, acceptedFriendsOf } from '../../runtime/social/friends';
import type { LivePresence } from '../../runtime/contracts/live';
import { DEFAULT_STATUS, type Presence } from '../../runtime/schemas/presence';
import type { presenceUpdate, PresenceUpdate } from '../../runtime/schemas/presence';
import type { Session, SessionRegistry } from './sessions';
import type { FrameHandler, Reply } from './gateway';
import type { FleetPresence } from '../fleet/fleet-presence';
import type { ServerFrame } from '../../runtime/contracts/frame-envelope';


// One presence for every player who has just connected, as it is never changed in place (a fresh one per player was a fiftieth of an idle socket's heap).
const CONNECTED: Presence = Object.freeze({ status: DEFAULT_STATUS, metadata: Object.freeze({}) });
/** Most players one offline read covers. */
const OFFLINE_BATCH = 200;

/**
 * Presence: `presence.update` stores the player's status (any
 * JSON value, never checked against a list) and a small metadata object for as long as
 * they have a live socket, answers `presence.updated` with the stored value,
 * and pushes the change to their online accepted friends as a cid-less
 * `presence.updated` carrying `player_id` — the field that tells a friend's
 * change from the sender's own reply (docs/decisions/0006). The last socket
 * closing clears it and tells friends `status: "offline"`. The store is the
 * fleet's (host/fleet/fleet-presence.ts): on several nodes a player is online while
 * any node holds a socket of theirs, and friends on any node are told.
 */
export class PresenceHost implements LivePresence {
  /** Players whose last socket closed, awaiting the next friends read (one runs at a time). */
  #gone = new Set<string>();
  #reading = false;

  constructor(
    private readonly ctx: Ctx,
    /** Sends a frame to these players' sockets wherever they are (host/fleet/fleet.ts `push`). */
    private readonly push: (players: readonly string[], frame: ServerFrame) => void,
    private readonly sessions: SessionRegistry,
    private readonly board: FleetPresence,
  ) {
    // A second socket on another node keeps the status the player already set.
    sessions.onPlayerBound((playerId) => board.set(playerId, board.get(playerId) ?? CONNECTED));
    sessions.onPlayerGone((playerId) => {
      board.clear(playerId);
      // Still connected to another node: nobody is told they left.
      if (!board.isOnline(playerId)) this.#left(playerId);
    });
    // The players of a node that died: this node tells their friends.
    board.onLost = (players) => {
      for (const playerId of players) this.#left(playerId);
    };
  }

  #left(playerId: string): void {
    // After a deploy or a network blip thousands of sockets close at once:
    // one read covers everyone who left while the previous one ran.
    if (this.#gone.size === 0 && !this.#reading) setImmediate(() => void this.#offline());
    this.#gone.add(playerId);
  }

  async #offline(): Promise<void> {
    if (this.#reading || this.#gone.size === 0) return;
    const gone = [...this.#gone].slice(0, OFFLINE_BATCH);
    for (const id of gone) this.#gone.delete(id);
    this.#reading = true;
    try {
      const friends = await acceptedFriendsOf(this.ctx.db, gone);
      for (const playerId of gone) this.#push(playerId, friends.get(playerId) ?? [], { status: 'offline', metadata: {} });
    } catch (err) {
      this.ctx.log.warn('presence_push_failed', { players: gone.length, error: err instanceof Error ? err.message : String(err) });
    } finally {
      this.#reading = false;
    }
    if (this.#gone.size > 0) void this.#offline();
  }

  /** `presence.update` (the frame table, frame-table.ts, routes it here). */
  readonly updateFrame: FrameHandler<typeof presenceUpdate> = (s, p) => this.#update(s, p);

  get(playerId: string): Presence | null {
    return this.board.get(playerId);
  }

  onlineCount(): number {
    return this.board.count();
  }

  async #update(session: Session, presence: PresenceUpdate): Promise<Reply> {
    const playerId = session.playerId!;
    this.board.set(playerId, presence);
    await this.#toFriends(playerId, presence);
    return { type: 'presence.updated', payload: { status: presence.status, metadata: presence.metadata } };
  }

  async #toFriends(playerId: string, presence: Presence): Promise<void> {
    this.#push(playerId, await acceptedFriendIds(this.ctx.db, playerId), presence);
  }

  #push(playerId: string, friends: readonly string[], presence: Presence): void {
    const online = friends.filter((f) => this.board.isOnline(f));
    if (online.length === 0) return;
    this.push(online, { type: 'presence.updated', payload: { player_id: playerId, status: presence.status, metadata: presence.metadata } });
  }
}
