import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { JsonValue, ScriptBinding } from '../lua/host-interface';
import { isForeignKeyViolation } from '../platform/database';
import { isUuid } from '../platform/ids';
import { parseChannel } from '../schemas/chat';
import { contentProblem, postMessage } from './messages';

/**
 * `game.chat.send(channel_id, sender_id, content)` for every script VM
 * (three strings; the sender need not be a member): the message goes the way a client's `chat.send`
 * goes once accepted, through `postMessage` (the node's group commit, then
 * the channel's members on every node through the `message_stored` effect),
 * so history and live delivery cannot tell a script's message from a
 * player's, and a block stops a script relaying one player's words onto a
 * blocked pair's `dm:` channel as it stops the player. As the reference says, the sender need
 * not be a member and the call is a hand-off: it answers `true` at once and
 * storing follows (or is refused, and logged). Scripts are held to `script_chat` sends per channel (a
 * loop in `tick` must not flood a room or the database); a send over it
 * answers `false` and is dropped. Wrong arguments answer `{error = "<usage>"}`.
 */

const USAGE = 'game.chat.send(channel_id, sender_id, content)';
/** Sends handed off and not stored yet; past this the node's database is not keeping up and new ones are dropped. */
const MAX_PENDING = 1000;
/**
 * A sender the database refused (no such player) is refused at once for this
 * long: its messages share the node's group commit with players', and each
 * batch holding one falls back to a row at a time.
 */
const REFUSED_SENDER_MS = 60_000;
const REFUSED_SENDERS_MAX = 1000;

export function chatBindings(ctx: Ctx): { send: ScriptBinding } {
  let pending = 0;
  /** Refused senders and until when (epoch ms), oldest first. */
  const refused = new Map<string, number>();
  const send: ScriptBinding = ([channelId, senderId, content], caller): JsonValue => {
    if (typeof channelId !== 'string' || typeof senderId !== 'string' || typeof content !== 'string') {
      return { error: `${USAGE}: all three must be strings` };
    }
    const channel = parseChannel(channelId);
    if (!channel) return { error: `${USAGE}: channel_id is not a channel id (global:, room:, world:, zone:, prox: or dm:)` };
    if (!isUuid(senderId)) return { error: `${USAGE}: sender_id must be a player id` };
    // A script has nothing to say with an empty line, on any channel; the rest is every message's rule.
    const problem = content === '' ? 'content must not be empty' : contentProblem(channel, content)?.message;
    if (problem) return { error: `${USAGE}: ${problem}` };
    const refusedUntil = refused.get(senderId);
    if (refusedUntil !== undefined && refusedUntil > ctx.clock.now()) {
      ctx.log.warn('script_chat_dropped', { channel_id: channelId, match_id: caller.matchId, mode: caller.mode, reason: 'unknown_sender' });
      return false;
    }
    if (pending >= MAX_PENDING || !ctx.limits.take('script_chat', channelId).ok) {
      ctx.log.warn('script_chat_dropped', { channel_id: channelId, match_id: caller.matchId, mode: caller.mode, reason: pending >= MAX_PENDING ? 'backlog' : 'rate_limited' });
      return false;
    }
    pending++;
    // A channel's messages are stored and delivered in the order the scripts sent them (postMessage keeps the order).
    void postMessage(ctx, { channel, senderId, content })
      .catch((err: unknown) => {
        if (isForeignKeyViolation(err)) {
          refused.delete(senderId);
          if (refused.size >= REFUSED_SENDERS_MAX) refused.delete(refused.keys().next().value!);
          refused.set(senderId, ctx.clock.now() + REFUSED_SENDER_MS);
        }
        const why = err instanceof ApiError && err.code === 'dm.blocked' ? { reason: 'blocked' } : { reason: 'not_stored', error: err instanceof Error ? err.message : String(err) };
        ctx.log.warn('script_chat_dropped', { channel_id: channelId, match_id: caller.matchId, mode: caller.mode, ...why });
      })
      .finally(() => {
        pending--;
      });
    return true;
  };
  return { send };
}
