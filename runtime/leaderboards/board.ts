import type { EntryRow, LeaderboardBoard, Standing } from '../contracts/services';
import { KEY_WORDS, RankedTree } from './ranked-tree';

/**
 * One leaderboard in memory. Every entry is a slot in flat typed arrays: its
 * sort key (score, sub-score and player id as eight 32-bit words), the time
 * it last changed and whether it changed since the last flush. The order is
 * a `RankedTree` over slots; players find their slot through an
 * open-addressing table keyed on the id's 128 bits. Nothing per entry is a
 * JavaScript object, so a board of a million entries costs the collector
 * a handful of arrays.
 *
 * Order (decision 0032): by score in the board's
 * direction, then by sub-score in the same direction, then by player id
 * ascending in byte order. Ranks are positions, 1-based.
 */

export type Order = 'desc' | 'asc';
export type Operator = 'best' | 'set' | 'incr';
export interface BoardRules {
  order: Order;
  operator: Operator;
}

/** How many leading entries a board keeps formatted (the routes' top limit). */
const HEAD = 100;

export const INT64_MIN = -(1n << 63n);
export const INT64_MAX = (1n << 63n) - 1n;
const SIGN = 1n << 63n;
const MASK = (1n << 64n) - 1n;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const EMPTY = -1;

export function isPlayerId(id: string): boolean {
  return UUID.test(id);
}

export class Board implements LeaderboardBoard {
  /** Eight words per slot: score (2), sub-score (2), player id (4). Read by the tree. */
  keys: Uint32Array;
  #updatedAt: Float64Array;
  #dirty: Uint8Array;
  #live: Uint8Array;
  #capacity: number;
  #next = 0;
  #free: number[] = [];
  #dirtyCount = 0;
  #index: Int32Array;
  #indexMask: number;
  readonly #tree: RankedTree;
  readonly #desc: boolean;
  /**
   * The first HEAD entries as last formatted, or null once a change reached
   * them. A board's head is read far more than it changes (a new score rarely
   * lands in the top hundred of a large board), and formatting an entry from
   * its words is most of what a top read costs.
   */
  #head: Standing[] | null = null;
  /** Epoch ms of the board's last change (a submission or a reloaded entry); 0 while empty. For operators' board lists. */
  #changedAt = 0;

  constructor(
    readonly id: string,
    readonly rules: BoardRules,
    capacity = 16,
  ) {
    this.#capacity = capacity;
    this.keys = new Uint32Array(capacity * KEY_WORDS);
    this.#updatedAt = new Float64Array(capacity);
    this.#dirty = new Uint8Array(capacity);
    this.#live = new Uint8Array(capacity);
    this.#index = new Int32Array(capacity * 2).fill(EMPTY);
    this.#indexMask = capacity * 2 - 1;
    this.#tree = new RankedTree(this);
    this.#desc = rules.order === 'desc';
  }

  get size(): number {
    return this.#tree.size;
  }

  get changedAt(): number {
    return this.#changedAt;
  }

  /** Entries changed since the last `takeDirty`. */
  get dirtyCount(): number {
    return this.#dirtyCount;
  }

  /**
   * Applies a submission under the board's operator and answers the entry
   * as it then stands. `best` keeps the better of the two (score, sub-score)
   * pairs; `set` replaces; `incr` adds both, saturating at the 64-bit bounds.
   */
  submit(playerId: string, score: bigint, subScore: bigint, now: number): Standing {
    const words = playerWords(playerId);
    let slot = this.#find(words);
    if (slot === EMPTY) {
      slot = this.#allocate(words);
      this.#writeScores(slot, score, subScore);
    } else {
      let nextScore = score;
      let nextSub = subScore;
      if (this.rules.operator === 'incr') {
        nextScore = saturate(this.#score(slot) + score);
        nextSub = saturate(this.#subScore(slot) + subScore);
      } else if (this.rules.operator === 'best' && !this.#better(slot, score, subScore)) {
        return this.#standing(slot);
      }
      this.#touching(slot);
      this.#tree.remove(slot);
      this.#writeScores(slot, nextScore, nextSub);
    }
    this.#tree.insert(slot);
    this.#touching(slot);
    this.#updatedAt[slot] = now;
    if (now > this.#changedAt) this.#changedAt = now;
    this.#markDirty(slot);
    return this.#standing(slot);
  }

  /** Puts a stored entry back (boot reload): no operator, not dirty. */
  load(row: EntryRow): void {
    const words = playerWords(row.playerId);
    let slot = this.#find(words);
    if (slot === EMPTY) slot = this.#allocate(words);
    else this.#tree.remove(slot);
    this.#writeScores(slot, row.score, row.subScore);
    this.#tree.insert(slot);
    this.#updatedAt[slot] = row.updatedAt;
    if (row.updatedAt > this.#changedAt) this.#changedAt = row.updatedAt;
    this.#head = null;
  }

  get(playerId: string): Standing | null {
    if (!isPlayerId(playerId)) return null;
    const slot = this.#find(playerWords(playerId));
    return slot === EMPTY ? null : this.#standing(slot);
  }

  /** The first `count` entries. */
  top(count: number): Standing[] {
    if (count > HEAD) return this.#standings(0, count);
    this.#head ??= this.#standings(0, HEAD);
    return this.#head.slice(0, count);
  }

  /** Up to `range` entries above the player, the player, up to `range` below; empty when the player has no entry. */
  around(playerId: string, range: number): Standing[] {
    if (!isPlayerId(playerId)) return [];
    const slot = this.#find(playerWords(playerId));
    if (slot === EMPTY) return [];
    const at = this.#tree.rank(slot);
    const from = Math.max(0, at - range);
    return this.#standings(from, at - from + range + 1);
  }

  /** Drops the player's entry (erasure); true when there was one. */
  remove(playerId: string): boolean {
    if (!isPlayerId(playerId)) return false;
    const slot = this.#find(playerWords(playerId));
    if (slot === EMPTY) return false;
    this.#touching(slot);
    this.#tree.remove(slot);
    this.#unindex(slot);
    if (this.#dirty[slot]) this.#dirtyCount--;
    this.#dirty[slot] = 0;
    this.#live[slot] = 0;
    this.#free.push(slot);
    return true;
  }

  /**
   * Up to `max` entries changed since they were last taken, scanning slots
   * from `from`; they count clean from now. `next` is where the following
   * call scans from, or -1 once the scan reached the end.
   */
  takeDirty(from: number, max: number): { rows: EntryRow[]; next: number } {
    const rows: EntryRow[] = [];
    let slot = from;
    for (; slot < this.#next && rows.length < max && this.#dirtyCount > 0; slot++) {
      if (!this.#dirty[slot]) continue;
      this.#dirty[slot] = 0;
      this.#dirtyCount--;
      rows.push(this.#row(slot));
    }
    return { rows, next: slot < this.#next && this.#dirtyCount > 0 ? slot : -1 };
  }

  /** Counts players' entries dirty again (a flush that failed); players no longer on the board are skipped. */
  markDirty(playerIds: readonly string[]): void {
    for (const id of playerIds) {
      const slot = this.#find(playerWords(id));
      if (slot !== EMPTY) this.#markDirty(slot);
    }
  }

  /** Every entry in order, as stored (tests compare with a naive order). */
  *entries(): Generator<EntryRow> {
    for (const slot of this.#tree.slots()) yield this.#row(slot);
  }

  /** A slot in the tree about to change or just changed: the cached head goes if the slot is in it. */
  #touching(slot: number): void {
    if (this.#head !== null && this.#tree.rank(slot) < HEAD) this.#head = null;
  }

  #row(slot: number): EntryRow {
    return { playerId: this.#playerId(slot), score: this.#score(slot), subScore: this.#subScore(slot), updatedAt: this.#updatedAt[slot]! };
  }

  #standings(from: number, count: number): Standing[] {
    return this.#tree.range(from, count).map((slot, i) => ({ ...this.#row(slot), rank: from + i + 1 }));
  }

  #standing(slot: number): Standing {
    return { ...this.#row(slot), rank: this.#tree.rank(slot) + 1 };
  }

  #markDirty(slot: number): void {
    if (this.#dirty[slot]) return;
    this.#dirty[slot] = 1;
    this.#dirtyCount++;
  }

  /** Whether (score, subScore) would sit before the slot's pair in the board's order. */
  #better(slot: number, score: bigint, subScore: bigint): boolean {
    const current = this.#score(slot);
    if (score !== current) return this.#desc ? score > current : score < current;
    const sub = this.#subScore(slot);
    return this.#desc ? subScore > sub : subScore < sub;
  }

  #writeScores(slot: number, score: bigint, subScore: bigint): void {
    const base = slot * KEY_WORDS;
    this.#writeWords(base, score);
    this.#writeWords(base + 2, subScore);
  }

  // A 64-bit value as two words that compare like the value in the board's
  // direction: the sign bit flipped (so negatives sort first), all bits
  // inverted on a descending board.
  #writeWords(at: number, value: bigint): void {
    let u = BigInt.asUintN(64, value) ^ SIGN;
    if (this.#desc) u = MASK - u;
    this.keys[at] = Number(u >> 32n);
    this.keys[at + 1] = Number(u & 0xffffffffn);
  }

  #readWords(at: number): bigint {
    let u = (BigInt(this.keys[at]!) << 32n) | BigInt(this.keys[at + 1]!);
    if (this.#desc) u = MASK - u;
    return BigInt.asIntN(64, u ^ SIGN);
  }

  #score(slot: number): bigint {
    return this.#readWords(slot * KEY_WORDS);
  }

  #subScore(slot: number): bigint {
    return this.#readWords(slot * KEY_WORDS + 2);
  }

  #playerId(slot: number): string {
    const at = slot * KEY_WORDS + 4;
    const hex = [0, 1, 2, 3].map((w) => this.keys[at + w]!.toString(16).padStart(8, '0')).join('');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  #allocate(words: Uint32Array): number {
    let slot = this.#free.pop();
    if (slot === undefined) {
      if (this.#next === this.#capacity) this.#grow();
      slot = this.#next++;
    }
    this.keys.set(words, slot * KEY_WORDS + 4);
    this.#live[slot] = 1;
    this.#indexSlot(slot);
    return slot;
  }

  #grow(): void {
    const capacity = this.#capacity * 2;
    const keys = new Uint32Array(capacity * KEY_WORDS);
    keys.set(this.keys);
    this.keys = keys;
    this.#updatedAt = grown(this.#updatedAt, new Float64Array(capacity));
    this.#dirty = grown(this.#dirty, new Uint8Array(capacity));
    this.#live = grown(this.#live, new Uint8Array(capacity));
    this.#capacity = capacity;
    // Load stays at most one half.
    this.#index = new Int32Array(capacity * 2).fill(EMPTY);
    this.#indexMask = capacity * 2 - 1;
    for (let slot = 0; slot < this.#next; slot++) if (this.#live[slot]) this.#indexSlot(slot);
  }

  #home(at: number): number {
    const k = this.keys;
    return (Math.imul(k[at + 3]! ^ Math.imul(k[at + 1]!, 0x85ebca6b) ^ k[at + 2]!, 0x9e3779b1) >>> 0) & this.#indexMask;
  }

  #find(words: Uint32Array): number {
    const probe = (Math.imul(words[3]! ^ Math.imul(words[1]!, 0x85ebca6b) ^ words[2]!, 0x9e3779b1) >>> 0) & this.#indexMask;
    for (let i = probe; ; i = (i + 1) & this.#indexMask) {
      const slot = this.#index[i]!;
      if (slot === EMPTY) return EMPTY;
      const at = slot * KEY_WORDS + 4;
      if (this.keys[at] === words[0] && this.keys[at + 1] === words[1] && this.keys[at + 2] === words[2] && this.keys[at + 3] === words[3]) return slot;
    }
  }

  #indexSlot(slot: number): void {
    let i = this.#home(slot * KEY_WORDS + 4);
    while (this.#index[i] !== EMPTY) i = (i + 1) & this.#indexMask;
    this.#index[i] = slot;
  }

  // Linear probing deletes by shifting later members of the run back, so no tombstones pile up.
  #unindex(slot: number): void {
    const mask = this.#indexMask;
    let hole = this.#home(slot * KEY_WORDS + 4);
    while (this.#index[hole] !== slot) hole = (hole + 1) & mask;
    for (let j = (hole + 1) & mask; this.#index[j] !== EMPTY; j = (j + 1) & mask) {
      const home = this.#home(this.#index[j]! * KEY_WORDS + 4);
      // Move j into the hole unless its home lies cyclically in (hole, j].
      const stays = hole < j ? home > hole && home <= j : home > hole || home <= j;
      if (stays) continue;
      this.#index[hole] = this.#index[j]!;
      hole = j;
    }
    this.#index[hole] = EMPTY;
  }
}

function grown<T extends Float64Array | Uint8Array>(from: T, to: T): T {
  to.set(from as never);
  return to;
}

/** The id's 128 bits as four words, most significant first (so word order is byte order of the text). */
function playerWords(playerId: string): Uint32Array {
  const hex = playerId.replace(/-/g, '');
  const words = new Uint32Array(4);
  for (let w = 0; w < 4; w++) words[w] = parseInt(hex.slice(w * 8, w * 8 + 8), 16);
  return words;
}

export function saturate(value: bigint): bigint {
  return value > INT64_MAX ? INT64_MAX : value < INT64_MIN ? INT64_MIN : value;
}
