import type { JsonValue } from '../contracts/json';

/**
 * The binary form of `world.tick`, byte for byte the asobi reference's, so
 * that the asobi SDKs' decoders read our frames unchanged
 * (docs/decisions/0063-binary-world-tick-wire.md). Pure: the world engine
 * encodes on its lane, the gateway only writes the bytes, and the typed
 * client imports the decoder from here without taking any server code along.
 *
 * Layout, every multi-byte number little-endian:
 *
 *     frame   kind u8, zone x i32, zone y i32, frame_seq u64, kf u8, tick u64,
 *             name count u8, names, record count u16, records
 *     name    byte length u8, UTF-8 bytes                  (at most 32 names)
 *     record  op u8, slot u16, gen u8, [id length u8, id]   (the id on adds only)
 *             field count u8, fields
 *     field   type (high 3 bits) | name index (low 5 bits), value
 *
 * Every frame carries its own name dictionary, so a game may add a field
 * without either side being told; forty records of `x, y, vx, vy` pay for four
 * names once.
 */

/** A field value the binary wire carries; anything else has no binary form. */
export type WireValue = number | string | boolean | null;

/**
 * A number the encoder writes as f32 even when it is integral. Lua's floats
 * reach the engine as plain JS numbers, so the engine never needs this; it
 * exists because the reference's published fixtures are built from Erlang
 * floats such as `1.0`, whose bytes differ from the integer's.
 */
export class WireFloat {
  constructor(readonly value: number) {}
}

/** What the encoder accepts as a field value: nested tables are accepted and refuse the frame (see `encodeWorldTick`). */
export type FieldInput = JsonValue | WireFloat;

/** One entity's change. The id travels on adds only: an add binds its slot, updates and removes name the slot alone. */
export type WireRecord<V = WireValue> =
  | { op: 'add'; slot: number; gen: number; id: string; fields?: Readonly<Record<string, V>> }
  | { op: 'update'; slot: number; gen: number; fields?: Readonly<Record<string, V>> }
  | { op: 'remove'; slot: number; gen: number };

/**
 * One zone's frame, the shape of the reference's fixture manifest. `sequenced`
 * frames hold a place in the zone's `frame_seq` stream (deltas and keyframes);
 * `ungated` is the removal frame of a zone the player stopped watching, which
 * the text wire sends without `frame_seq` and the client applies whatever its
 * sequence (its `frame_seq` and `kf` are written as 0 and false).
 */
export interface WorldTickFrame<V = WireValue> {
  kind: 'sequenced' | 'ungated';
  zone: readonly [number, number];
  frame_seq: number;
  kf: boolean;
  tick: number;
  records: readonly WireRecord<V>[];
}

/**
 * Why a frame has no binary form. The caller then sends the text frame, which
 * every binary client also reads.
 * - `dict_too_large`: more than 32 distinct field names (the index has five bits);
 * - `bad_field_name`: a name over 255 UTF-8 bytes;
 * - `bad_entity_id`: an add without an id, or one over 255 bytes;
 * - `value_too_large`: a string value over 65 535 bytes;
 * - `unencodable_value`: a table, an integer outside 32 bits, or a number that is not finite;
 * - `too_many_records`: over 65 535 records;
 * - `bad_frame`: a header, slot, generation or op out of its range (a caller's bug).
 */
export type WireRefusal = 'dict_too_large' | 'bad_field_name' | 'bad_entity_id' | 'value_too_large' | 'unencodable_value' | 'too_many_records' | 'bad_frame';

const KIND_SEQUENCED = 1;
const KIND_UNGATED = 2;
const OP_ADD = 0;
const OP_UPDATE = 1;
const OP_REMOVE = 2;
const T_F32 = 0;
const T_I32 = 1;
const T_TRUE = 2;
const T_FALSE = 3;
const T_STR = 4;
const T_NULL = 5;

const MAX_NAMES = 32;
const MAX_NAME_BYTES = 255;
const MAX_ID_BYTES = 255;
const MAX_STRING_BYTES = 65_535;
const MAX_RECORDS = 65_535;
/** kind through the name count. */
const HEADER_BYTES = 27;
const TWO_32 = 2 ** 32;

const utf8 = new TextEncoder();
const utf8Reader = new TextDecoder();

/**
 * The frame's bytes, or null when it has no binary form (`worldTickRefusal`
 * says why). A refusal covers the whole frame rather than dropping a field,
 * so both wires always say the same thing about an entity.
 *
 * Numbers: an integer within 32 bits is an i32, any other finite number an f32
 * (7 significant digits, as on the reference); an integer beyond 32 bits
 * refuses instead, since an f32 would silently round it.
 */
export function encodeWorldTick(frame: WorldTickFrame<FieldInput>): Uint8Array | null {
  const out = encode(frame);
  return typeof out === 'string' ? null : out;
}

/** Why `encodeWorldTick` answers null for this frame (null when it encodes); for the log line of a refusal. */
export function worldTickRefusal(frame: WorldTickFrame<FieldInput>): WireRefusal | null {
  const out = encode(frame);
  return typeof out === 'string' ? out : null;
}

/** Grows as it writes; one per encode, its bytes handed out at the end. */
class Writer {
  bytes: Uint8Array;
  view: DataView;
  at = 0;

  constructor(size: number) {
    this.bytes = new Uint8Array(size);
    this.view = new DataView(this.bytes.buffer);
  }

  room(n: number): void {
    if (this.at + n <= this.bytes.length) return;
    let size = this.bytes.length * 2;
    while (size < this.at + n) size *= 2;
    const bigger = new Uint8Array(size);
    bigger.set(this.bytes.subarray(0, this.at));
    this.bytes = bigger;
    this.view = new DataView(bigger.buffer);
  }

  u8(v: number): void {
    this.room(1);
    this.bytes[this.at++] = v;
  }

  u16(v: number): void {
    this.room(2);
    this.view.setUint16(this.at, v, true);
    this.at += 2;
  }

  i32(v: number): void {
    this.room(4);
    this.view.setInt32(this.at, v, true);
    this.at += 4;
  }

  f32(v: number): void {
    this.room(4);
    this.view.setFloat32(this.at, v, true);
    this.at += 4;
  }

  /** A safe non-negative integer as two 32-bit halves: a BigInt per header would cost more than the frame's other writes. */
  u64(v: number): void {
    this.room(8);
    this.view.setUint32(this.at, v % TWO_32, true);
    this.view.setUint32(this.at + 4, Math.floor(v / TWO_32), true);
    this.at += 8;
  }

  /** UTF-8 bytes after a length prefix of `prefix` bytes; false when they exceed `max`. */
  text(s: string, prefix: 1 | 2, max: number): boolean {
    this.room(prefix + s.length * 3);
    const start = this.at + prefix;
    const { written } = utf8.encodeInto(s, this.bytes.subarray(start));
    if (written > max) return false;
    if (prefix === 1) this.bytes[this.at] = written;
    else this.view.setUint16(this.at, written, true);
    this.at = start + written;
    return true;
  }

  done(): Uint8Array {
    return this.bytes.slice(0, this.at);
  }
}

function encode(frame: WorldTickFrame<FieldInput>): Uint8Array | WireRefusal {
  const kind = frame.kind === 'sequenced' ? KIND_SEQUENCED : frame.kind === 'ungated' ? KIND_UNGATED : 0;
  const [zx, zy] = frame.zone;
  if (kind === 0 || !isInt32(zx) || !isInt32(zy) || !isCount(frame.frame_seq) || !isCount(frame.tick) || typeof frame.kf !== 'boolean') return 'bad_frame';
  const records = frame.records;
  if (records.length > MAX_RECORDS) return 'too_many_records';

  // Each record's names in UTF-8 byte order, as the reference's maps iterate
  // them; the dictionary lists names in order of first appearance.
  const ordered: (string[] | null)[] = new Array(records.length);
  const index = new Map<string, number>();
  // Records of one zone mostly share one shape: the previous record's order is reused when its keys match.
  let lastKeys: string[] = [];
  let lastSorted: string[] = [];
  for (let r = 0; r < records.length; r++) {
    const rec = records[r]!;
    const fields = rec.op === 'remove' ? undefined : rec.fields;
    const keys = fields ? Object.keys(fields) : [];
    let names = keys;
    if (sameKeys(keys, lastKeys)) names = lastSorted;
    else if (keys.length > 1) {
      names = [...keys].sort(byUtf8);
      lastKeys = keys;
      lastSorted = names;
    }
    ordered[r] = names.length > 0 ? names : null;
    for (const name of names) {
      if (index.has(name)) continue;
      if (index.size === MAX_NAMES) return 'dict_too_large';
      index.set(name, index.size);
    }
  }

  const w = new Writer(HEADER_BYTES + 32 * records.length);
  w.u8(kind);
  w.i32(zx);
  w.i32(zy);
  w.u64(frame.frame_seq);
  w.u8(frame.kf ? 1 : 0);
  w.u64(frame.tick);
  w.u8(index.size);
  for (const name of index.keys()) if (!w.text(name, 1, MAX_NAME_BYTES)) return 'bad_field_name';
  w.u16(records.length);

  for (let r = 0; r < records.length; r++) {
    const rec = records[r]!;
    const op = rec.op === 'add' ? OP_ADD : rec.op === 'update' ? OP_UPDATE : rec.op === 'remove' ? OP_REMOVE : -1;
    if (op < 0 || !isInRange(rec.slot, 0xffff) || !isInRange(rec.gen, 0xff)) return 'bad_frame';
    w.u8(op);
    w.u16(rec.slot);
    w.u8(rec.gen);
    if (rec.op === 'add' && (typeof rec.id !== 'string' || !w.text(rec.id, 1, MAX_ID_BYTES))) return 'bad_entity_id';
    const names = ordered[r];
    if (!names) {
      w.u8(0);
      continue;
    }
    const fields = (rec as { fields: Readonly<Record<string, FieldInput>> }).fields;
    w.u8(names.length);
    for (const name of names) {
      const refused = writeValue(w, index.get(name)!, fields[name]);
      if (refused) return refused;
    }
  }
  return w.done();
}

function writeValue(w: Writer, idx: number, v: FieldInput | undefined): WireRefusal | null {
  if (typeof v === 'number') {
    if (isInt32(v)) {
      w.u8((T_I32 << 5) | idx);
      w.i32(v);
      return null;
    }
    // Every non-integral double is below 2^52, well inside f32's range; a larger integer would round.
    if (Number.isInteger(v) || !Number.isFinite(v)) return 'unencodable_value';
    w.u8((T_F32 << 5) | idx);
    w.f32(v);
    return null;
  }
  if (typeof v === 'string') {
    w.u8((T_STR << 5) | idx);
    return w.text(v, 2, MAX_STRING_BYTES) ? null : 'value_too_large';
  }
  if (typeof v === 'boolean') {
    w.u8(((v ? T_TRUE : T_FALSE) << 5) | idx);
    return null;
  }
  if (v === null) {
    w.u8((T_NULL << 5) | idx);
    return null;
  }
  if (v instanceof WireFloat && Number.isFinite(Math.fround(v.value))) {
    w.u8((T_F32 << 5) | idx);
    w.f32(v.value);
    return null;
  }
  return 'unencodable_value';
}

function sameKeys(a: string[], b: string[]): boolean {
  if (a.length !== b.length || a.length < 2) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function isInt32(v: number): boolean {
  return Number.isInteger(v) && v >= -0x80000000 && v <= 0x7fffffff;
}

function isCount(v: number): boolean {
  return Number.isSafeInteger(v) && v >= 0;
}

function isInRange(v: number, max: number): boolean {
  return Number.isInteger(v) && v >= 0 && v <= max;
}

/**
 * UTF-8 byte order without encoding: it is code point order, which differs
 * from JS's UTF-16 order only where a surrogate meets a code unit above them.
 */
function byUtf8(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x - y;
  }
  return a.length - b.length;
}

/**
 * The frame in `bytes`, or null when they are not one: truncated, trailing
 * bytes, an unknown kind, op or type, a name index past the dictionary, or a
 * sequence beyond 2^53 (which a JS number cannot hold exactly and the server
 * never sends). Never throws: the bytes come off the network.
 */
export function decodeWorldTick(bytes: Uint8Array): WorldTickFrame | null {
  try {
    return decode(bytes);
  } catch {
    return null;
  }
}

/** Reads forward; a read past the end throws (RangeError from the view), which `decodeWorldTick` turns into null. */
function decode(bytes: Uint8Array): WorldTickFrame | null {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  const text = (len: number): string => {
    if (at + len > bytes.length) throw new RangeError('past the end');
    const s = utf8Reader.decode(bytes.subarray(at, at + len));
    at += len;
    return s;
  };
  const u64 = (): number => {
    const v = view.getUint32(at, true) + view.getUint32(at + 4, true) * TWO_32;
    at += 8;
    if (!Number.isSafeInteger(v)) throw new RangeError('beyond 2^53');
    return v;
  };

  const kindByte = view.getUint8(at++);
  if (kindByte !== KIND_SEQUENCED && kindByte !== KIND_UNGATED) return null;
  const zx = view.getInt32(at, true);
  const zy = view.getInt32(at + 4, true);
  at += 8;
  const frameSeq = u64();
  const kf = view.getUint8(at++) !== 0;
  const tick = u64();
  const nameCount = view.getUint8(at++);
  const names: string[] = [];
  for (let i = 0; i < nameCount; i++) names.push(text(view.getUint8(at++)));
  const count = view.getUint16(at, true);
  at += 2;

  const records: WireRecord[] = [];
  for (let r = 0; r < count; r++) {
    const op = view.getUint8(at);
    const slot = view.getUint16(at + 1, true);
    const gen = view.getUint8(at + 3);
    at += 4;
    if (op > OP_REMOVE) return null;
    const id = op === OP_ADD ? text(view.getUint8(at++)) : '';
    const fieldCount = view.getUint8(at++);
    let fields: Record<string, WireValue> | null = null;
    for (let f = 0; f < fieldCount; f++) {
      const header = view.getUint8(at++);
      const name = names[header & 0x1f];
      if (name === undefined) return null;
      let value: WireValue;
      switch (header >> 5) {
        case T_F32:
          value = view.getFloat32(at, true);
          at += 4;
          break;
        case T_I32:
          value = view.getInt32(at, true);
          at += 4;
          break;
        case T_TRUE:
          value = true;
          break;
        case T_FALSE:
          value = false;
          break;
        case T_STR:
          at += 2;
          value = text(view.getUint16(at - 2, true));
          break;
        case T_NULL:
          value = null;
          break;
        default:
          return null;
      }
      fields ??= {};
      // A key of `__proto__` is the entity's own field, as JSON.parse makes it, not the object's prototype.
      if (name === '__proto__') Object.defineProperty(fields, name, { value, enumerable: true, writable: true, configurable: true });
      else fields[name] = value;
    }
    if (op === OP_ADD) records.push(fields ? { op: 'add', slot, gen, id, fields } : { op: 'add', slot, gen, id });
    else if (op === OP_UPDATE) records.push(fields ? { op: 'update', slot, gen, fields } : { op: 'update', slot, gen });
    else records.push({ op: 'remove', slot, gen });
  }
  if (at !== bytes.length) return null;
  return { kind: kindByte === KIND_SEQUENCED ? 'sequenced' : 'ungated', zone: [zx, zy], frame_seq: frameSeq, kf, tick, records };
}

/** A slot binding: the 2-byte slot the binary wire names an entity by, and that slot's generation. */
export interface SlotBinding {
  readonly slot: number;
  readonly gen: number;
}

const SLOT_SPACE = 65_536;

/**
 * One zone's entity slots, allocated as the reference does so that the
 * generation bytes mean the same to a client of either server. The table
 * belongs to the zone, not to a connection: every subscriber reads the same
 * bytes, so each frame is encoded once per wire.
 *
 * Slots are handed out in increasing order and wrap, so a freed slot comes
 * back as late as the space allows. A slot's generation starts at 0 and
 * advances by one (mod 256) each time the slot is bound again; it survives the
 * release for that reason. With all 65 536 slots live, `bind` refuses (null)
 * rather than rebinding a live slot, which no client could detect.
 */
export class ZoneSlots {
  readonly #byId = new Map<string, SlotBinding>();
  readonly #live = new Set<number>();
  /** Each slot's last generation, 255 before its first binding; grown only as far as the cursor has gone. */
  #gens = new Uint8Array(0);
  #next = 0;

  /** Entities bound now. */
  get size(): number {
    return this.#byId.size;
  }

  /** The entity's binding: the one it has, else a new one; null when every slot is live. */
  bind(id: string): SlotBinding | null {
    const held = this.#byId.get(id);
    if (held) return held;
    if (this.#live.size >= SLOT_SPACE) return null;
    let slot = this.#next;
    while (this.#live.has(slot)) slot = (slot + 1) % SLOT_SPACE;
    this.#next = (slot + 1) % SLOT_SPACE;
    if (slot >= this.#gens.length) this.#grow(slot + 1);
    const gen = (this.#gens[slot]! + 1) & 0xff;
    this.#gens[slot] = gen;
    const binding: SlotBinding = { slot, gen };
    this.#byId.set(id, binding);
    this.#live.add(slot);
    return binding;
  }

  /** The entity's binding, if it has one. */
  get(id: string): SlotBinding | undefined {
    return this.#byId.get(id);
  }

  /** Frees the entity's slot and returns the binding it had. */
  release(id: string): SlotBinding | undefined {
    const held = this.#byId.get(id);
    if (!held) return undefined;
    this.#byId.delete(id);
    this.#live.delete(held.slot);
    return held;
  }

  #grow(needed: number): void {
    const size = Math.min(SLOT_SPACE, Math.max(needed, this.#gens.length * 2, 64));
    const gens = new Uint8Array(size).fill(0xff);
    gens.set(this.#gens);
    this.#gens = gens;
  }
}
