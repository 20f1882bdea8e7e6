import type { Ctx } from '../../runtime/contracts/context';
import { acceptedFriendIds } from '../../runtime/social/friends';
import { DEFAULT_STATUS, type LivePresence, type Presence } from '../../runtime/social/presence';
import { presenceUpdate, type PresenceUpdate } from '../../runtime/schemas/presence';
import type { Session, SessionRegistry } from './sessions';
import type { Gateway, Reply } from './gateway';

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

  constructor(
    private readonly ctx: Ctx,
    private readonly sessions: SessionRegistry,
  ) {
    sessions.onPlayerGone((playerId) => {
      this.#state.delete(playerId);
      this.#toFriends(playerId, { status: 'offline', metadata: {} }).catch((err) =>
        this.ctx.log.warn('presence_push_failed', { player_id: playerId, error: err instanceof Error ? err.message : String(err) }),
      );
    });
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
    const friends = await acceptedFriendIds(this.ctx.db, playerId);
    const online = friends.filter((f) => this.sessions.isOnline(f));
    if (online.length === 0) return;
    const text = JSON.stringify({ type: 'presence.updated', payload: { player_id: playerId, status: presence.status, metadata: presence.metadata } });
    for (const f of online) this.sessions.pushText(f, text);
  }
}
