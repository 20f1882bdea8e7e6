/**
 * Text the database can store (docs/decisions/0025). PostgreSQL's `text` and
 * `jsonb` refuse U+0000 and a string that is not valid UTF-8, which is what an
 * unpaired UTF-16 surrogate becomes; a client value holding either reached the
 * database and answered 500. Every client document (REST body, query value,
 * decoded path parameter, WebSocket payload) is checked here once, at the
 * boundary, so no route has to remember it.
 *
 * The same walk bounds nesting: a 1 MiB body of `[` parses (V8's parser does
 * not recurse) but overflows the stack of anything that serialises it later.
 */

/** Deeper documents are refused; no payload of this service nests anywhere near it. */
export const MAX_NESTING = 64;

/** Why a document was refused, and the path from its root to the offending key or value. */
export interface TextProblem {
  kind: 'unstorable_text' | 'too_deep';
  path: (string | number)[];
}

declare global {
  interface String {
    /** ES2024; on Node since 20. */
    isWellFormed(): boolean;
  }
}

/** A string PostgreSQL can store: well-formed UTF-16 (so it encodes as UTF-8) without U+0000. */
export function isStorableText(s: string): boolean {
  return s.isWellFormed() && !s.includes('\u0000');
}

/**
 * The first problem in a parsed JSON value, or null. `source`, the JSON text it
 * came from, lets the common case skip the string checks: well-formed JSON
 * text can only produce U+0000 or a lone surrogate through a `\u` escape.
 */
export function textProblem(value: unknown, source?: string): TextProblem | null {
  if (value === null || typeof value !== 'object') {
    return typeof value === 'string' && !isStorableText(value) ? { kind: 'unstorable_text', path: [] } : null;
  }
  const checkStrings = source === undefined || source.includes('\\u') || !source.isWellFormed();
  // Iterative, so the walk itself cannot overflow on the documents it exists to refuse.
  const stack: { value: object; path: (string | number)[] }[] = [{ value, path: [] }];
  while (stack.length > 0) {
    const { value: node, path } = stack.pop()!;
    if (path.length >= MAX_NESTING) return { kind: 'too_deep', path };
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const item: unknown = node[i];
        if (typeof item === 'string') {
          if (checkStrings && !isStorableText(item)) return { kind: 'unstorable_text', path: [...path, i] };
        } else if (item !== null && typeof item === 'object') stack.push({ value: item, path: [...path, i] });
      }
    } else {
      for (const [key, item] of Object.entries(node)) {
        if (checkStrings && !isStorableText(key)) return { kind: 'unstorable_text', path: [...path, key] };
        if (typeof item === 'string') {
          if (checkStrings && !isStorableText(item)) return { kind: 'unstorable_text', path: [...path, key] };
        } else if (item !== null && typeof item === 'object') stack.push({ value: item, path: [...path, key] });
      }
    }
  }
  return null;
}

/** What a client is told about a string that is not storable text. */
export const UNSTORABLE_TEXT = 'must not contain U+0000 or an unpaired UTF-16 surrogate';

/** What a client is told, per field. */
export function textProblemMessage(problem: TextProblem): string {
  return problem.kind === 'too_deep' ? `must not nest deeper than ${MAX_NESTING} levels` : UNSTORABLE_TEXT;
}
