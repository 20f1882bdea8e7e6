/**
 * How Lua values are written as JSON text: the pieces shared by the two
 * encoders (the public-API one in marshal.ts and the one over fengari's own
 * tables in fengari-internals.ts), so that both write the same bytes.
 */
import fengari from 'fengari';

const { to_jsstring } = fengari;

export const MAX_DEPTH = 64;

/**
 * An empty table: `{}` at the top of a value (a view, a `_result`, a
 * broadcast payload), `[]` anywhere inside one, where clients of this API
 * family expect an empty list (`boons = {}` is an empty collection far more
 * often than an empty record).
 */
export function emptyTableText(depth: number): string {
  return depth === 0 ? '{}' : '[]';
}

/** What a table nested deeper than MAX_DEPTH becomes. */
export const TOO_DEEP = 'too_deep';

export class MarshalError extends Error {
  override name = 'MarshalError';
}

export function cycleError(): MarshalError {
  return new MarshalError('cyclic table cannot be encoded');
}

/** Lua bytes as a JS string; invalid UTF-8 is repaired, never thrown on. */
export function jsString(bytes: Uint8Array): string {
  return to_jsstring(bytes, 0, bytes.length, true);
}

/** A Lua string as JSON: its quoted text, whether as an object key it keeps its insertion place in JS, and whether the text is all ASCII (one byte a character). */
export type StringText = { readonly quoted: string; readonly plainKey: boolean; readonly ascii: boolean };

// Keys and ids repeat every tick and a Lua string's bytes live as long as the
// string does, so the quoted form is cached per byte array.
const stringTexts = new WeakMap<Uint8Array, StringText>();

export function stringText(bytes: Uint8Array): StringText {
  let text = stringTexts.get(bytes);
  if (text !== undefined) return text;
  const s = jsString(bytes);
  // JS objects list array-index keys first, ascending, and ignore `__proto__`
  // assignments; keys like that take the slow path to keep JS's shape.
  const quoted = JSON.stringify(s);
  text = { quoted, plainKey: s !== '__proto__' && !isArrayIndex(s), ascii: ASCII.test(quoted) };
  if (bytes.length <= 64) stringTexts.set(bytes, text);
  return text;
}

const ASCII = /^[\x00-\x7f]*$/;

function isArrayIndex(s: string): boolean {
  return /^(?:0|[1-9][0-9]{0,9})$/.test(s) && Number(s) < 4294967295;
}

/**
 * An object whose keys are not all plain strings: a JS object gives exactly
 * JSON.stringify's key order and collisions (1 and "1", "__proto__").
 */
export function mixedObjectText(fields: Record<string, string>): string {
  let out = '{';
  for (const key of Object.keys(fields)) out += (out.length === 1 ? '' : ',') + JSON.stringify(key) + ':' + fields[key];
  return out + '}';
}
