import { describe, expect, it } from 'vitest';
import { uuidv7Source } from '../runtime/platform/ids';

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('uuidv7Source', () => {
  it('writes RFC 9562 version 7 ids whose first 48 bits are the clock in milliseconds', () => {
    const ms = 0x0190c1f2aabb;
    const id = uuidv7Source(() => ms).uuid();
    expect(id).toMatch(V7);
    expect(id.slice(0, 8) + id.slice(9, 13)).toBe('0190c1f2aabb');
  });

  it('keeps ids of one process strictly increasing, within a millisecond and when the clock steps back', () => {
    let now = 1_700_000_000_000;
    const source = uuidv7Source(() => now);
    const ids: string[] = [];
    for (let i = 0; i < 5000; i++) {
      if (i === 2000) now -= 5;
      if (i === 3000) now += 10;
      ids.push(source.uuid());
    }
    for (const id of ids) expect(id).toMatch(V7);
    expect(new Set(ids).size).toBe(ids.length);
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
  });

  it('draws fresh randomness for every id (the 62 random bits of two ids minted together differ)', () => {
    const source = uuidv7Source(() => 1);
    const tails = new Set<string>();
    for (let i = 0; i < 600; i++) tails.add(source.uuid().slice(19));
    expect(tails.size).toBe(600);
  });
});
