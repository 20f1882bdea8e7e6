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

/** Why a document was refused, and the top-level key or index under which (absent: the root itself). */
export interface TextProblem {
  kind: 'unstorable_text' | 'too_deep';
  under?: string | number;
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
 * came from, lets the common case skip the walk: well-formed JSON text can only
 * produce U+0000 or a lone surrogate through a `\u` escape, and its nesting is
 * read off the text faster than off the parsed value.
 */
export function textProblem(value: unknown, source?: string): TextProblem | null {
  if (value === null || typeof value !== 'object') {
    return typeof value === 'string' && !isStorableText(value) ? { kind: 'unstorable_text' } : null;
  }
  const checkStrings = source === undefined || source.includes('\\u') || !source.isWellFormed();
  if (!checkStrings && !nestsTooDeep(source!)) return null;
  // Iterative, so the walk itself cannot overflow on the documents it exists to refuse.
  const stack: { node: object; depth: number; under: string | number | undefined }[] = [{ node: value, depth: 0, under: undefined }];
  while (stack.length > 0) {
    const { node, depth, under } = stack.pop()!;
    if (depth >= MAX_NESTING) return withUnder('too_deep', under);
    const array = Array.isArray(node);
    for (const key of array ? node.keys() : Object.keys(node)) {
      const top = under ?? key;
      if (checkStrings && typeof key === 'string' && !isStorableText(key)) return withUnder('unstorable_text', top);
      const item: unknown = (node as Record<string | number, unknown>)[key];
      if (typeof item === 'string') {
        if (checkStrings && !isStorableText(item)) return withUnder('unstorable_text', top);
      } else if (item !== null && typeof item === 'object') {
        stack.push({ node: item, depth: depth + 1, under: top });
      }
    }
  }
  return null;
}

function withUnder(kind: TextProblem['kind'], under: string | number | undefined): TextProblem {
  return under === undefined ? { kind } : { kind, under };
}

/**
 * Whether JSON text (already known to parse) opens more than `MAX_NESTING` levels. Native
 * searches do the per-character work: fewer openings than the bound settle it at once, and
 * otherwise only brackets and string ends are visited.
 */
function nestsTooDeep(source: string): boolean {
  let openings = 0;
  for (const bracket of ['[', '{']) {
    for (let i = source.indexOf(bracket); i >= 0 && openings <= MAX_NESTING; i = source.indexOf(bracket, i + 1)) openings++;
  }
  if (openings <= MAX_NESTING) return false;
  const structure = /["[\]{}]/g;
  let depth = 0;
  for (let m = structure.exec(source); m !== null; m = structure.exec(source)) {
    const c = m[0];
    if (c === '"') structure.lastIndex = stringEnd(source, structure.lastIndex);
    else if (c === '[' || c === '{') {
      if (++depth > MAX_NESTING) return true;
    } else depth--;
  }
  return false;
}

/** The index just past the quote closing a JSON string whose body starts at `from`. */
export function stringEnd(source: string, from: number): number {
  for (let quote = source.indexOf('"', from); ; quote = source.indexOf('"', quote + 1)) {
    let backslashes = 0;
    while (source.charCodeAt(quote - 1 - backslashes) === 0x5c) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
  }
}

/** What a client is told about a string that is not storable text. */
export const UNSTORABLE_TEXT = 'must not contain U+0000 or an unpaired UTF-16 surrogate';

/** What a client is told, per field. */
export function textProblemMessage(problem: TextProblem): string {
  return problem.kind === 'too_deep' ? `must not nest deeper than ${MAX_NESTING} levels` : UNSTORABLE_TEXT;
}

/** Characters as a person counts them (code points), not UTF-16 units. */
export function charLength(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}
