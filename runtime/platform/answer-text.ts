/**
 * The JSON text of values that are answered many times unchanged (a cached
 * public profile), written once. Such a value is frozen, all the way down,
 * when its text is taken, so the text cannot go stale: a later write to it
 * throws instead of answering old bytes.
 */
const texts = new WeakMap<object, string>();

/** Freezes `value` and keeps its JSON text for `jsonText`; returns `value`. */
export function withAnswerText<T extends object>(value: T): T {
  deepFreeze(value);
  texts.set(value, JSON.stringify(value));
  return value;
}

/** `JSON.stringify(value)`, read from the kept text when `withAnswerText` took one. */
export function jsonText(value: unknown): string {
  if (typeof value === 'object' && value !== null) {
    const kept = texts.get(value);
    if (kept !== undefined) return kept;
  }
  return JSON.stringify(value);
}

function deepFreeze(value: object): void {
  if (Object.isFrozen(value)) return;
  Object.freeze(value);
  for (const key of Object.keys(value)) {
    const member = (value as Record<string, unknown>)[key];
    if (typeof member === 'object' && member !== null) deepFreeze(member);
  }
}
