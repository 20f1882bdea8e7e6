import type { Ctx } from '../runtime/context';
import { FrameError, isPlainObject, type ClientFrame } from '../runtime/frames';
import { acceptedFriendIds } from '../runtime/friends';
import { DEFAULT_STATUS, parsePresenceUpdate, type LivePresence, type Presence } from '../runtime/presence';
import type { Session, SessionRegistry } from './sessions';
import type { Gateway, Reply } from './ws';

/**
 * Presence on this node: `presence.update` stores the player's status and
 * metadata for as long as they have a live socket and pushes
 * `presence.updated` `{player_id, status, metadata}` to their online accepted
 * friends; the last socket closing clears it and pushes `status: "offline"`.
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
    gateway.route('presence.update', { auth: true, handle: (s, f) => this.#update(s, f) });
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

  async #update(session: Session, frame: ClientFrame): Promise<Reply> {
    const payload = frame.hasPayload ? frame.payload : {};
    if (!isPlainObject(payload)) throw new FrameError('invalid_payload', { message: 'presence.update takes an object.' });
    const presence = parsePresenceUpdate(payload);
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
