import { describe, expect, it } from 'vitest';
import { axialTurn, encodePoseDatagrams, MAX_DATAGRAM, PREFIX_BYTES, datagramPrefix, Opcode, type PoseManifest } from '../runtime/worlds/pose-datagram';
import { decodeDownlink, decodePose } from './support/datagram-client';

/**
 * The pose encoder against a decoder written from the reference's published layout
 * (test/support/datagram-client.ts): the same positions within half a step of the scale,
 * the header the reference's SDKs check, and the datagram budget.
 */

const XY: PoseManifest = {
  fields: [
    { name: 'x', scale: 100 },
    { name: 'y', scale: 100 },
  ],
  periodTicks: 20,
  epoch: 0xbeef,
};
const XYV: PoseManifest = { ...XY, fields: [...XY.fields, { name: 'vx', scale: 10 }, { name: 'vy', scale: 10 }] };

const buf = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

describe('encodePoseDatagrams', () => {
  it('writes the header and records the published layout reads back, positions within half a step of the scale', () => {
    const entities = [
      { slot: 0, gen: 0, fields: { x: 0, y: 0 } },
      { slot: 7, gen: 3, fields: { x: 123.456, y: -98.7654, vx: 1.25, name: 'ignored' } },
      { slot: 65535, gen: 255, fields: { x: -327.68, y: 327.67 } },
    ];
    const { bodies, saturated } = encodePoseDatagrams([-4, 9], 123456, entities, XYV, 77);
    expect(saturated).toBe(0);
    expect(bodies).toHaveLength(1);
    const frame = decodePose(buf(bodies[0]!), 4)!;
    expect(frame).toMatchObject({ tick: 123456, bseq: 77, zone: [-4, 9], fieldmask: 0b1111, epoch: 0xbeef });
    expect(frame.records.map((r) => [r.slot, r.gen])).toEqual([
      [0, 0],
      [7, 3],
      [65535, 255],
    ]);
    for (const [i, e] of entities.entries()) {
      const values = frame.records[i]!.values;
      XYV.fields.forEach((f, j) => {
        const v = (e.fields as Record<string, unknown>)[f.name];
        if (typeof v !== 'number') return expect(values[j]).toBeUndefined();
        expect(Math.abs(values[j]! / f.scale - v)).toBeLessThanOrEqual(0.5 / f.scale + 1e-9);
      });
    }
  });

  it('carries only the fields an entity has, and leaves out an entity with none', () => {
    const { bodies } = encodePoseDatagrams([0, 0], 1, [
      { slot: 1, gen: 1, fields: { y: 2 } },
      { slot: 2, gen: 1, fields: { hp: 10, x: 'left', y: Number.NaN } },
      { slot: 3, gen: 1, fields: { x: 1 } },
    ], XY);
    const frame = decodePose(buf(bodies[0]!), 2)!;
    expect(frame.records).toEqual([
      { slot: 1, gen: 1, values: [undefined, 200] },
      { slot: 3, gen: 1, values: [100] },
    ]);
    expect(encodePoseDatagrams([0, 0], 1, [{ slot: 2, gen: 1, fields: { hp: 1 } }], XY).bodies).toEqual([]);
  });

  it('saturates a value outside int16 at its scale and counts it, never wraps', () => {
    const { bodies, saturated } = encodePoseDatagrams([0, 0], 1, [{ slot: 1, gen: 1, fields: { x: 400, y: -1e9 } }], XY);
    expect(saturated).toBe(2);
    expect(decodePose(buf(bodies[0]!), 2)!.records[0]!.values).toEqual([32767, -32768]);
  });

  it('splits a large set into independent datagrams of one tick, each within the budget with its prefix, bseq counting up', () => {
    const records = Array.from({ length: 400 }, (_, i) => ({ slot: i, gen: 1, fields: { x: i / 10, y: -i / 10, vx: 1, vy: -1 } }));
    const { bodies } = encodePoseDatagrams([1, 1], 99, records, XYV, 10);
    expect(bodies.length).toBe(Math.ceil(400 / Math.floor((MAX_DATAGRAM - PREFIX_BYTES - 16) / 12)));
    const seen: number[] = [];
    bodies.forEach((b, i) => {
      expect(b.length + PREFIX_BYTES).toBeLessThanOrEqual(MAX_DATAGRAM);
      const f = decodePose(buf(b), 4)!;
      expect([f.tick, f.bseq]).toEqual([99, 10 + i]);
      seen.push(...f.records.map((r) => r.slot));
    });
    expect(seen).toEqual(records.map((r) => r.slot));
    // Records of different widths fill each datagram to the byte: 178 of six bytes are 1,068, the budget after the prefix and header.
    const small = encodePoseDatagrams([0, 0], 1, Array.from({ length: 300 }, (_, i) => ({ slot: i, gen: 0, fields: { x: 1 } })), XY);
    expect(small.bodies.map((b) => decodePose(buf(b), 2)!.records.length)).toEqual([178, 122]);
    expect(small.bodies[0]!.length + PREFIX_BYTES).toBe(MAX_DATAGRAM);
  });

  it('sends nothing for a zone whose coordinates the wire cannot carry, or without fields', () => {
    const one = [{ slot: 1, gen: 1, fields: { x: 1, y: 1 } }];
    expect(encodePoseDatagrams([40000, 0], 1, one, XY).bodies).toEqual([]);
    expect(encodePoseDatagrams([0, 0], 1, one, { ...XY, fields: [] }).bodies).toEqual([]);
  });

  it('gives each body its subscriber prefix apart: magic, version, opcode, zero flags, conn_id, zero path tag', () => {
    const { bodies } = encodePoseDatagrams([0, 0], 5, [{ slot: 1, gen: 1, fields: { x: 1, y: 1 } }], XY);
    const d = decodeDownlink(Buffer.concat([datagramPrefix(Opcode.pose, 0xdeadbeef), bodies[0]!]))!;
    expect(d).toMatchObject({ opcode: 7, connId: 0xdeadbeef, pathTag: 0n });
    expect(decodePose(d.body, 2)!.tick).toBe(5);
  });
});

describe('axialTurn', () => {
  it('gives every slot exactly one turn per period', () => {
    const turns = Array.from({ length: 20 }, (_, tick) => Array.from({ length: 100 }, (_, slot) => slot).filter((slot) => axialTurn(slot, tick, 20)));
    expect(turns.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(axialTurn(3, 3, 0)).toBe(false);
  });
});
