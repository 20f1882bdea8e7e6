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

export interface Page {
  limit: number;
  before?: string;
}

/** `limit` (default 50, clamped 1-200) and the optional `before` cursor of a public list. */
export function pageOf(q: URLSearchParams): Page {
  const before = q.get('before');
  return { limit: queryLimit(q.get('limit'), 50, 200), ...(before !== null ? { before } : {}) };
}
