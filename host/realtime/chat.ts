import {
  CHANNEL_BUFFER,
  CHANNELS_PER_CONNECTION,
  insertChatMessages,
  mayUseChannel,
} from '../../runtime/social/chat';
import type { Channel, ChatDelivery, ChatPush, LiveChat, StampedChatMessage, WorldRoster } from '../../runtime/contracts/live';
import type { Ctx } from '../../runtime/contracts/context';
import { databaseFault } from '../../runtime/platform/database';
import { sendDirectMessage } from '../../runtime/social/dm';
import { postMessage, requireUnblocked } from '../../runtime/social/messages';
import { FrameError } from '../../runtime/contracts/frame-envelope';
import { parseChannel, type chatJoin, type chatLeave, type chatSend, type ChatSend } from '../../runtime/schemas/chat';
import type { dmSend, DmSend } from '../../runtime/schemas/dm';
import type { Session, SessionRegistry } from './sessions';
import type { FrameHandler, Reply } from './gateway';

/** A message waiting for the group commit, and how to settle its sender's frame. */
interface PendingMessage {
  message: StampedChatMessage;
  done: (err?: unknown) => void;
}

/** A channel with live members or recent traffic: its members and its last 100 messages. */
interface RunningChannel {
  id: string;
  /** Joined sockets and the player each joined as (a socket that re-authenticates as someone else stops receiving). */
  members: Map<Session, string>;
  buffer: ChatPush[];
  idleTimer: ReturnType<typeof setTimeout> | null;
}

/**
 * Chat on the socket: `chat.join`, `chat.leave`,
 * `chat.send`, `dm.send`. Every message, a script's and a direct one
 * included, is written by `postMessage` (runtime/social/messages.ts), which
 * checks blocks and hands it to `persist` here. A message is persisted by a group commit (sends
 * arriving while an insert runs go into the next one, so a busy channel costs
 * one statement per batch, not per message) and fans out once stored: a
 * message the database refused reaches nobody. The sender's frame settles
 * only when its message is stored (its later frames wait, and a refused
 * message answers it `internal`). One message never costs another its
 * storage: a failed batch is retried row by row, so only the rows the
 * database refuses on their own fail. A channel runs while it has members;
 * once the last one leaves it stops after `chat_idle_stop_ms`, dropping its
 * buffer (history stays readable over REST).
 */
export class ChatHost implements LiveChat {
  readonly #channels = new Map<string, RunningChannel>();
  readonly #joined = new WeakMap<Session, Set<string>>();
  readonly #sendWindows = new WeakMap<Session, { start: number; count: number }>();
  /** Channels a player follows without joining (a world's, its zone's and the zones in view), by channel. */
  readonly #followers = new Map<string, Set<string>>();
  readonly #followed = new Map<string, Set<string>>();
  #worlds: WorldRoster | null = null;
  #pending: PendingMessage[] = [];
  #writing = false;

  constructor(
    private readonly ctx: Ctx,
    private readonly sessions?: SessionRegistry,
  ) {}

  /** The world host registers who is in which world (the `world:`, `zone:` and `prox:` channels' rule). */
  serveWorlds(roster: WorldRoster): void {
    this.#worlds = roster;
  }

  /**
   * The channels a player follows silently, without `chat.joined` and
   * outside the per-connection cap: every socket of the player receives
   * them, sockets opened later included. An empty list stops following.
   */
  setFollowed(playerId: string, channels: readonly string[]): void {
    const next = new Set(channels);
    for (const id of this.#followed.get(playerId) ?? []) {
      if (next.has(id)) continue;
      const set = this.#followers.get(id);
      set?.delete(playerId);
      if (set?.size === 0) this.#followers.delete(id);
    }
    for (const id of next) {
      let set = this.#followers.get(id);
      if (!set) {
        set = new Set();
        this.#followers.set(id, set);
      }
      set.add(playerId);
    }
    if (next.size === 0) this.#followed.delete(playerId);
    else this.#followed.set(playerId, next);
  }

  // The frame table (frame-table.ts) routes the `chat.*` and `dm.*` client frames here.
  readonly joinFrame: FrameHandler<typeof chatJoin> = (s, { channel_id }) => this.#join(s, channel_id);
  readonly leaveFrame: FrameHandler<typeof chatLeave> = (s, { channel_id }) => this.#leave(s, channel_id);
  readonly sendFrame: FrameHandler<typeof chatSend> = (s, p) => this.#send(s, p);
  readonly dmFrame: FrameHandler<typeof dmSend> = (s, p) => this.#dm(s, p);

  worlds(): WorldRoster | null {
    return this.#worlds;
  }

  /** Set on a fleet (host/fleet/fleet.ts): deliveries go through the bus, so every node hands a channel's messages out in one order. */
  relay: ((message: ChatDelivery) => void) | null = null;

  deliver(message: ChatDelivery): void {
    if (this.relay) return this.relay(message);
    this.deliverHere(message);
  }

  /** Hands a message to this node's members and followers, but the players it is hidden from. */
  deliverHere(delivery: ChatDelivery): void {
    // Most messages are hidden from nobody: only the others pay for a copy without the list and a set.
    let message: ChatPush = delivery;
    let hidden: ReadonlySet<string> | null = null;
    if (delivery.hidden_from) {
      const { hidden_from: hiddenFrom, ...push } = delivery;
      message = push;
      hidden = new Set(hiddenFrom);
    }
    const channel = this.#running(message.channel_id);
    channel.buffer.push(message);
    if (channel.buffer.length > CHANNEL_BUFFER) channel.buffer.shift();
    const text = JSON.stringify({ type: 'chat.message', payload: message });
    const reached = new Set<string>();
    // Written to sockets: a chat.message frame each, and one delivery.
    const sent = this.sessions?.metrics.frameOut('chat.message') ?? { n: 0 };
    const before = sent.n;
    for (const [session, playerId] of channel.members) {
      if (session.playerId !== playerId || hidden?.has(playerId)) continue;
      session.sendText(text, sent);
      reached.add(playerId);
    }
    // A follower that also joined explicitly is not sent the message twice.
    for (const playerId of this.#followers.get(message.channel_id) ?? []) if (!reached.has(playerId) && !hidden?.has(playerId)) this.sessions?.pushText(playerId, text, sent);
    if (this.sessions) this.sessions.metrics.chatDelivered.n += sent.n - before;
  }

  evict(playerId: string, channelId: string): void {
    const channel = this.#channels.get(channelId);
    if (!channel) return;
    for (const [session, joinedAs] of [...channel.members]) if (joinedAs === playerId) this.#part(session, channel);
  }

  recent(channelId: string): readonly ChatPush[] | null {
    return this.#channels.get(channelId)?.buffer ?? null;
  }

  running(max: number): { channel_id: string; members: number }[] {
    const out: { channel_id: string; members: number }[] = [];
    for (const channel of this.#channels.values()) {
      if (out.length >= max) break;
      out.push({ channel_id: channel.id, members: new Set(channel.members.values()).size });
    }
    return out;
  }

  /** Shutdown: no idle timer outlives the node. */
  close(): void {
    for (const channel of this.#channels.values()) if (channel.idleTimer) clearTimeout(channel.idleTimer);
    this.#channels.clear();
  }

  #running(id: string): RunningChannel {
    let channel = this.#channels.get(id);
    if (!channel) {
      channel = { id, members: new Map(), buffer: [], idleTimer: null };
      this.#channels.set(id, channel);
      this.#armIdle(channel);
    }
    return channel;
  }

  #armIdle(channel: RunningChannel): void {
    if (channel.members.size > 0 || channel.idleTimer) return;
    channel.idleTimer = setTimeout(() => {
      if (channel.members.size === 0 && this.#channels.get(channel.id) === channel) this.#channels.delete(channel.id);
    }, this.ctx.settings.chat_idle_stop_ms);
    channel.idleTimer.unref();
  }

  #part(session: Session, channel: RunningChannel): void {
    channel.members.delete(session);
    this.#joined.get(session)?.delete(channel.id);
    this.#armIdle(channel);
  }

  async #join(session: Session, channel: Channel): Promise<Reply | null> {
    const playerId = session.playerId!;
    if (!(await mayUseChannel(this.ctx, playerId, channel))) {
      throw new FrameError('not_authorized', { message: 'You may not join that channel.', details: { channel_id: channel.id } });
    }
    await requireUnblocked(this.ctx.db, channel);
    let joined = this.#joined.get(session);
    if (joined && joined.size >= CHANNELS_PER_CONNECTION) {
      throw new FrameError('too_many_channels', { message: `A connection joins at most ${CHANNELS_PER_CONNECTION} channels.`, details: { limit: CHANNELS_PER_CONNECTION } });
    }
    // The socket closed or changed identity while membership was checked.
    if (session.socket.readyState !== 1 || session.playerId !== playerId) return null;
    if (!joined) {
      joined = new Set();
      this.#joined.set(session, joined);
      session.socket.once('close', () => {
        for (const id of this.#joined.get(session) ?? []) {
          const c = this.#channels.get(id);
          if (c) this.#part(session, c);
        }
      });
    }
    const running = this.#running(channel.id);
    if (running.idleTimer) {
      clearTimeout(running.idleTimer);
      running.idleTimer = null;
    }
    running.members.set(session, playerId);
    joined.add(channel.id);
    return { type: 'chat.joined', payload: { channel_id: channel.id } };
  }

  #leave(session: Session, id: string): Reply {
    const channel = this.#channels.get(id);
    if (channel && channel.members.has(session)) this.#part(session, channel);
    return { type: 'chat.left', payload: { channel_id: id } };
  }

  /** Per-connection budget shared by `chat.send` and `dm.send` (setting `chat_send_rate`). */
  #spend(session: Session): void {
    const rule = this.ctx.settings.chat_send_rate;
    const now = this.ctx.clock.now();
    let w = this.#sendWindows.get(session);
    if (!w || now - w.start >= rule.window) {
      w = { start: now, count: 0 };
      this.#sendWindows.set(session, w);
    }
    if (w.count >= rule.limit) {
      const retry = Math.max(1, Math.ceil((w.start + rule.window - now) / 1000));
      throw new FrameError('rate_limited', { message: 'Too many messages; slow down.', details: { retry_after: retry } });
    }
    w.count++;
  }

  async #send(session: Session, { channel_id, content }: ChatSend): Promise<null> {
    this.#spend(session);
    const playerId = session.playerId!;
    const channel = parseChannel(channel_id);
    // A malformed id and a channel the sender may not use answer alike.
    if (!channel || !(await mayUseChannel(this.ctx, playerId, channel))) {
      throw new FrameError('not_authorized', { message: 'You may not send to that channel.', details: { channel_id } });
    }
    await postMessage(this.ctx, { channel, senderId: playerId, content });
    return null;
  }

  persist(message: StampedChatMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#pending.push({ message, done: (err) => (err === undefined ? resolve() : reject(err)) });
      if (!this.#writing) void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    this.#writing = true;
    while (this.#pending.length > 0) {
      const batch = this.#pending;
      this.#pending = [];
      try {
        await insertChatMessages(this.ctx.db, batch.map((b) => b.message));
        for (const b of batch) b.done();
      } catch (err) {
        // A lost database fails every row alike; retrying them one by one would only wait out the outage again.
        const fault = databaseFault(err);
        if (batch.length === 1 || fault) this.#failed(batch, err);
        else for (const b of batch) await this.#insertAlone(b);
        // What queued behind a batch that timed out has waited one full deadline already; a
        // second batch would make its senders wait out another before hearing 503.
        if (fault === 'database_timeout' && this.#pending.length > 0) {
          const waited = this.#pending;
          this.#pending = [];
          this.#failed(waited, err);
        }
      }
    }
    this.#writing = false;
  }

  async #insertAlone(entry: PendingMessage): Promise<void> {
    try {
      await insertChatMessages(this.ctx.db, [entry.message]);
      entry.done();
    } catch (err) {
      this.#failed([entry], err);
    }
  }

  #failed(entries: PendingMessage[], err: unknown): void {
    this.ctx.log.error('chat_persist_failed', { messages: entries.length, error: err instanceof Error ? err.message : String(err) });
    for (const e of entries) e.done(err);
  }

  async #dm(session: Session, payload: DmSend): Promise<Reply> {
    this.#spend(session);
    const sent = await sendDirectMessage(this.ctx, session.playerId!, payload);
    return { type: 'dm.sent', payload: { channel_id: sent.channel_id } };
  }
}
