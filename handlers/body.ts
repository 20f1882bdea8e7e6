import { ApiError, validationFailed } from '../runtime/contracts/errors';
import { stringEnd, textProblem, textProblemMessage } from '../runtime/platform/text';
import type { RequestLike } from './http';

/** Request bodies are capped at 1 MiB. */
export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * Reads a JSON request body: a body needs a
 * Content-Length (411), may not exceed 1 MiB (413, without buffering past the
 * cap even if the header lied), must parse (400 `invalid_json`), and may hold
 * only text the database can store, nested at most `MAX_NESTING` deep (422
 * `validation_failed` naming the top-level field). An absent body reads as
 * `undefined`.
 */
export async function readJson(request: RequestLike, legacy: 'fields' | 'errors'): Promise<unknown> {
  const length = request.headers.get('content-length');
  if (length === null) {
    if (request.body === null || request.headers.get('transfer-encoding') === null) return undefined;
    throw new ApiError('length_required');
  }
  const declared = Number(length);
  if (!Number.isSafeInteger(declared) || declared < 0) throw new ApiError('length_required');
  if (declared > MAX_BODY_BYTES) throw new ApiError('payload_too_large', undefined, { limit: MAX_BODY_BYTES });
  if (declared === 0) return undefined;

  let bytes: Uint8Array;
  if (request.bufferedBody !== undefined) {
    if (request.bufferedBody === null) return undefined;
    if (request.bufferedBody.byteLength > MAX_BODY_BYTES) throw new ApiError('payload_too_large', undefined, { limit: MAX_BODY_BYTES });
    bytes = request.bufferedBody;
  } else {
    if (request.body === null) return undefined;
    bytes = await readCapped(request.body);
  }
  const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  if (text.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ApiError('invalid_json');
  }
  const problem = textProblem(value, text);
  if (problem) {
    // The field a client would fix is the top-level key; a root that is not an object is the empty name (as in a JSON Pointer).
    const field = problem.under !== undefined && !Array.isArray(value) ? String(problem.under) : '';
    throw validationFailed(legacy, { [field]: [textProblemMessage(problem)] });
  }
  bodyTexts.set(request, text);
  return value;
}

// The text each request's body was parsed from, for the few checks parsing erases.
const bodyTexts = new WeakMap<RequestLike, string>();

/**
 * The JSON text a top-level member of the request's body was written as
 * (`"1.0"` for `{"quantity": 1.0}`), or undefined when the body has no such
 * member. Parsing reads `1.0` and `1e0` as the integer 1; a field that must
 * be written as an integer checks this text. A repeated key gives its last
 * value, as parsing does.
 */
export function bodyLiteral(request: RequestLike, key: string): string | undefined {
  const text = bodyTexts.get(request);
  if (text === undefined) return undefined;
  let found: string | undefined;
  let i = skipSpace(text, 0);
  if (text[i] !== '{') return undefined;
  i = skipSpace(text, i + 1);
  while (text[i] === '"') {
    const keyEnd = stringEnd(text, i + 1);
    const name = JSON.parse(text.slice(i, keyEnd)) as string;
    const start = skipSpace(text, skipSpace(text, keyEnd) + 1);
    const end = valueEnd(text, start);
    if (name === key) found = text.slice(start, end);
    i = skipSpace(text, end);
    if (text[i] === ',') i = skipSpace(text, i + 1);
  }
  return found;
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r')) i++;
  return i;
}

/** The index just past the JSON value starting at `start` (the text is known to parse). */
function valueEnd(text: string, start: number): number {
  const c = text[start];
  if (c === '"') return stringEnd(text, start + 1);
  if (c !== '{' && c !== '[') {
    let i = start;
    while (i < text.length && !',}] \t\n\r'.includes(text[i]!)) i++;
    return i;
  }
  let depth = 0;
  for (let i = start; i < text.length; i++) {
    const d = text[i];
    if (d === '"') i = stringEnd(text, i + 1) - 1;
    else if (d === '{' || d === '[') depth++;
    else if ((d === '}' || d === ']') && --depth === 0) return i + 1;
  }
  return text.length;
}

async function readCapped(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > MAX_BODY_BYTES) {
      await reader.cancel().catch(() => {});
      throw new ApiError('payload_too_large', undefined, { limit: MAX_BODY_BYTES });
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(total);
  let offset = 0;
  for (const c of chunks) {
    out.set(c, offset);
    offset += c.byteLength;
  }
  return out;
}
