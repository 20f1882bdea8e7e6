import type { z } from 'zod';
import { ApiError, missingField, validationFailed, type ErrorCode } from '../contracts/errors';
import { FrameError, isPlainObject } from '../contracts/frame-envelope';
import type { ClientFrameContract } from './frame-contract';
import { fieldRules, type FieldRule } from './rules';

/**
 * The one adapter from zod's verdict to the closed error set. REST and the
 * socket validate a message with the same schema; only the spelling of the
 * failure differs, as each transport's reference fixes it:
 *
 * - a refinement that carries a code (`coded()`), or a field whose rule names
 *   one, answers that code on both transports;
 * - REST: an absent required field, or a non-string where a string is
 *   wanted, is 400 `missing_field` with `details.field`; every other bad value
 *   is 422 `validation_failed` with the per-field messages under the route's
 *   legacy key (`fields` or `errors`), repeated in `details`;
 * - socket: an absent key answers the frame's `missing` reason (or the field's
 *   own), a bad value `invalid_payload` (or the field's own reason).
 */

type Issue = z.core.$ZodIssue;
export type LegacyKey = 'fields' | 'errors';
export type Part = 'params' | 'query' | 'body';

/** Parses one part of a REST request, or throws the error object the failure answers. */
export function restInput<S extends z.ZodType>(schema: S, value: unknown, part: Part, legacy: LegacyKey): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw restFailure(schema, result.error.issues, value, part, legacy);
}

function restFailure(schema: z.ZodType, issues: readonly Issue[], value: unknown, part: Part, legacy: LegacyKey): ApiError {
  const byCode = codedFailure(schema, issues);
  if (byCode) return byCode;
  if (part === 'body') {
    for (const issue of issues) {
      if (issue.path.length !== 1 || issue.code !== 'invalid_type') continue;
      const field = String(issue.path[0]);
      const given = isPlainObject(value) ? value[field] : undefined;
      if (given === undefined || issue.expected === 'string') return missingField(field);
    }
  }
  const problems: Record<string, string[]> = {};
  for (const issue of issues) {
    const field = issue.path.length > 0 ? String(issue.path[0]) : '';
    (problems[field] ??= []).push(issue.message);
  }
  return validationFailed(legacy, problems);
}

/** How a frame answers the failures its schema cannot tell apart on its own (see `ClientFrameContract`). */
export type FrameRules = Pick<ClientFrameContract, 'missing' | 'invalid' | 'notObject' | 'typed'>;

/** Parses a frame payload, or throws the `FrameError` the failure answers. */
export function frameInput<S extends z.ZodType>(schema: S, type: string, payload: unknown, rules: FrameRules): z.output<S> {
  const result = schema.safeParse(payload);
  if (result.success) return result.data;
  throw frameFailure(schema, result.error.issues, type, payload, rules);
}

function frameFailure(schema: z.ZodType, issues: readonly Issue[], type: string, payload: unknown, rules: FrameRules): FrameError {
  const frameType = rules.typed ? type : undefined;
  const byCode = codedFailure(schema, issues);
  // A payload of the wrong shape never carries `payload.type`, whatever the frame.
  if (byCode) return FrameError.from(byCode, byCode.code === 'invalid_payload' ? undefined : frameType);
  const issue = issues[0]!;
  if (issue.path.length === 0) return new FrameError(rules.notObject ?? 'invalid_payload', { message: `${type} takes an object payload.` });
  const field = String(issue.path[0]);
  const rule = fieldRuleOf(schema, field);
  // A union (a string or a list) reports an absent key as `invalid_union`, not `invalid_type`.
  const absent = (issue.code === 'invalid_type' || issue.code === 'invalid_union') && issue.path.length === 1 && isPlainObject(payload) && payload[field] === undefined;
  const reason = absent ? (rule?.absentReason ?? rules.missing) : (rule?.invalidReason ?? rules.invalid ?? 'invalid_payload');
  const message = absent ? `${type} needs ${field}.` : `${field}: ${issue.message}`;
  // The message names the field; details stay as the wire fixes them (`{reason}` for ws.request_failed).
  return new FrameError(reason, { message, ...(frameType && reason !== 'invalid_payload' ? { frameType } : {}) });
}

/** The first failure that names its own code, by a coded refinement or by its field's rule. */
function codedFailure(schema: z.ZodType, issues: readonly Issue[]): ApiError | null {
  for (const issue of issues) {
    const params = (issue as { params?: { code?: ErrorCode; details?: Record<string, unknown> } }).params;
    if (issue.code === 'custom' && params?.code) return new ApiError(params.code, issue.message, params.details ?? {});
    const rule = issue.path.length > 0 ? fieldRuleOf(schema, String(issue.path[0])) : undefined;
    if (rule?.code) return new ApiError(rule.code, issue.message);
  }
  return null;
}

/** The rule registered on a top-level field of an object schema, through optional/default wrappers and transform pipes. */
function fieldRuleOf(schema: z.ZodType, field: string): FieldRule | undefined {
  const shape = (schema as { shape?: Record<string, z.ZodType> }).shape;
  let s: z.ZodType | undefined = shape?.[field];
  for (let i = 0; s && i < 6; i++) {
    const rule = fieldRules.get(s);
    if (rule) return rule;
    const def = s.def as { innerType?: z.ZodType; in?: z.ZodType };
    s = def.innerType ?? def.in;
  }
  return undefined;
}
