import type { LiveMatchFilter, MatchListing } from '../schemas/matches';
import type { Presence } from '../schemas/presence';
import type { WorldListFilter, WorldListing } from '../schemas/worlds';

/**
 * The node's real-time state as the handler library reaches it through
 * `ctx.live`: the host owns every piece and serves it behind these
 * interfaces, so a service names what it needs without reaching up to a
 * concrete class.
 */

/** What REST handlers and other host services may reach of the real-time host. */
export interface LiveState {
  /** Sends a frame to every live socket of the player; returns how many got it. */
  push(playerId: string, frame: { type: string; payload: Record<string, unknown> }): number;
  /** Closes every socket of the player (normal close, no frame): erasure, revocation. */
  disconnect(playerId: string): void;
  /** Closes the sockets that authenticated with these access-token row ids (revocation). */
  disconnectTokens(tokenIds: readonly string[]): void;
  matches: LiveMatches;
  /** Live worlds on this node (their stored side: runtime/worlds/worlds.ts). */
  worlds: LiveWorlds;
  matchmaker: LiveMatchmaker;
  rpc: RpcDispatcher;
  /** Chat channels running on this node (who may use which: runtime/social/chat.ts). */
  chat: LiveChat;
  /** Who is online here and with what status; the ops stats read `onlineCount()`. */
  presence: LivePresence;
}

/** Extension and game-script RPC methods, one dispatcher for the socket and HTTP. */
export interface RpcDispatcher {
  /** Resolves to the result object; rejects with an `ApiError` (`rpc.unknown_method`, a declared code, or `internal`). */
  call(method: string, params: Record<string, unknown>, caller: { playerId: string }): Promise<Record<string, unknown>>;
}

// ---- matches and the matchmaker -------------------------------------------

export interface LiveMatches {
  /** Listed modes only, `waiting` and `running` only. */
  list(filter: LiveMatchFilter): MatchListing[];
  /** The player was admitted to this node's live (or just finished) match of that id. */
  isParticipant(matchId: string, playerId: string): boolean;
}

export interface MatchmakerQueued {
  ticket_id: string;
  status: 'pending';
  players_needed: number | null;
  already_queued: boolean;
}

/** `GET /matchmaker/:ticket_id`: the key is `id`; `submitted_at` is epoch ms. */
export interface MatchmakerTicketView {
  id: string;
  mode: string;
  status: 'pending';
  properties: Record<string, unknown>;
  submitted_at: number;
}

/** What the ops plane reads per mode, published every matchmaker tick. */
export interface MatchmakerSample {
  waiting: number;
  oldest_wait_ms: number;
  average_wait_ms: number;
}

export interface LiveMatchmaker {
  /** Throws `matchmaker.unknown_mode` / `matchmaker.queue_full`. */
  add(playerId: string, mode: string, properties: Record<string, unknown>): MatchmakerQueued;
  /** Throws `matchmaker.ticket_not_found` (404), for another player's ticket too. */
  get(playerId: string, ticketId: string): MatchmakerTicketView;
  remove(playerId: string, ticketId: string): void;
  /** The latest per-mode sample; never touches the queue. */
  samples(): Record<string, MatchmakerSample>;
  /** Epoch ms the latest sample was taken, or null before the first. */
  sampledAt(): number | null;
}

// ---- worlds ---------------------------------------------------------------

export interface LiveWorlds {
  /** Listed worlds that are loading or running, at most 500 ms stale. */
  list(filter: Pick<WorldListFilter, 'mode' | 'has_capacity'>): WorldListing[];
  /** Any live world by id, listed or not; null for an unknown id. */
  get(id: string): WorldListing | null;
  /** Creates a world owned by the player (who is not joined); rejects with a `FrameError` whose reason is a `WorldCreateFailure` (runtime/worlds/worlds.ts). */
  create(mode: string | null, ownerId: string): Promise<WorldListing>;
  /** Whether the player is in that world now (chat channel membership). */
  inWorld(playerId: string, worldId: string): boolean;
}

// ---- chat ------------------------------------------------------------------

export type ChannelKind = 'global' | 'dm' | 'world' | 'zone' | 'prox' | 'room';

export interface Channel {
  id: string;
  kind: ChannelKind;
  /** `global:` name. */
  name?: string;
  /** `dm:` participants, ascending. */
  players?: [string, string];
  /** `world:`, `zone:`, `prox:`. */
  worldId?: string;
  /** `room:`. */
  groupId?: string;
}

/** A message as the socket pushes it (`chat.message`, and the body of `dm.message`). */
export interface ChatPush {
  channel_id: string;
  sender_id: string;
  content: string;
  /** Epoch ms, unlike the ISO strings REST returns. */
  sent_at: number;
}

/**
 * A stored message on its way to a channel's members (over a fleet's bus
 * too): the push, and the players who must not be shown it, those in a block
 * with its sender. Never sent to a socket as is.
 */
export interface ChatDelivery extends ChatPush {
  hidden_from?: readonly string[];
}

/** Who is in which world; the world host implements it. */
export interface WorldRoster {
  inWorld(playerId: string, worldId: string): boolean;
}

/** The node's chat channels, as REST handlers and other services reach them through `ctx.live.chat`. */
export interface LiveChat {
  /** The world host's roster, or null while no world host runs (then world channels refuse everyone). */
  worlds(): WorldRoster | null;
  /** Fans a stored message out to the connections joined to its channel (but the players it is hidden from) and keeps it in the channel's buffer. */
  deliver(message: ChatDelivery): void;
  /** Drops every connection of the player from the channel (left or kicked from the group). */
  evict(playerId: string, channelId: string): void;
  /** The running channel's in-memory buffer, oldest first; null when the channel is not running. */
  recent(channelId: string): readonly ChatPush[] | null;
  /** Up to `max` running channels, oldest first, each with its distinct players joined (the ops channel list). */
  running(max: number): { channel_id: string; members: number }[];
  /**
   * The node's group commit: stores a stamped message along with the others
   * arriving at the same time; rejects when it was not stored. Called only by
   * `postMessage` (messages.ts). A node without one (REST only) stores each
   * message with a statement of its own.
   */
  persist?(message: StampedChatMessage): Promise<void>;
}

export interface NewChatMessage {
  channel: Channel;
  senderId: string;
  content: string;
  /** Direct messages only. */
  recipientId?: string;
  metadata?: Record<string, unknown>;
}

export type StampedChatMessage = NewChatMessage & { id: string; sentAt: number };

// ---- presence --------------------------------------------------------------

/**
 * Presence (a status, plus an additive metadata object): a player
 * online on this node has a status — any JSON value the client sent, `online`
 * when absent, never checked against a list — and a small metadata object,
 * both set with `presence.update`, readable by friends over REST, and cleared
 * when their last socket closes. Nothing is persisted. REST handlers and the
 * ops plane read it through `ctx.live.presence`.
 */
export interface LivePresence {
  /** The player's presence while they have a live socket on any node of the fleet, else null. */
  get(playerId: string): Presence | null;
  /** Distinct players with at least one authenticated socket on any node; throws when the fleet's presence is out of touch. */
  onlineCount(): number;
}
