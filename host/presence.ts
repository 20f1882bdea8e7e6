import type { Ctx } from '../runtime/context';
import { FrameError, type ClientFrame } from '../runtime/frames';
import { DEFAULT_STATUS, parsePresenceUpdate, type LivePresence, type Presence } from '../runtime/presence';
import type { Session, SessionRegistry } from './sessions';
import type { Gateway, Reply } from './ws';

/**
 * Presence on this node (wire-protocol 10.1): `presence.update` stores the
 * player's status (and our additive metadata) for as long as they have a live
 * socket and answers `presence.updated` with the stored value. Nothing is
 * pushed to other players: a client that sent `presence.update` without a
 * `cid` takes the next un-correlated `presence.updated` as its reply, so a
 * friend's change arriving under that type would be mistaken for it. Friends
 * read each other's presence from `GET /friends`.
 */
export class PresenceHost implements LivePresence {
  readonly #state = new Map<string, Presence>();

  // `ctx` stays in the signature host/live.ts wires; presence needs no database since nothing is pushed to friends.
  constructor(
    _ctx: Ctx,
    private readonly sessions: SessionRegistry,
  ) {
    sessions.onPlayerGone((playerId) => this.#state.delete(playerId));
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

  #update(session: Session, frame: ClientFrame): Reply {
    // Wire-protocol 2.4: not among the frames that work without a payload.
    if (!frame.hasPayload) throw new FrameError('unknown_type');
    const presence = parsePresenceUpdate(frame.payload);
    this.#state.set(session.playerId!, presence);
    return { type: 'presence.updated', payload: { status: presence.status, metadata: presence.metadata } };
  }
}
