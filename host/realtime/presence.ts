import type { Ctx } from '../../runtime/contracts/context';
import { acceptedFriendIds, acceptedFriendsOf } from '../../runtime/social/friends';
import { DEFAULT_STATUS, type LivePresence, type Presence } from '../../runtime/social/presence';
import { presenceUpdate, type PresenceUpdate } from '../../runtime/schemas/presence';
import type { Session, SessionRegistry } from './sessions';
import type { Gateway, Reply } from './gateway';

/** Most players one offline read covers. */
const OFFLINE_BATCH = 200;

/**
 * Presence on this node: `presence.update` stores the player's status (any
 * JSON value, never checked against a list) and a small metadata object for as long as
 * they have a live socket, answers `presence.updated` with the stored value,
 * and pushes the change to their online accepted friends as a cid-less
 * `presence.updated` carrying `player_id` — the field that tells a friend's
 * change from the sender's own reply (docs/decisions/0006). The last socket
 * closing clears it and tells friends `status: "offline"`.
 */
export class PresenceHost implements LivePresence {
  readonly #state = new Map<string, Presence>();
  /** Players whose last socket closed, awaiting the next friends read (one runs at a time). */
  #gone = new Set<string>();
  #reading = false;

  constructor(
    private readonly ctx: Ctx,
    private readonly sessions: SessionRegistry,
  ) {
    sessions.onPlayerGone((playerId) => {
      this.#state.delete(playerId);
      // After a deploy or a network blip thousands of sockets close at once:
      // one read covers everyone who left while the previous one ran.
      if (this.#gone.size === 0 && !this.#reading) setImmediate(() => void this.#offline());
      this.#gone.add(playerId);
    });
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

  attach(gateway: Gateway): void {
    gateway.route(presenceUpdate, (s, p) => this.#update(s, p));
  }

  get(playerId: string): Presence | null {
    if (!this.sessions.isOnline(playerId)) return null;
    return this.#state.get(playerId) ?? { status: DEFAULT_STATUS, metadata: {} };
  }

  onlineCount(): number {
    const players = new Set<string>();
    for (const s of this.sessions.sessions()) if (s.playerId !== null) players.add(s.playerId);
    return players.size;
  }

  async #update(session: Session, presence: PresenceUpdate): Promise<Reply> {
    const playerId = session.playerId!;
    this.#state.set(playerId, presence);
    await this.#toFriends(playerId, presence);
    return { type: 'presence.updated', payload: { status: presence.status, metadata: presence.metadata } };
  }

  async #toFriends(playerId: string, presence: Presence): Promise<void> {
    this.#push(playerId, await acceptedFriendIds(this.ctx.db, playerId), presence);
  }

  #push(playerId: string, friends: readonly string[], presence: Presence): void {
    const online = friends.filter((f) => this.sessions.isOnline(f));
    if (online.length === 0) return;
    const text = JSON.stringify({ type: 'presence.updated', payload: { player_id: playerId, status: presence.status, metadata: presence.metadata } });
    const sent = this.sessions.metrics.frameOut('presence.updated');
    for (const f of online) this.sessions.pushText(f, text, sent);
  }
}
