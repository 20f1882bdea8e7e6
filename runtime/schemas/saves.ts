import { z } from 'zod';
import { IsoTime, Uuid } from './common';
import { storedValue, StoredName } from './storage';

/** Cloud saves over REST: up to ten named slots per player, versioned (starting at 1, +1 per write). */

export const SLOTS_MAX = 10;

export const CloudSave = z.object({
  id: Uuid,
  player_id: Uuid,
  slot: z.string(),
  data: z.unknown().meta({ description: 'any JSON value' }),
  version: z.number().int().meta({ description: '1 at creation, +1 per write' }),
  updated_at: IsoTime,
});
export type CloudSaveView = z.output<typeof CloudSave>;

export const SaveSummary = CloudSave.pick({ slot: true, version: true, updated_at: true });
export type SaveSummary = z.output<typeof SaveSummary>;
export const SaveList = z.object({ saves: z.array(SaveSummary) });

export const SlotPath = z.object({ slot: StoredName });

/**
 * `PUT /saves/:slot`. `version` is the one the client last read: a write
 * naming another is refused with the current one; without it the write
 * overwrites whatever is stored; creating a slot ignores it.
 */
export const SaveWrite = z.object({
  data: storedValue('save.too_large'),
  version: z.number().int().nullish().meta({ description: 'the version the write expects to replace; omit to overwrite unconditionally' }),
});
export type SaveWrite = z.output<typeof SaveWrite>;
