import type { ExpressionBuilder, Transaction } from 'kysely';
import type { Db } from '../platform/database';
import type { Database } from '../contracts/tables';

/**
 * Blocks, as every path that carries a player's words to another asks about
 * them: direct messages and a pair's `dm:` channel (messages.ts), lines in
 * a channel the pair shares (messages.ts, and the history in chat.ts), group
 * invitations (groups.ts), friend requests (friends.ts). A block is a
 * `friendships` row with status `blocked`, and it counts both ways whoever
 * holds it. This module imports no other domain module, so each of those can
 * ask without an import cycle.
 */

/** The rows between two players, in either direction. */
export function betweenPair(a: string, b: string) {
  return (eb: ExpressionBuilder<Database, 'friendships'>) =>
    eb.or([eb.and([eb('player_id', '=', a), eb('friend_id', '=', b)]), eb.and([eb('player_id', '=', b), eb('friend_id', '=', a)])]);
}

/** True when either player has blocked the other. */
export async function eitherBlocked(db: Db | Transaction<Database>, a: string, b: string): Promise<boolean> {
  const row = await db.selectFrom('friendships').select('id').where('status', '=', 'blocked').where(betweenPair(a, b)).executeTakeFirst();
  return row !== undefined;
}

/** The players in a block with this one, either way, as a subquery (column `partner`). */
export function blockPartnersQuery(db: Db | Transaction<Database>, playerId: string) {
  const blocked = db.selectFrom('friendships').where('status', '=', 'blocked');
  return blocked.select('friend_id as partner').where('player_id', '=', playerId).union(blocked.select('player_id as partner').where('friend_id', '=', playerId));
}

/** The players in a block with this one, either way. */
export async function blockPartners(db: Db | Transaction<Database>, playerId: string): Promise<string[]> {
  return (await blockPartnersQuery(db, playerId).execute()).map((r) => r.partner);
}
