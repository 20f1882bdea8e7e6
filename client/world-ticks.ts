import { decodeWorldTick } from '../runtime/worlds/binary-wire';
import type { PushFrames } from './generated/frames';

type WorldTick = PushFrames['world.tick'];
type Update = WorldTick['updates'][number];

/**
 * Turns binary `world.tick` frames back into the payload the text wire sends,
 * so listeners never learn which wire carried a frame. The binary wire names
 * entities by 2-byte slots that the zone's adds bind to ids; the bindings live
 * here, per zone (slot 5 of one zone is unrelated to slot 5 of the next), and
 * belong to one connection: a new connection starts without them.
 */
export class BinaryWorldTicks {
  readonly #zones = new Map<string, Map<number, string>>();

  /** Forgets every binding; the keyframes a new connection gets bind its slots again. */
  reset(): void {
    this.#zones.clear();
  }

  /** The frame as its text form's payload, or null when the bytes are not a frame. */
  read(bytes: Uint8Array): WorldTick | null {
    const frame = decodeWorldTick(bytes);
    if (!frame) return null;
    const key = `${frame.zone[0]},${frame.zone[1]}`;
    let slots = this.#zones.get(key);
    // A keyframe holds the whole zone, so bindings it does not renew are stale.
    if (!slots || (frame.kind === 'sequenced' && frame.kf)) this.#zones.set(key, (slots = new Map()));
    const updates: Update[] = [];
    for (const rec of frame.records) {
      if (rec.op === 'add') {
        slots.set(rec.slot, rec.id);
        updates.push(entity('a', rec.id, rec.fields));
        continue;
      }
      const id = slots.get(rec.slot);
      // Only a lost add leaves a slot unbound, and its gap in frame_seq already asks for a resync;
      // a change nobody can name is dropped rather than handed on under a wrong id.
      if (id === undefined) continue;
      if (rec.op === 'update') {
        updates.push(entity('u', id, rec.fields));
      } else {
        slots.delete(rec.slot);
        updates.push({ op: 'r', id });
      }
    }
    if (slots.size === 0) this.#zones.delete(key);
    const zone: [number, number] = [frame.zone[0], frame.zone[1]];
    // The text wire leaves frame_seq and kf out of the removals of a zone no longer watched.
    if (frame.kind === 'ungated') return { zone, tick: frame.tick, updates };
    return { zone, frame_seq: frame.frame_seq, kf: frame.kf, tick: frame.tick, updates };
  }
}

/** `{op, id, ...fields}` as the text wire lays a record out: its own `op` and `id` win over fields of those names. */
function entity(op: 'a' | 'u', id: string, fields: Readonly<Record<string, unknown>> | undefined): Update {
  const out: Update = { op, id };
  if (!fields) return out;
  for (const name of Object.keys(fields)) {
    if (name === 'op' || name === 'id') continue;
    // As JSON.parse makes it: an own field, never the object's prototype.
    if (name === '__proto__') Object.defineProperty(out, name, { value: fields[name], enumerable: true, writable: true, configurable: true });
    else out[name] = fields[name];
  }
  return out;
}
