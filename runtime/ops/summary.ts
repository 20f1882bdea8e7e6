import { sql } from 'kysely';
import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import { isoSeconds } from '../platform/database';
import { RECENT_MATCHES, type PlayerSummary } from '../schemas/ops';

/**
 * `GET /ops/players/:id/summary`: what the console's player page draws, so
 * opening a player reads a few small aggregates instead of the whole export.
 * It gives out nothing the export does not (the same rows, fewer columns),
 * and needs the same capability class, `player_data`.
 */

/**
 * One repeatable-read snapshot, so the counts agree with each other while the
 * player plays; a well-formed id naming no player is 404 `ops.not_found`.
 */
export async function playerSummary(ctx: Pick<Ctx, 'db'>, playerId: string): Promise<PlayerSummary> {
  const summary = await ctx.db
    .transaction()
    .setIsolationLevel('repeatable read')
    .execute(async (trx) => {
      const exists = await trx.selectFrom('players').select('id').where('id', '=', playerId).executeTakeFirst();
      if (!exists) return null;
      const identities = await trx.selectFrom('player_identities').select('provider').where('player_id', '=', playerId).orderBy('id').execute();
      const friends = await trx
        .selectFrom('friendships')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('status', '=', 'accepted')
        .where((eb) => eb.or([eb('player_id', '=', playerId), eb('friend_id', '=', playerId)]))
        .executeTakeFirstOrThrow();
      const groups = await trx.selectFrom('group_members').select((eb) => eb.fn.countAll<string>().as('n')).where('player_id', '=', playerId).executeTakeFirstOrThrow();
      const stats = await trx.selectFrom('player_stats').select(['games_played', 'wins']).where('player_id', '=', playerId).executeTakeFirst();
      const wallets = await trx.selectFrom('wallets').select(['currency', 'balance']).where('player_id', '=', playerId).orderBy('id').execute();
      const items = await trx.selectFrom('player_items').select(['item_def_id', 'quantity', 'acquired_at']).where('player_id', '=', playerId).orderBy('id').execute();
      const saves = await trx.selectFrom('cloud_saves').select(['slot', 'version', 'updated_at']).where('player_id', '=', playerId).orderBy('id').execute();
      const storage = await trx
        .selectFrom('storage')
        .select((eb) => [eb.fn.countAll<string>().as('objects'), sql<string>`count(distinct collection)`.as('collections')])
        .where('player_id', '=', playerId)
        .executeTakeFirstOrThrow();
      // The roster is only searched, never given out.
      const matches = await trx
        .selectFrom('match_records')
        .select(['id', 'mode', 'status', 'finished_at'])
        .where(sql<boolean>`players @> jsonb_build_array(${playerId}::text)`)
        .orderBy('inserted_at', 'desc')
        .orderBy('id', 'desc')
        .limit(RECENT_MATCHES)
        .execute();
      return { identities, friends, groups, stats, wallets, items, saves, storage, matches };
    });
  if (!summary) throw new ApiError('ops.not_found', 'No such player.');
  const { identities, friends, groups, stats, wallets, items, saves, storage, matches } = summary;
  // Counts and integer columns may come back as text from the PostgreSQL driver.
  return {
    player_id: playerId,
    providers: identities.map((i) => i.provider),
    friends: Number(friends.n),
    groups: Number(groups.n),
    stats: stats ? { games_played: Number(stats.games_played), wins: Number(stats.wins) } : null,
    wallets: wallets.map((w) => ({ currency: w.currency, balance: Number(w.balance) })),
    items: items.map((i) => ({ item_def_id: i.item_def_id, quantity: Number(i.quantity), acquired_at: isoSeconds(i.acquired_at)! })),
    saves: saves.map((s) => ({ slot: s.slot, version: Number(s.version), updated_at: isoSeconds(s.updated_at)! })),
    storage: { objects: Number(storage.objects), collections: Number(storage.collections) },
    recent_matches: matches.map((m) => ({ id: m.id, mode: m.mode, status: m.status, finished_at: isoSeconds(m.finished_at) })),
  };
}
