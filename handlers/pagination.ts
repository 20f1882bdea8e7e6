import { validationFailed } from '../runtime/errors';
import type { Page } from '../runtime/pages';
import { isStorableText, UNSTORABLE_TEXT } from '../runtime/text';
import type { ApiRequest } from './http';

/**
 * The one pagination rule of the public lists (the pagination decision):
 * an integer `limit` falls back to the route default
 * when missing or malformed and is clamped to the route's range; lists that
 * grow without bound also take a `before` cursor (a time-ordered id).
 * A malformed `limit` is never an error.
 */
export function queryLimit(raw: string | null, fallback: number, max: number): number {
  const n = raw !== null && /^-?\d+$/.test(raw.trim()) ? Number(raw.trim()) : NaN;
  if (!Number.isSafeInteger(n)) return fallback;
  return Math.min(max, Math.max(1, n));
}

/** The query string as itty-router parsed it for the route: a repeated key holds an array. */
export type Query = ApiRequest['query'];

/**
 * One query value, or null when absent. A repeated key reads as its first
 * value, as `URLSearchParams.get` did, so `?limit=1&limit=2` is `1`. One
 * difference stays: itty replaces an empty first value by the next one, so
 * `?limit=&limit=5` reads `5` where `get` read `''`.
 * A value the database could not store (`%00`) is 422 `validation_failed`
 * naming the parameter: every query value a handler reads passes here.
 */
export function queryParam(q: Query, name: string): string | null {
  const raw = q[name];
  const value = raw === undefined ? null : typeof raw === 'string' ? raw : (raw[0] ?? null);
  if (value !== null && !isStorableText(value)) {
    throw validationFailed('errors', { [name]: [UNSTORABLE_TEXT] });
  }
  return value;
}

/** `limit` (default 50, clamped 1-200) and the optional `before` cursor of a public list. */
export function pageOf(q: Query): Page {
  const before = queryParam(q, 'before');
  return { limit: queryLimit(queryParam(q, 'limit'), 50, 200), ...(before !== null ? { before } : {}) };
}
