import type { QueryCreator, Selectable } from 'kysely';
import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { Database, PlayerItemsTable } from '../contracts/tables';
import { isoSeconds, jsonb, type Db } from '../platform/database';
import { registerErasable } from '../changes/erasure';
import { newestFirst } from '../platform/pages';
import type { InventoryQuery, PlayerItemView } from '../schemas/economy';

/**
 * Inventories: rows of (player, item definition, quantity). A stack consumed
 * to nothing is deleted. Consuming locks the row first, so racing consumers
 * of one stack queue on it: each sees what the previous one left, the
 * quantity never goes below zero, and exactly one of them deletes the row
 * (the others then find no item).
 */

registerErasable({ table: 'player_items', column: 'player_id', mode: 'delete' });

export type PlayerItem = Selectable<PlayerItemsTable>;

export function itemView(row: PlayerItem): PlayerItemView {
  return {
    id: row.id,
    item_def_id: row.item_def_id,
    player_id: row.player_id,
    quantity: row.quantity,
    metadata: row.metadata,
    acquired_at: isoSeconds(row.acquired_at)!,
    updated_at: isoSeconds(row.updated_at)!,
  };
}

/** A new inventory row, inside the caller's transaction (or as the last part of its statement). */
export async function addItem(
  trx: QueryCreator<Database>,
  ids: Ctx['ids'],
  item: { playerId: string; itemDefId: string; quantity: number; metadata?: Record<string, unknown> },
): Promise<PlayerItem> {
  const now = new Date();
  return trx
    .insertInto('player_items')
    .values({
      id: ids.uuid(),
      item_def_id: item.itemDefId,
      player_id: item.playerId,
      quantity: item.quantity,
      metadata: jsonb(item.metadata ?? {}),
      acquired_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** `GET /inventory`: newest acquisition first (ids are time-ordered). */
export async function listInventory(db: Db, playerId: string, page: InventoryQuery): Promise<PlayerItemView[]> {
  const rows = await newestFirst(db.selectFrom('player_items').selectAll().where('player_id', '=', playerId), page).execute();
  return rows.map(itemView);
}

/** `POST /inventory/consume`: what is left of the stack (0 once it is gone). */
export async function consumeItem(ctx: Pick<Ctx, 'db'>, playerId: string, itemId: string, quantity: number): Promise<number> {
  return ctx.db.transaction().execute(async (trx) => {
    const row = await trx.selectFrom('player_items').selectAll().where('id', '=', itemId).forUpdate().executeTakeFirst();
    if (!row) throw new ApiError('inventory.item_not_found', 'No such item.');
    if (row.player_id !== playerId) throw new ApiError('forbidden', 'The item belongs to another player.');
    if (quantity > row.quantity) {
      throw new ApiError('inventory.insufficient_quantity', 'The stack holds fewer than that.', { quantity: row.quantity, requested: quantity });
    }
    const remaining = row.quantity - quantity;
    if (remaining === 0) {
      await trx.deleteFrom('player_items').where('id', '=', row.id).execute();
    } else {
      await trx.updateTable('player_items').set({ quantity: remaining, updated_at: new Date() }).where('id', '=', row.id).execute();
    }
    return remaining;
  });
}
