/**
 * The `pose` datagram of the datagram plane (docs/datagrams.md, decision 0065): absolute
 * per-entity transforms as int16 numbers, laid out byte for byte as the asobi reference's
 * plane so that its SDKs read ours unchanged. Pure, like binary-wire.ts beside it: the world
 * engine encodes a zone's body once per tick on its lane, and the plane only writes the bytes,
 * each subscriber's 16-byte prefix first.
 *
 * Layout, every multi-byte number little-endian:
 *
 *     prefix  magic 0xA5, version 1, opcode, flags 0, conn_id u32, path_tag u64   (per subscriber)
 *     body    tick u32, bseq u32, zone x i16, zone y i16, field mask u8, count u8,
 *             epoch u16, records
 *     record  slot u16, gen u8, record mask u8, one i16 per bit set, in manifest order
 *
 * A datagram is never over MAX_DATAGRAM bytes and never fragmented: a tick whose records do not
 * fit one becomes several, each with the same tick and the next bseq, each readable alone.
 */

export const DATAGRAM_MAGIC = 0xa5;
export const DATAGRAM_VERSION = 1;

/** The reference's opcode numbers: five the client sends, three the server sends. */
export const Opcode = {
  hello: 1,
  helloOk: 2,
  helloConfirm: 3,
  bye: 4,
  ping: 5,
  pong: 6,
  pose: 7,
  input: 8,
} as const;

/** The whole datagram's budget, prefix included: below a 1200-byte path MTU with room for the IP and UDP headers. */
export const MAX_DATAGRAM = 1100;
export const PREFIX_BYTES = 16;
export const POSE_HEADER_BYTES = 16;
/** `count` is one byte. */
const MAX_RECORDS = 255;
/** The record mask is one byte. */
export const MAX_POSE_FIELDS = 8;

const I16_MIN = -32768;
const I16_MAX = 32767;

/** One transform field: its name in the entity's state, and what a world unit is multiplied by on the wire. */
export interface PoseField {
  name: string;
  scale: number;
}

/**
 * What every pose of this node is read with: the client learns it once, in the
 * `asobi.datagram.open` answer, so a record carries no names. `epoch` is the node's, changed
 * at each start; a client drops a pose whose epoch is not the one its mint named.
 */
export interface PoseManifest {
  fields: readonly PoseField[];
  /** Every entity is re-sent once per this many ticks, moving or not (`axialTurn`). */
  periodTicks: number;
  epoch: number;
}

/**
 * One entity of a zone's tick: its zone slot and generation (`ZoneSlots`, binary-wire.ts), and
 * its state or the part of it to send. Only the manifest's fields are read, and only finite
 * numbers among them; an entity with none of them is left out.
 */
export interface PoseRecord {
  slot: number;
  gen: number;
  fields: Readonly<Record<string, unknown>>;
}

export interface PoseBatch {
  /** The bodies of this tick, prefixless, in bseq order: the first carries the bseq asked for. */
  bodies: Uint8Array[];
  /** Field values outside the int16 range at their scale, written as the nearest end (a scale too fine for the world). */
  saturated: number;
}

const scratch = new Uint8Array(MAX_DATAGRAM - PREFIX_BYTES);
const view = new DataView(scratch.buffer);

/**
 * Whether an entity at rest is due on this tick: each tick re-sends the slots whose turn it is,
 * so a client that lost an entity's last move is repaired within `periodTicks` ticks, with no
 * acknowledgement and nothing kept per client.
 */
export function axialTurn(slot: number, tick: number, periodTicks: number): boolean {
  return periodTicks > 0 && slot % periodTicks === tick % periodTicks;
}

/**
 * One zone's poses for one tick. The caller keeps the zone's bseq and advances it by
 * `bodies.length`. A zone whose coordinates do not fit the wire's int16 gets no poses (its
 * clients keep reading positions from `world.tick`).
 */
export function encodePoseDatagrams(
  zone: readonly [number, number],
  tick: number,
  records: readonly PoseRecord[],
  manifest: PoseManifest,
  bseq = 0,
): PoseBatch {
  const fields = manifest.fields;
  const n = fields.length;
  if (n === 0 || n > MAX_POSE_FIELDS || records.length === 0) return { bodies: [], saturated: 0 };
  const [zx, zy] = zone;
  if (!isI16(zx) || !isI16(zy)) return { bodies: [], saturated: 0 };
  const fieldMask = (1 << n) - 1;
  const bodies: Uint8Array[] = [];
  let saturated = 0;
  let at = POSE_HEADER_BYTES;
  let count = 0;
  const close = () => {
    view.setUint32(0, tick >>> 0, true);
    view.setUint32(4, (bseq + bodies.length) >>> 0, true);
    view.setInt16(8, zx, true);
    view.setInt16(10, zy, true);
    scratch[12] = fieldMask;
    scratch[13] = count;
    view.setUint16(14, manifest.epoch & 0xffff, true);
    bodies.push(scratch.slice(0, at));
    at = POSE_HEADER_BYTES;
    count = 0;
  };
  const names = fields.map((f) => f.name);
  const scales = fields.map((f) => f.scale);
  const values: number[] = [];
  for (const record of records) {
    const state = record.fields;
    let mask = 0;
    let width = 0;
    for (let i = 0; i < n; i++) {
      const v = state[names[i]!];
      if (typeof v !== 'number' || !Number.isFinite(v)) continue;
      let q = Math.round(v * scales[i]!);
      if (q > I16_MAX) (q = I16_MAX), saturated++;
      else if (q < I16_MIN) (q = I16_MIN), saturated++;
      values[width++] = q;
      mask |= 1 << i;
    }
    if (mask === 0) continue;
    if (at + 4 + 2 * width > scratch.length || count === MAX_RECORDS) close();
    const slot = record.slot;
    scratch[at] = slot & 0xff;
    scratch[at + 1] = (slot >>> 8) & 0xff;
    scratch[at + 2] = record.gen & 0xff;
    scratch[at + 3] = mask;
    at += 4;
    for (let j = 0; j < width; j++) {
      const q = values[j]!;
      scratch[at] = q & 0xff;
      scratch[at + 1] = (q >> 8) & 0xff;
      at += 2;
    }
    count++;
  }
  if (count > 0) close();
  return { bodies, saturated };
}

/** The 16 bytes before a body: the opcode and connection of one subscriber (the path tag is always zero, as the reference sends it). */
export function datagramPrefix(opcode: number, connId: number): Uint8Array {
  const prefix = new Uint8Array(PREFIX_BYTES);
  prefix[0] = DATAGRAM_MAGIC;
  prefix[1] = DATAGRAM_VERSION;
  prefix[2] = opcode;
  new DataView(prefix.buffer).setUint32(4, connId >>> 0, true);
  return prefix;
}

function isI16(n: number): boolean {
  return Number.isInteger(n) && n >= I16_MIN && n <= I16_MAX;
}
