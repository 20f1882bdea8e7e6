import { z } from 'zod';
import { byteLength } from '../contracts/frame-envelope';
import { charLength } from '../platform/text';
import { IsoTime, JsonObject, Text, Uuid } from './common';
import { coded } from './rules';

/** Player profiles: lookup, update and self-erasure. */

export const DISPLAY_NAME_MAX = 64;
export const METADATA_MAX_BYTES = 16_384;

/**
 * A string field that is optional or part of a partial update: a value of
 * another type is a bad value (422 naming the field), never an absent one
 * (400 `missing_field`, which only a required field can be).
 */
export function optionalText<S extends z.ZodType<string, string>>(schema: S) {
  return z
    .custom<string>((v) => typeof v === 'string', 'must be a string')
    .pipe(schema)
    .meta({ type: 'string' });
}

/** The name a profile shows: 1-64 characters as a person counts them. */
export const DisplayName = optionalText(
  z.string().refine((s) => {
    const n = charLength(s);
    return n >= 1 && n <= DISPLAY_NAME_MAX;
  }, `must be 1 to ${DISPLAY_NAME_MAX} characters`),
).meta({ description: `1-${DISPLAY_NAME_MAX} characters` });

/**
 * A query value the route cannot do without. The parser lets an absent query
 * key through unseen, so absence reads as empty, and empty answers 400
 * `missing_field` naming the key, as an absent body field does.
 */
export function requiredQuery(name: string) {
  return Text
    .refine((v) => v !== '', coded('missing_field', `Field '${name}' is required.`, { field: name }))
    .prefault('')
    .meta({ description: 'required: absent or empty is 400 missing_field' });
}

/** `PUT /players/:id`: the keys it recognises; others are ignored, omitted ones stay as they are. */
export const ProfileUpdate = z.object({
  display_name: DisplayName.optional(),
  avatar_url: optionalText(z.string()).optional(),
  metadata: JsonObject
    .refine((m) => byteLength(JSON.stringify(m)) <= METADATA_MAX_BYTES, 'must be 16 KB or less')
    .optional()
    .meta({ description: `a JSON object of at most ${METADATA_MAX_BYTES} bytes encoded` }),
});
export type ProfileUpdate = z.output<typeof ProfileUpdate>;

/** `GET /players?username=`: exact match. */
export const PlayerSearch = z.object({ username: requiredQuery('username') });

/**
 * `POST /players/me/erase`. A password account confirms with its password; a
 * provider or guest account has none to send (which one it is needs the
 * database, so the service decides whether an absent password is missing).
 */
export const EraseConfirmation = z.object({ password: z.string().optional() });
export type EraseConfirmation = z.output<typeof EraseConfirmation>;

/** The public projection of a player; identical for every viewer. */
export const Player = z.object({
  id: Uuid,
  username: z.string(),
  display_name: z.string().nullable(),
  avatar_url: z.string().nullable(),
  metadata: JsonObject,
  inserted_at: IsoTime.nullable(),
  updated_at: IsoTime.nullable(),
});
export type Player = z.output<typeof Player>;

export const PlayerList = z.object({ players: z.array(Player) });

export const Erased = z.object({ deleted: z.literal(true) });
