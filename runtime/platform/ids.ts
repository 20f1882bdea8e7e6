/**
 * Time-ordered UUIDs (RFC 9562 version 7). Ids sort by creation time, so
 * "newest first" is "id descending" and an id works as a pagination cursor.
 * Within one millisecond the 12-bit rand_a field is a counter, so ids minted
 * by one process stay strictly increasing.
 */
export interface IdSource {
  uuid(): string;
}

export function uuidv7Source(now: () => number = Date.now): IdSource {
  let lastMs = -1;
  let counter = 0;
  const hex: string[] = [];
  for (let i = 0; i < 256; i++) hex.push(i.toString(16).padStart(2, '0'));
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
      const b = pool.subarray(offset, offset + 16);
      offset += 16;
      // 48-bit big-endian timestamp; split because bit ops are 32-bit.
      const high = Math.floor(ms / 0x100000000);
      const low = ms >>> 0;
      b[0] = (high >>> 8) & 0xff;
      b[1] = high & 0xff;
      b[2] = (low >>> 24) & 0xff;
      b[3] = (low >>> 16) & 0xff;
      b[4] = (low >>> 8) & 0xff;
      b[5] = low & 0xff;
      b[6] = 0x70 | ((counter >>> 8) & 0x0f);
      b[7] = counter & 0xff;
      b[8] = 0x80 | (b[8]! & 0x3f);
      let s = '';
      for (let i = 0; i < 16; i++) {
        s += hex[b[i]!];
        if (i === 3 || i === 5 || i === 7 || i === 9) s += '-';
      }
      return s;
    },
  };
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_RE.test(value);
}
