import { z } from 'zod';
import type { ErrorCode } from '../contracts/errors';
import { ERROR_STATUS } from '../contracts/errors';
import { isUuid } from '../platform/ids';
import { isStorableText, UNSTORABLE_TEXT } from '../platform/text';
import { coded } from './rules';

/**
 * Schemas every domain uses. Request schemas describe what a client may send
 * (their JSON Schema is the `input` side); response schemas describe exactly
 * what the service answers, and in tests every answer is checked against them.
 */

/** A lowercase hyphenated UUID as the service issues ids. */
export const Uuid = z.string().meta({ format: 'uuid', description: 'UUIDv7, lowercase and hyphenated' });

/**
 * A path or body id of something looked up: one that is not a UUID cannot
 * name anything, so it answers the lookup's own not-found code (lowercased
 * first). An absent or non-string id fails like any other field.
 */
export function idOf(notFound: ErrorCode, what = 'record'): z.ZodType<string, string> {
  // Lowercased in place (a check of the string, not a transform piped into a second schema):
  // authenticated reads by id parse this on every request.
  return z
    .string()
    .toLowerCase()
    .refine((s) => isUuid(s), coded(notFound, `No such ${what}.`))
    .meta({ format: 'uuid' });
}

/** The most a message holds, chat line and direct message alike (one content rule: runtime/social/messages.ts). */
export const CONTENT_MAX_BYTES = 2000;

/** A string the database can store: no U+0000, no unpaired surrogate. */
export const Text = z.string().refine(isStorableText, UNSTORABLE_TEXT);

/** Query values arrive as text; a repeated key reads as its first value (the adapter does that). */
export function clampedInt(fallback: number, min: number, max: number) {
  return z
    .string()
    .optional()
    .transform((raw) => {
      const t = raw?.trim() ?? '';
      const n = /^-?\d+$/.test(t) ? Number(t) : NaN;
      return Number.isSafeInteger(n) ? Math.min(max, Math.max(min, n)) : fallback;
    })
    .meta({ description: `integer ${min}-${max}, default ${fallback}; a malformed value means the default` });
}

/** `limit` (default and clamp per route) and the optional `before` cursor (an id; ids are time-ordered). */
export function pageQuery(fallback = 50, max = 200) {
  return z.object({
    limit: clampedInt(fallback, 1, max),
    before: Text.optional().meta({ description: 'only items older than this id' }),
  });
}

/** A boolean filter honoured only for the literal strings `true` and `false`; anything else means no filter. */
export const BooleanFilter = z
  .string()
  .optional()
  .transform((v) => (v === 'true' ? true : v === 'false' ? false : null))
  .meta({ description: '`true` or `false`; any other value means no filter' });

/** `{success: true}`, the body of deletes and other acknowledgements. */
export const Success = z.object({ success: z.literal(true) });

/** Epoch milliseconds (live state); database timestamps are ISO 8601 strings. */
export const EpochMs = z.number().int();
export const IsoTime = z.string().meta({ format: 'date-time' });

/** The error object every failure answers with. */
export const ErrorObject = z.object({
  error: z.object({
    code: z.enum(Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]]),
    message: z.string(),
    details: z.record(z.string(), z.unknown()),
  }),
  fields: z.record(z.string(), z.array(z.string())).optional(),
  errors: z.record(z.string(), z.array(z.string())).optional(),
  field: z.string().optional().meta({ description: 'ops lists: the sort field refused (also in details)' }),
  order: z.string().optional().meta({ description: 'ops lists: the order refused (also in details)' }),
});

/** A free-form JSON object (metadata, properties, script values). */
export const JsonObject = z.record(z.string(), z.unknown());
