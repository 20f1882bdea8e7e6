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
