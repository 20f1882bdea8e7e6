import type { Selectable } from 'kysely';
import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { CloudSavesTable } from '../contracts/tables';
import { isoSeconds, jsonb, type Db } from '../platform/database';
import { registerErasable } from '../changes/erasure';
import { SLOTS_MAX, type CloudSaveView, type SaveSummary, type SaveWrite } from '../schemas/saves';

/**
 * Cloud saves: up to ten named slots per player, each a JSON document with a
 * version for optimistic concurrency (starting at 1, +1 per write). There is no delete:
 * a save goes with its player's erasure.
 *
 * A player's save writes queue on their `players` row (`FOR NO KEY UPDATE`,
 * which foreign-key checks elsewhere do not wait on): two writes naming the
 * same version run one after the other, so exactly one finds it current,
 * and two creations cannot both take the last free slot. Writes to one
 * player's saves are rare enough that one queue per player costs nothing.
 */

registerErasable({ table: 'cloud_saves', column: 'player_id', mode: 'delete' });

type Row = Selectable<CloudSavesTable>;

function view(row: Row): CloudSaveView {
  return { id: row.id, player_id: row.player_id, slot: row.slot, data: row.data, version: row.version, updated_at: isoSeconds(row.updated_at)! };
}

function notFound(): ApiError {
  return new ApiError('save.not_found', 'No save in that slot.');
}

/** `GET /saves`: every slot's summary, by slot name. */
export async function listSaves(db: Db, playerId: string): Promise<SaveSummary[]> {
  const rows = await db
    .selectFrom('cloud_saves')
    .select(['slot', 'version', 'updated_at'])
    .where('player_id', '=', playerId)
    .orderBy('slot')
    .limit(SLOTS_MAX)
    .execute();
  return rows.map((r) => ({ slot: r.slot, version: r.version, updated_at: isoSeconds(r.updated_at)! }));
}

/** `GET /saves/:slot`. */
export async function readSave(db: Db, playerId: string, slot: string): Promise<CloudSaveView> {
  const row = await db.selectFrom('cloud_saves').selectAll().where('player_id', '=', playerId).where('slot', '=', slot).executeTakeFirst();
  if (!row) throw notFound();
  return view(row);
}

/**
 * `PUT /saves/:slot`: creates the slot at version 1 (whatever version was
 * sent), or replaces it at version + 1 when the write names the stored
 * version or none; a write naming another version changes nothing and
 * answers 409 with the stored one.
 */
export async function writeSave(ctx: Pick<Ctx, 'db' | 'ids' | 'clock'>, playerId: string, slot: string, write: SaveWrite): Promise<CloudSaveView> {
  const now = new Date(ctx.clock.now());
  const row = await ctx.db.transaction().execute(async (trx) => {
    const player = await trx.selectFrom('players').select('id').where('id', '=', playerId).forNoKeyUpdate().executeTakeFirst();
    // Erased between the token check and here.
    if (!player) throw new ApiError('unauthenticated');
    const current = await trx.selectFrom('cloud_saves').select(['id', 'version']).where('player_id', '=', playerId).where('slot', '=', slot).executeTakeFirst();
    if (current) {
      if (write.version !== undefined && write.version !== null && write.version !== current.version) {
        throw new ApiError('save.version_conflict', 'The save changed since that version was read.', { current_version: current.version });
      }
      return trx
        .updateTable('cloud_saves')
        .set({ data: jsonb(write.data), version: current.version + 1, updated_at: now })
        .where('id', '=', current.id)
        .returningAll()
        .executeTakeFirstOrThrow();
    }
    const { slots } = await trx
      .selectFrom('cloud_saves')
      .select((eb) => eb.fn.countAll<string | number>().as('slots'))
      .where('player_id', '=', playerId)
      .executeTakeFirstOrThrow();
    if (Number(slots) >= SLOTS_MAX) throw new ApiError('save.slot_limit_reached', `A player keeps at most ${SLOTS_MAX} save slots.`, { max_slots: SLOTS_MAX });
    return trx
      .insertInto('cloud_saves')
      .values({ id: ctx.ids.uuid(), player_id: playerId, slot, data: jsonb(write.data), version: 1, updated_at: now })
      .returningAll()
      .executeTakeFirstOrThrow();
  });
  return view(row);
}
