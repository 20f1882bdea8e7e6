import { z } from 'zod';
import type { ErrorCode } from '../contracts/errors';

/**
 * How a field's failure is answered when the generic rule is not the one the
 * wire references ask for. The generic rule: over REST a required field that
 * is absent, or not a string where a string is wanted, is 400 `missing_field`
 * and any other bad value is 422 `validation_failed`; on the socket an absent
 * key answers the frame's own `missing` reason and a bad value `invalid_payload`.
 * Kept in a registry of its own so it never leaks into the API documents.
 */
export interface FieldRule {
  /** One code for every failure of the field, on both transports (e.g. a lookup id that is not a UUID: the route's not-found code). */
  code?: ErrorCode;
  /** The socket reason when the key is present with a bad value. */
  invalidReason?: string;
  /** The socket reason when the key is absent. */
  absentReason?: string;
}

export const fieldRules = z.registry<FieldRule>();

/** Attaches a field rule and hands the schema back, so a rule reads inline in a shape. */
export function ruled<S extends z.ZodType>(schema: S, rule: FieldRule): S {
  fieldRules.add(schema, rule);
  return schema;
}

/**
 * A refinement's failure carries a code of the closed set (e.g. `dm.content_empty`).
 * Both adapters answer with that code, the refinement's message and these details.
 */
export function coded(code: ErrorCode, message: string, details: Record<string, unknown> = {}): { message: string; params: { code: ErrorCode; details: Record<string, unknown> } } {
  return { message, params: { code, details } };
}
