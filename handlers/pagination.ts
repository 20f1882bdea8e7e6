import type { Page } from '../runtime/pages';
import type { ApiRequest } from './http';

/**
 * The one pagination rule of the public lists (rest-payloads 0.4 and the
 * pagination decision): an integer `limit` falls back to the route default
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
 */
export function queryParam(q: Query, name: string): string | null {
  const value = q[name];
  if (value === undefined) return null;
  return typeof value === 'string' ? value : (value[0] ?? null);
}

/** `limit` (default 50, clamped 1-200) and the optional `before` cursor of a public list. */
export function pageOf(q: Query): Page {
  const before = queryParam(q, 'before');
  return { limit: queryLimit(queryParam(q, 'limit'), 50, 200), ...(before !== null ? { before } : {}) };
}
