import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodeWorldTick, encodeWorldTick, WireFloat, worldTickRefusal, ZoneSlots, type FieldInput, type WorldTickFrame, type WireRecord } from '../runtime/worlds/binary-wire';

/**
 * test/fixtures/wire/ restates the asobi reference server's published wire
 * fixtures (its priv/wire_fixtures: add_with_all_value_types,
 * steady_state_40_updates, keyframe_all_adds, removes_only,
 * ungated_leave_removals, empty_keyframe, extremes): each file holds the
 * fixture's input frame as the reference's manifest writes it and the exact
 * bytes its encoder produced, as hex. The asobi SDKs test their decoders
 * against the same bytes.
 */
const dir = path.join(__dirname, 'fixtures/wire');
const fixtures = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => {
    const text = readFileSync(path.join(dir, f), 'utf8');
    const plain = JSON.parse(text) as { name: string; frame: WorldTickFrame; bytes: number; hex: string[] };
    const marked = parseMarkingFloats(text) as { frame: WorldTickFrame<FieldInput> };
    return { name: plain.name, plain: plain.frame, marked: marked.frame, bytes: Buffer.from(plain.hex.join(''), 'hex'), size: plain.bytes };
  });

/**
 * The manifest comes from Erlang, where `1.0` is a float and `1` an integer,
 * and the two encode differently; JS numbers cannot tell them apart, so a
 * number written with a point or an exponent becomes a WireFloat here.
 */
function parseMarkingFloats(text: string): unknown {
  const marked = text.replace(/"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+(?:[eE][+-]?\d+)?|[eE][+-]?\d+)/g, (m) => (m.startsWith('"') ? m : `{"$float":${m}}`));
  return JSON.parse(marked, (_key, v: unknown) => (v !== null && typeof v === 'object' && '$float' in v ? new WireFloat((v as { $float: number }).$float) : v));
}

const hex = (bytes: Uint8Array | null) => (bytes ? Buffer.from(bytes).toString('hex') : null);

function frame(records: WireRecord<FieldInput>[], head: Partial<WorldTickFrame> = {}): WorldTickFrame<FieldInput> {
  return { kind: 'sequenced', zone: [0, 0], frame_seq: 1, kf: false, tick: 1, records, ...head };
}

const update = (fields: Record<string, FieldInput>, slot = 1): WireRecord<FieldInput> => ({ op: 'update', slot, gen: 0, fields });

describe('the reference fixtures', () => {
  it('are all here', () => {
    expect(fixtures.map((f) => f.name)).toEqual(['add_with_all_value_types', 'empty_keyframe', 'extremes', 'keyframe_all_adds', 'removes_only', 'steady_state_40_updates', 'ungated_leave_removals']);
    for (const f of fixtures) expect(f.bytes.length).toBe(f.size);
  });

  describe.each(fixtures)('$name', (f) => {
    it('encodes to the reference bytes', () => {
      expect(hex(encodeWorldTick(f.marked))).toBe(f.bytes.toString('hex'));
      expect(worldTickRefusal(f.marked)).toBeNull();
    });

    it('decodes the reference bytes to the frame', () => {
      expect(decodeWorldTick(f.bytes)).toEqual(f.plain);
    });

    it('round-trips through the encoder', () => {
      expect(decodeWorldTick(encodeWorldTick(f.plain)!)).toEqual(f.plain);
    });
  });
});

describe('encoding', () => {
  it('writes integers within 32 bits as i32 and every other finite number as f32', () => {
    const out = decodeWorldTick(encodeWorldTick(frame([update({ a: 2 ** 31 - 1, b: -(2 ** 31), c: 0.1, d: -0, e: new WireFloat(3) })]))!);
    expect(out!.records[0]).toEqual({ op: 'update', slot: 1, gen: 0, fields: { a: 2 ** 31 - 1, b: -(2 ** 31), c: Math.fround(0.1), d: 0, e: 3 } });
    // Type tags in the field headers, in field order a..e: i32, i32, f32, i32, f32.
    const bytes = encodeWorldTick(frame([update({ a: 1, b: 2.5, c: new WireFloat(1) })]))!;
    const fieldsAt = 27 + 3 * 2 + 2 + 4 + 1;
    expect([bytes[fieldsAt], bytes[fieldsAt + 5], bytes[fieldsAt + 10]]).toEqual([(1 << 5) | 0, (0 << 5) | 1, (0 << 5) | 2]);
  });

  it('orders a record by UTF-8 bytes whatever the insertion order, so one entity always encodes the same', () => {
    const a = encodeWorldTick(frame([update({ y: 1, x: 2, é: 3, '\u{10000}': 4, '\uffff': 5 })]));
    const b = encodeWorldTick(frame([update({ '\uffff': 5, '\u{10000}': 4, é: 3, x: 2, y: 1 })]));
    expect(hex(a)).toBe(hex(b));
    // U+FFFF sorts before U+10000 in UTF-8 (and after it in UTF-16, JS's own order).
    const rec = decodeWorldTick(a!)!.records[0] as { fields: object };
    expect(Object.keys(rec.fields)).toEqual(['x', 'y', 'é', '\uffff', '\u{10000}']);
  });

  it('lists the dictionary in order of first appearance and shares names between records', () => {
    const bytes = encodeWorldTick(frame([update({ y: 1, x: 1 }, 1), update({ z: 1, x: 1 }, 2)]))!;
    // Three names, x y z, each one length byte and one letter.
    expect(hex(bytes.subarray(26, 33))).toBe('0301780179017a');
  });

  it('sorts each record however its neighbours are laid out', () => {
    const shapes: Record<string, number>[] = [{ b: 1, a: 2 }, { b: 3, a: 4 }, { a: 5, b: 6 }, { c: 7, a: 8 }, { b: 9, a: 10 }];
    const out = decodeWorldTick(encodeWorldTick(frame(shapes.map((f, i) => update(f, i))))!)!;
    expect(out.records.map((r) => Object.entries((r as { fields: object }).fields))).toEqual([
      [['a', 2], ['b', 1]],
      [['a', 4], ['b', 3]],
      [['a', 5], ['b', 6]],
      [['a', 8], ['c', 7]],
      [['a', 10], ['b', 9]],
    ]);
  });

  it('takes a field named __proto__ as the entity\'s own field', () => {
    const fields = JSON.parse('{"__proto__": 5, "x": 1}') as Record<string, FieldInput>;
    const out = decodeWorldTick(encodeWorldTick(frame([{ op: 'add', slot: 3, gen: 0, id: 'e', fields }]))!)!;
    const rec = out.records[0] as { fields: Record<string, unknown> };
    expect(Object.keys(rec.fields)).toEqual(['__proto__', 'x']);
    expect(Object.getPrototypeOf(rec.fields)).toBe(Object.prototype);
  });
});

describe('falling back to text', () => {
  const names = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, i]));

  it('refuses more than 32 field names in a frame, counted across its records', () => {
    expect(encodeWorldTick(frame([update(names(32))]))).not.toBeNull();
    const split = frame([update(names(20), 1), update(Object.fromEntries(Object.entries(names(33)).slice(20)), 2)]);
    expect(encodeWorldTick(split)).toBeNull();
    expect(worldTickRefusal(split)).toBe('dict_too_large');
  });

  it.each([
    ['a table', { hp: 1, bag: { gold: 3 } }],
    ['a list', { path: [1, 2] }],
    ['an integer beyond 32 bits', { at: 2 ** 31 }],
    ['a negative integer beyond 32 bits', { at: -(2 ** 31) - 1 }],
    ['a millisecond timestamp', { at: 1_760_000_000_000 }],
    ['NaN', { x: Number.NaN }],
    ['infinity', { x: Number.POSITIVE_INFINITY }],
    ['a float beyond f32', { x: new WireFloat(1e39) }],
  ])('refuses a field holding %s', (_what, fields) => {
    const f = frame([update(fields as Record<string, FieldInput>)]);
    expect(encodeWorldTick(f)).toBeNull();
    expect(worldTickRefusal(f)).toBe('unencodable_value');
  });

  it('refuses a string value over 65 535 UTF-8 bytes, a name or an id over 255', () => {
    expect(encodeWorldTick(frame([update({ s: 'a'.repeat(65_535) })]))).not.toBeNull();
    expect(worldTickRefusal(frame([update({ s: 'é'.repeat(32_768) })]))).toBe('value_too_large');
    expect(encodeWorldTick(frame([update({ ['n'.repeat(255)]: 1 })]))).not.toBeNull();
    expect(worldTickRefusal(frame([update({ ['é'.repeat(128)]: 1 })]))).toBe('bad_field_name');
    expect(encodeWorldTick(frame([{ op: 'add', slot: 0, gen: 0, id: 'i'.repeat(255) }]))).not.toBeNull();
    expect(worldTickRefusal(frame([{ op: 'add', slot: 0, gen: 0, id: 'i'.repeat(256) }]))).toBe('bad_entity_id');
    expect(worldTickRefusal(frame([{ op: 'add', slot: 0, gen: 0 } as unknown as WireRecord<FieldInput>]))).toBe('bad_entity_id');
  });

  it('refuses more records than the count can say, and a frame whose numbers are out of range', () => {
    const removes = (n: number) => Array.from({ length: n }, (_, i): WireRecord<FieldInput> => ({ op: 'remove', slot: i % 65_536, gen: 0 }));
    expect(encodeWorldTick(frame(removes(65_535)))).not.toBeNull();
    expect(worldTickRefusal(frame(removes(65_536)))).toBe('too_many_records');
    for (const bad of [
      frame([{ op: 'remove', slot: 65_536, gen: 0 }]),
      frame([{ op: 'remove', slot: 1, gen: 256 }]),
      frame([{ op: 'remove', slot: -1, gen: 0 }]),
      frame([], { frame_seq: -1 }),
      frame([], { tick: 2 ** 53 }),
      frame([], { zone: [2 ** 31, 0] }),
      frame([], { kind: 'other' as 'ungated' }),
    ]) {
      expect(worldTickRefusal(bad)).toBe('bad_frame');
    }
  });
});

describe('decoding', () => {
  const sample = fixtures.find((f) => f.name === 'add_with_all_value_types')!.bytes;

  it('answers null, never throws, for every truncation and for trailing bytes', () => {
    for (let n = 0; n < sample.length; n++) expect(decodeWorldTick(sample.subarray(0, n))).toBeNull();
    expect(decodeWorldTick(Buffer.concat([sample, Buffer.from([0])]))).toBeNull();
    expect(decodeWorldTick(sample)).not.toBeNull();
  });

  it('answers null for an unknown kind, op or value type, a name past the dictionary, and a sequence beyond 2^53', () => {
    const changed = (at: number, value: number) => {
      const copy = Uint8Array.from(sample);
      copy[at] = value;
      return decodeWorldTick(copy);
    };
    // The record starts after the header and the seven names (alive hp name stunned target x y: 7 + 2+5+4+7+6+1+1 bytes) and the count.
    const record = 27 + 7 + 26 + 2;
    const firstField = record + 4 + 1 + 36 + 1;
    expect(changed(0, 3)).toBeNull();
    expect(changed(0, 0)).toBeNull();
    expect(changed(record, 3)).toBeNull();
    expect(changed(firstField, (6 << 5) | 0)).toBeNull();
    expect(changed(firstField, (2 << 5) | 7)).toBeNull();
    expect(changed(firstField, (2 << 5) | 1)).not.toBeNull();
    // frame_seq's seventh byte: 0x20 there is 2^53.
    expect(changed(15, 0x20)).toBeNull();
    expect(changed(15, 0x1f)).not.toBeNull();
  });

  it('reads a frame that sits inside a larger buffer', () => {
    const padded = Buffer.concat([Buffer.from([9, 9, 9]), sample]);
    expect(decodeWorldTick(padded.subarray(3))).toEqual(fixtures.find((f) => f.name === 'add_with_all_value_types')!.plain);
  });
});

describe('ZoneSlots', () => {
  it('hands out slots in increasing order, each new slot at generation 0, and keeps a binding until released', () => {
    const slots = new ZoneSlots();
    expect([slots.bind('a'), slots.bind('b'), slots.bind('c')]).toEqual([{ slot: 0, gen: 0 }, { slot: 1, gen: 0 }, { slot: 2, gen: 0 }]);
    expect(slots.bind('b')).toEqual({ slot: 1, gen: 0 });
    expect(slots.get('c')).toEqual({ slot: 2, gen: 0 });
    expect(slots.size).toBe(3);
    expect(slots.release('b')).toEqual({ slot: 1, gen: 0 });
    expect(slots.release('b')).toBeUndefined();
    expect(slots.get('b')).toBeUndefined();
    // A freed slot is not the next one handed out: reuse comes as late as the space allows.
    expect(slots.bind('d')).toEqual({ slot: 3, gen: 0 });
    expect(slots.bind('b')).toEqual({ slot: 4, gen: 0 });
    expect(slots.size).toBe(4);
  });

  it('refuses a binding with every slot live, then reuses freed slots after wrapping, advancing their generation', () => {
    const slots = new ZoneSlots();
    let inOrder = true;
    for (let i = 0; i < 65_536; i++) inOrder &&= slots.bind(`e${i}`)?.slot === i;
    expect(inOrder).toBe(true);
    expect(slots.bind('one too many')).toBeNull();
    expect(slots.size).toBe(65_536);
    slots.release('e9');
    slots.release('e5');
    // The cursor wrapped: the lowest free slot comes first.
    expect(slots.bind('n1')).toEqual({ slot: 5, gen: 1 });
    expect(slots.bind('n2')).toEqual({ slot: 9, gen: 1 });
    expect(slots.bind('n3')).toBeNull();
    // Rebinding one slot over and over walks its generation round the byte.
    const gens: number[] = [];
    let holder = 'n2';
    for (let i = 0; i < 256; i++) {
      slots.release(holder);
      holder = `r${i}`;
      const b = slots.bind(holder)!;
      expect(b.slot).toBe(9);
      gens.push(b.gen);
    }
    expect(gens.slice(0, 3)).toEqual([2, 3, 4]);
    expect(gens.slice(252)).toEqual([254, 255, 0, 1]);
  });
});
