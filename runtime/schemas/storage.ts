import { z } from 'zod';
import { charLength } from '../platform/text';
import type { ErrorCode } from '../contracts/errors';
import { byteLength } from '../contracts/frame-envelope';
import { idOf, IsoTime, pageQuery, Text, Uuid } from './common';
import { coded, ruled } from './rules';

/**
 * Storage objects over REST (rows per player; `read_perm` and `write_perm`, each `public` or `owner`, are the
 * perms): every route addresses the caller's rows unless `?owner=` names
 * another player, whose rows then answer as their perms allow.
 */

/** What a save's `data` or a storage object's `value` may weigh, JSON-encoded: 256 KB over REST. */
export const STORED_VALUE_MAX_BYTES = 262_144;

/** True when the value's JSON encoding fits the bound (REST bodies and script writes alike). */
export function fitsStoredValue(value: unknown): boolean {
  return byteLength(JSON.stringify(value ?? {})) <= STORED_VALUE_MAX_BYTES;
}

/** A save's `data` or an object's `value`: any JSON value, `{}` when absent, refused with `tooLarge` past the bound. */
export function storedValue(tooLarge: ErrorCode) {
  return z
    .unknown()
    .refine(fitsStoredValue, coded(tooLarge, `The value exceeds ${STORED_VALUE_MAX_BYTES} bytes encoded.`, { max_bytes: STORED_VALUE_MAX_BYTES }))
    .default({})
    .meta({ description: `any JSON value (default {}), at most ${STORED_VALUE_MAX_BYTES} bytes encoded` });
}

/** The columns hold 255 characters; a longer slot, collection or key could never be stored. */
export const NAME_MAX = 255;
export const StoredName = Text.refine((s) => charLength(s) <= NAME_MAX, `must be at most ${NAME_MAX} characters`).meta({
  description: `a path segment of at most ${NAME_MAX} characters`,
});

export const StoragePerm = z.enum(['public', 'owner']);

export const StorageObject = z.object({
  id: Uuid,
  collection: z.string(),
  key: z.string(),
  /** The owner. */
  player_id: Uuid,
  value: z.unknown().meta({ description: 'any JSON value' }),
  version: z.number().int().meta({ description: '1 at creation, +1 per write' }),
  read_perm: StoragePerm,
  write_perm: StoragePerm,
  updated_at: IsoTime,
});
export type StorageObjectView = z.output<typeof StorageObject>;

export const StorageObjectList = z.object({ objects: z.array(StorageObject) });

const Owner = idOf('storage.not_found', 'object')
  .optional()
  .meta({ description: "another player's id: their rows, as their perms allow (reads need read_perm public, writes write_perm public)" });

export const CollectionPath = z.object({ collection: StoredName });
export const ObjectPath = z.object({ collection: StoredName, key: StoredName });

export const OwnerQuery = z.object({ owner: Owner });
export type OwnerQuery = z.output<typeof OwnerQuery>;
export const CollectionQuery = pageQuery().extend({ owner: Owner });
export type CollectionQuery = z.output<typeof CollectionQuery>;

const Perm = ruled(StoragePerm.optional().default('owner'), { code: 'storage.invalid_perm' }).meta({
  description: '`public` or `owner` (default); anything else is 400 storage.invalid_perm',
});

/**
 * `PUT /storage/:collection/:key`. The size of `value` is checked before the
 * perms (the shape's order is the order failures are reported in). An owner
 * write replaces the perms, so an omitted one resets to `owner`; a write to
 * another player's public row keeps the owner's perms.
 */
export const StorageWrite = z.object({
  value: storedValue('storage.value_too_large'),
  read_perm: Perm,
  write_perm: Perm,
});
export type StorageWrite = z.output<typeof StorageWrite>;
