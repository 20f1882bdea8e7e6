import type { ChatDelivery } from '../contracts/live';
import type { Ctx } from '../contracts/context';

/**
 * What a committed change means for state outside the database: cached
 * tokens, open sockets, chat rooms, live pushes. A service returns (or
 * collects) these while its transaction runs and hands them to
 * `afterCommit` once it has committed, so a rolled-back change touches
 * nothing live, and every path that ends a session or a membership — REST,
 * a script binding, the operator plane — gets the same consequences.
 */
export type Effect =
  /** Every session of the player ended (erasure, ban, password change): its tokens leave the cache and its sockets close. */
  | { kind: 'player_sessions_ended'; playerId: string }
  /** The player was erased: node-local state keyed on them (leaderboard entries) goes too. Comes with `player_sessions_ended`. */
  | { kind: 'player_erased'; playerId: string }
  /** These access tokens were revoked (logout, refresh-token reuse): their cache entries go and the sockets they opened close. */
  | { kind: 'tokens_revoked'; playerIds: readonly string[]; tokenIds: readonly string[]; accessToken?: string | null }
  /** The player's public profile changed: cached copies go. */
  | { kind: 'profile_changed'; playerId: string }
  /** The player's tokens were replaced by a new pair (guest upgrade): cached ones go, the sockets stay with the same player. */
  | { kind: 'player_tokens_replaced'; playerId: string }
  /** The player left (or was removed from) what a chat room belongs to: their sockets leave the room. */
  | { kind: 'membership_ended'; playerId: string; channelId: string }
  /** A chat message was stored: it reaches the channel's members (but those it is hidden from), and for a DM the recipient's sockets too. */
  | { kind: 'message_stored'; push: ChatDelivery; recipientId: string | null };

/** The one subscriber: applies committed effects to the live state of this node. */
export async function afterCommit(ctx: Pick<Ctx, 'auth' | 'live' | 'profiles' | 'leaderboards'>, ...effects: Effect[]): Promise<void> {
  for (const effect of effects) {
    switch (effect.kind) {
      case 'player_sessions_ended':
        ctx.auth.evictPlayer(effect.playerId);
        ctx.profiles.evict(effect.playerId);
        ctx.live.disconnect(effect.playerId);
        break;
      case 'player_erased':
        ctx.leaderboards.erase(effect.playerId);
        break;
      case 'tokens_revoked':
        if (effect.accessToken) await ctx.auth.evictToken(effect.accessToken);
        for (const playerId of effect.playerIds) ctx.auth.evictPlayer(playerId);
        ctx.live.disconnectTokens(effect.tokenIds);
        break;
      case 'profile_changed':
        ctx.profiles.evict(effect.playerId);
        break;
      case 'player_tokens_replaced':
        ctx.auth.evictPlayer(effect.playerId);
        break;
      case 'membership_ended':
        ctx.live.chat.evict(effect.playerId, effect.channelId);
        break;
      case 'message_stored':
        ctx.live.chat.deliver(effect.push);
        if (effect.recipientId) ctx.live.push(effect.recipientId, { type: 'dm.message', payload: { ...effect.push } });
        break;
    }
  }
}
