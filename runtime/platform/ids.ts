/**
 * Time-ordered UUIDs (RFC 9562 version 7). Ids sort by creation time, so
 * "newest first" is "id descending" and an id works as a pagination cursor.
 * Within one millisecond the 12-bit rand_a field is a counter, so ids minted
 * by one process stay strictly increasing.
 */
export interface IdSource {
  uuid(): string;
}

/** Where each byte's two hex digits go in the 36-character text (dashes after bytes 3, 5, 7 and 9). */
const AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

export function uuidv7Source(now: () => number = Date.now): IdSource {
  let lastMs = -1;
  let counter = 0;
  // The text is assembled as character codes and made a string in one call: twenty
  // concatenations made a rope that every later reader (a header, a log line) flattened.
  const digits = [...'0123456789abcdef'].map((c) => c.charCodeAt(0));
  const codes: number[] = new Array<number>(36).fill(0x2d);
  // One getRandomValues call per 256 ids: the call, not the bytes, is what costs.
  const pool = new Uint8Array(16 * 256);
  let offset = pool.length;

  return {
    uuid(): string {
      let ms = now();
      if (ms <= lastMs) {
        ms = lastMs;
        counter++;
        if (counter > 0xfff) {
          // Counter exhausted inside one millisecond: borrow the next one.
          ms = ++lastMs;
          counter = 0;
        }
      } else {
        lastMs = ms;
        counter = 0;
      }
      if (offset === pool.length) {
        crypto.getRandomValues(pool);
        offset = 0;
      }
      const o = offset;
      offset += 16;
      // 48-bit big-endian timestamp; split because bit ops are 32-bit.
      const high = Math.floor(ms / 0x100000000);
      const low = ms >>> 0;
      pool[o] = (high >>> 8) & 0xff;
      pool[o + 1] = high & 0xff;
      pool[o + 2] = (low >>> 24) & 0xff;
      pool[o + 3] = (low >>> 16) & 0xff;
      pool[o + 4] = (low >>> 8) & 0xff;
      pool[o + 5] = low & 0xff;
      pool[o + 6] = 0x70 | ((counter >>> 8) & 0x0f);
      pool[o + 7] = counter & 0xff;
      pool[o + 8] = 0x80 | (pool[o + 8]! & 0x3f);
      for (let i = 0; i < 16; i++) {
        const byte = pool[o + i]!;
        const at = AT[i]!;
        codes[at] = digits[byte >>> 4]!;
        codes[at + 1] = digits[byte & 0x0f]!;
      }
      return String.fromCharCode.apply(null, codes);
    },
  };
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_RE.test(value);
}
