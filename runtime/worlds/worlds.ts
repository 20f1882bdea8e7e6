import type { Db } from '../platform/database';
import { jsonb } from '../platform/database';
import type { IdSource } from '../platform/ids';
import type { JsonObject, JsonValue } from '../lua/host-interface';
import type { WorldListFilter, WorldListing } from '../schemas/worlds';

/**
 * Worlds as the handler library sees them: the live worlds the host serves
 * behind `ctx.live.worlds`, and the tables a persistent world keeps so it
 * outlives a restart.
 */

/** Why a world could not be created; REST and the socket spell each differently. */
export type WorldCreateFailure = 'world_capacity_reached' | 'player_world_limit_reached' | 'not_found' | 'wrong_mode_type' | 'world_server_not_started';

/** One zone as a persistent world saved it. */
export interface ZoneSnapshot {
  x: number;
  y: number;
  entities: Record<string, JsonObject>;
  zone_state: JsonValue;
  tick: number;
}

export interface PersistentWorld {
  id: string;
  mode: string;
  seed: number;
  zones: ZoneSnapshot[];
}

/** A persistent world is remembered from its creation, so a restart brings back even one that never saved a zone. */
export async function rememberWorld(db: Db, world: { id: string; mode: string; seed: number }): Promise<void> {
  await db.insertInto('persistent_worlds').values(world).onConflict((c) => c.column('id').doNothing()).execute();
}

/** The world ended for good: nothing of it comes back. */
export async function forgetWorld(db: Db, worldId: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('zone_snapshots').where('world_id', '=', worldId).execute();
    await trx.deleteFrom('persistent_worlds').where('id', '=', worldId).execute();
  });
}

/** Saves every zone of one snapshot in one transaction (a restart sees the whole of one save or the whole of the previous). */
export async function saveSnapshot(db: Db, ids: IdSource, worldId: string, zones: readonly ZoneSnapshot[], at: Date): Promise<void> {
  if (zones.length === 0) return;
  await db.transaction().execute(async (trx) => {
    for (const z of zones) {
      await trx
        .insertInto('zone_snapshots')
        .values({
          id: ids.uuid(),
          world_id: worldId,
          zone_x: z.x,
          zone_y: z.y,
          entities: jsonb(z.entities),
          zone_state: jsonb(z.zone_state ?? {}),
          entity_timers: jsonb({}),
          spawner_state: jsonb({}),
          tick: z.tick,
          snapshot_at: at,
        })
        .onConflict((c) =>
          c.columns(['world_id', 'zone_x', 'zone_y']).doUpdateSet({
            entities: jsonb(z.entities),
            zone_state: jsonb(z.zone_state ?? {}),
            tick: z.tick,
            snapshot_at: at,
          }),
        )
        .execute();
    }
  });
}

/** Every remembered world with its zones, oldest first. */
export async function loadPersistentWorlds(db: Db): Promise<PersistentWorld[]> {
  const worlds = await db.selectFrom('persistent_worlds').select(['id', 'mode', 'seed']).orderBy('inserted_at').orderBy('id').execute();
  if (worlds.length === 0) return [];
  const zones = await db
    .selectFrom('zone_snapshots')
    .select(['world_id', 'zone_x', 'zone_y', 'entities', 'zone_state', 'tick'])
    .where(
      'world_id',
      'in',
      worlds.map((w) => w.id),
    )
    .execute();
  const byWorld = new Map<string, ZoneSnapshot[]>();
  for (const z of zones) {
    const list = byWorld.get(z.world_id) ?? [];
    list.push({ x: z.zone_x, y: z.zone_y, entities: (z.entities ?? {}) as Record<string, JsonObject>, zone_state: (z.zone_state ?? null) as JsonValue, tick: Number(z.tick) });
    byWorld.set(z.world_id, list);
  }
  return worlds.map((w) => ({ id: w.id, mode: w.mode, seed: Number(w.seed), zones: byWorld.get(w.id) ?? [] }));
}
