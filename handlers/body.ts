import { ApiError, validationFailed } from '../runtime/contracts/errors';
import { textProblem, textProblemMessage } from '../runtime/platform/text';
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
  return value;
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
