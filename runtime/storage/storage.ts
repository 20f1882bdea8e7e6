import { sql, type ExpressionBuilder, type Selectable, type Transaction } from 'kysely';
import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { Database, StoragePerm, StorageTable } from '../contracts/tables';
import { isoSeconds, jsonb, type Db } from '../platform/database';
import { registerErasable } from '../changes/erasure';
import type { CommitGuard } from '../platform/commit-guard';
import { newestFirst } from '../platform/pages';
import type { CollectionQuery, StorageObjectView, StorageWrite } from '../schemas/storage';

/**
 * Storage objects: JSON values under (collection, key), one row per owner
 * (a collection name is not shared across players), plus the
 * owner-less namespace only game scripts reach (`player_id` null).
 *
 * Over REST a player addresses their own rows, or with `owner` another
 * player's: `read_perm: public` lets others read a row, `write_perm: public`
 * lets them overwrite or delete it; a row another player may not read is
 * answered as absent. Only the owner creates rows and sets perms.
 *
 * There is no optimistic concurrency here (saves have it): each write is
 * one upsert on the row's unique index, so concurrent writers never lose
 * the row or its version count, and the last one's value stays.
 */

registerErasable({ table: 'storage', column: 'player_id', mode: 'delete' });

export type StoredRow = Selectable<StorageTable>;
type Trx = Transaction<Database>;

/** A row owned by a player, as REST answers it. */
export function objectView(row: StoredRow): StorageObjectView {
  return {
    id: row.id,
    collection: row.collection,
    key: row.key,
    player_id: row.player_id!,
    value: row.value,
    version: row.version,
    read_perm: row.read_perm,
    write_perm: row.write_perm,
    updated_at: isoSeconds(row.updated_at)!,
  };
}

function notFound(): ApiError {
  return new ApiError('storage.not_found', 'No such storage object.');
}

/** Where a row lives: its owner (null for the scripts' shared namespace), collection and key. */
export interface ObjectAddress {
  owner: string | null;
  collection: string;
  key: string;
}

/** The filter that picks the row at an address. */
function at(a: ObjectAddress) {
  return (eb: ExpressionBuilder<Database, 'storage'>) =>
    eb.and([a.owner === null ? eb('player_id', 'is', null) : eb('player_id', '=', a.owner), eb('collection', '=', a.collection), eb('key', '=', a.key)]);
}

/** The row at an address, any perms; null when absent. Scripts read through this with the server's full access. */
export async function findObject(db: Db | Trx, a: ObjectAddress): Promise<StoredRow | null> {
  return (await db.selectFrom('storage').selectAll().where(at(a)).executeTakeFirst()) ?? null;
}

/**
 * Creates or replaces the row at an address: version 1 at creation, + 1 per
 * write. `perms` replace the row's (an owner write over REST); without them
 * a new row gets `owner`/`owner` and an existing one keeps its own (a script write).
 */
export async function putObject(
  ctx: Pick<Ctx, 'db' | 'ids' | 'clock'>,
  a: ObjectAddress,
  value: unknown,
  perms?: { read: StoragePerm; write: StoragePerm },
  guard: CommitGuard = {},
): Promise<StoredRow> {
  const now = new Date(ctx.clock.now());
  return ctx.db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('storage')
      .values({
        id: ctx.ids.uuid(),
        player_id: a.owner,
        collection: a.collection,
        key: a.key,
        value: jsonb(value),
        version: 1,
        read_perm: perms?.read ?? 'owner',
        write_perm: perms?.write ?? 'owner',
        updated_at: now,
      })
      .onConflict((oc) => {
        // The conflict target names the partial index of the row's namespace.
        const target = a.owner === null ? oc.columns(['collection', 'key']).where('player_id', 'is', null) : oc.columns(['player_id', 'collection', 'key']).where('player_id', 'is not', null);
        return target.doUpdateSet((eb) => ({
          value: eb.ref('excluded.value'),
          version: sql<number>`storage.version + 1`,
          updated_at: eb.ref('excluded.updated_at'),
          ...(perms ? { read_perm: eb.ref('excluded.read_perm'), write_perm: eb.ref('excluded.write_perm') } : {}),
        }));
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    guard.beforeCommit?.();
    return row;
  });
}

/** Another player's row the caller may not touch: forbidden when they may at least read it, else absent. */
async function refusal(db: Db, a: ObjectAddress): Promise<ApiError> {
  const row = await findObject(db, a);
  return row?.read_perm === 'public' ? new ApiError('storage.forbidden', "The owner's write_perm is owner.") : notFound();
}

/** `GET /storage/:collection`: the owner's rows of the collection (only public ones for another player), newest first. */
export async function listObjects(db: Db, caller: string, collection: string, q: CollectionQuery): Promise<StorageObjectView[]> {
  const owner = q.owner ?? caller;
  let query = db.selectFrom('storage').selectAll().where('player_id', '=', owner).where('collection', '=', collection);
  if (owner !== caller) query = query.where('read_perm', '=', 'public');
  const rows = await newestFirst(query, q).execute();
  return rows.map(objectView);
}

/** `GET /storage/:collection/:key`. */
export async function readObject(db: Db, caller: string, a: ObjectAddress & { owner: string }): Promise<StorageObjectView> {
  const row = await findObject(db, a);
  if (!row || (a.owner !== caller && row.read_perm !== 'public')) throw notFound();
  return objectView(row);
}

/** `PUT /storage/:collection/:key`: the owner upserts and sets perms; another player only replaces the value of a row whose write_perm is public. */
export async function writeObject(ctx: Pick<Ctx, 'db' | 'ids' | 'clock'>, caller: string, a: ObjectAddress & { owner: string }, write: StorageWrite): Promise<StorageObjectView> {
  if (a.owner === caller) return objectView(await putObject(ctx, a, write.value, { read: write.read_perm, write: write.write_perm }));
  const row = await ctx.db
    .updateTable('storage')
    .where(at(a))
    .set({ value: jsonb(write.value), version: sql<number>`version + 1`, updated_at: new Date(ctx.clock.now()) })
    .where('write_perm', '=', 'public')
    .returningAll()
    .executeTakeFirst();
  if (!row) throw await refusal(ctx.db, a);
  return objectView(row);
}

/** `DELETE /storage/:collection/:key`: the owner, or anyone when write_perm is public. */
export async function deleteObject(db: Db, caller: string, a: ObjectAddress & { owner: string }): Promise<void> {
  let query = db.deleteFrom('storage').where(at(a));
  if (a.owner !== caller) query = query.where('write_perm', '=', 'public');
  const gone = await query.executeTakeFirst();
  if (gone.numDeletedRows > 0n) return;
  throw a.owner === caller ? notFound() : await refusal(db, a);
}
