/**
 * An order-statistic B+tree over entry slots. The tree holds slot numbers
 * only; the sort key of a slot is `KEY_WORDS` unsigned 32-bit words at
 * `slot * KEY_WORDS` of the owner's key array, compared word by word, so an
 * entry costs the tree about six bytes (a leaf cell at the usual fill) and
 * a comparison allocates nothing. Inner nodes keep, per child, how many
 * entries sit below it, which makes rank and select O(log n) along with
 * insert and remove. Separators are copies of keys, so they stay valid
 * after the entry they came from leaves. Underfull nodes are not merged:
 * an emptied node is unlinked, and the height stays that of the largest
 * size the tree ever had.
 */

export const KEY_WORDS = 8;
const LEAF_SLOTS = 128;
const FANOUT = 64;

/** Where the keys live; the array may be replaced when the owner grows. */
export interface KeySource {
  keys: Uint32Array;
}

class Leaf {
  readonly slots = new Int32Array(LEAF_SLOTS + 1);
  n = 0;
  next: Leaf | null = null;
  prev: Leaf | null = null;
}

class Inner {
  kids: Node[] = [];
  /** Entries below each child. */
  counts: number[] = [];
  /** `seps[i]` separates `kids[i]` (keys below it) from `kids[i + 1]` (keys at or above it). */
  seps: Uint32Array[] = [];
}

type Node = Leaf | Inner;

/** A position in the order: a leaf and an index in it. */
export interface Cursor {
  leaf: Leaf;
  at: number;
}

export class RankedTree {
  #root: Node = new Leaf();
  #size = 0;
  // The descent of the last insert or remove, reused to avoid allocating per call.
  readonly #path: Inner[] = [];
  readonly #kid: number[] = [];

  constructor(private readonly source: KeySource) {}

  get size(): number {
    return this.#size;
  }

  /** Adds a slot whose key no other slot in the tree has. */
  insert(slot: number): void {
    const leaf = this.#descend(slot, +1);
    const at = this.#leafPosition(leaf, slot);
    leaf.slots.copyWithin(at + 1, at, leaf.n);
    leaf.slots[at] = slot;
    leaf.n++;
    this.#size++;
    if (leaf.n > LEAF_SLOTS) this.#splitLeaf(leaf);
  }

  /** Removes a slot that is in the tree; its key must not have changed since it was inserted. */
  remove(slot: number): void {
    const leaf = this.#descend(slot, -1);
    const at = this.#leafPosition(leaf, slot);
    if (leaf.slots[at] !== slot) throw new Error(`slot ${slot} is not in the tree`);
    leaf.slots.copyWithin(at, at + 1, leaf.n);
    leaf.n--;
    this.#size--;
    if (leaf.n === 0) this.#unlinkEmpty(leaf);
  }

  /** 0-based position of a slot that is in the tree. */
  rank(slot: number): number {
    const { keys } = this.source;
    let node = this.#root;
    let before = 0;
    while (node instanceof Inner) {
      const i = this.#childFor(node, keys, slot);
      for (let j = 0; j < i; j++) before += node.counts[j]!;
      node = node.kids[i]!;
    }
    return before + this.#leafPosition(node, slot);
  }

  /** The cursor at 0-based position `k` (0 ≤ k < size). */
  select(k: number): Cursor {
    let node = this.#root;
    while (node instanceof Inner) {
      let i = 0;
      while (k >= node.counts[i]!) k -= node.counts[i++]!;
      node = node.kids[i]!;
    }
    return { leaf: node, at: k };
  }

  /** Up to `count` slots in order from position `from`. */
  range(from: number, count: number): number[] {
    const out: number[] = [];
    if (from < 0 || from >= this.#size || count <= 0) return out;
    let { leaf, at } = this.select(from);
    for (let l: Leaf | null = leaf; l && out.length < count; l = l.next, at = 0) {
      for (let i = at; i < l.n && out.length < count; i++) out.push(l.slots[i]!);
    }
    return out;
  }

  /** Every slot in order (reload checks, tests). */
  *slots(): Generator<number> {
    let node = this.#root;
    while (node instanceof Inner) node = node.kids[0]!;
    for (let l: Leaf | null = node; l; l = l.next) for (let i = 0; i < l.n; i++) yield l.slots[i]!;
  }

  /** Walks to the leaf the slot's key belongs in, adding `delta` to the counts on the way. */
  #descend(slot: number, delta: number): Leaf {
    const { keys } = this.source;
    this.#path.length = 0;
    this.#kid.length = 0;
    let node = this.#root;
    while (node instanceof Inner) {
      const i = this.#childFor(node, keys, slot);
      node.counts[i]! += delta;
      this.#path.push(node);
      this.#kid.push(i);
      node = node.kids[i]!;
    }
    return node;
  }

  /** The child whose range holds the slot's key: the first separator above the key. */
  #childFor(node: Inner, keys: Uint32Array, slot: number): number {
    let lo = 0;
    let hi = node.seps.length;
    const base = slot * KEY_WORDS;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (compareToSeparator(keys, base, node.seps[mid]!) < 0) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }

  /** The first index in the leaf whose key is not below the slot's. */
  #leafPosition(leaf: Leaf, slot: number): number {
    const { keys } = this.source;
    const base = slot * KEY_WORDS;
    let lo = 0;
    let hi = leaf.n;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (compareKeys(keys, leaf.slots[mid]! * KEY_WORDS, base) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  #splitLeaf(leaf: Leaf): void {
    const right = new Leaf();
    const half = leaf.n >> 1;
    right.slots.set(leaf.slots.subarray(half, leaf.n));
    right.n = leaf.n - half;
    leaf.n = half;
    right.next = leaf.next;
    if (right.next) right.next.prev = right;
    right.prev = leaf;
    leaf.next = right;
    const start = right.slots[0]! * KEY_WORDS;
    this.#adopt(this.#path.length - 1, leaf, right, this.source.keys.slice(start, start + KEY_WORDS), half, right.n);
  }

  /** Puts `right` beside `left` (which had the path's child index at `level`) in the parent, splitting upwards as needed. */
  #adopt(level: number, left: Node, right: Node, sep: Uint32Array, leftCount: number, rightCount: number): void {
    if (level < 0) {
      const root = new Inner();
      root.kids = [left, right];
      root.counts = [leftCount, rightCount];
      root.seps = [sep];
      this.#root = root;
      return;
    }
    const parent = this.#path[level]!;
    const i = this.#kid[level]!;
    parent.kids.splice(i + 1, 0, right);
    parent.counts.splice(i, 1, leftCount, rightCount);
    parent.seps.splice(i, 0, sep);
    if (parent.kids.length <= FANOUT) return;
    const half = parent.kids.length >> 1;
    const sibling = new Inner();
    sibling.kids = parent.kids.splice(half);
    sibling.counts = parent.counts.splice(half);
    sibling.seps = parent.seps.splice(half);
    const up = parent.seps.pop()!;
    this.#adopt(level - 1, parent, sibling, up, sum(parent.counts), sum(sibling.counts));
  }

  #unlinkEmpty(leaf: Leaf): void {
    if (this.#path.length === 0) return;
    if (leaf.prev) leaf.prev.next = leaf.next;
    if (leaf.next) leaf.next.prev = leaf.prev;
    for (let level = this.#path.length - 1; level >= 0; level--) {
      const parent = this.#path[level]!;
      const i = this.#kid[level]!;
      parent.kids.splice(i, 1);
      parent.counts.splice(i, 1);
      parent.seps.splice(i > 0 ? i - 1 : 0, 1);
      if (parent.kids.length > 0) break;
    }
    while (this.#root instanceof Inner && this.#root.kids.length === 1) this.#root = this.#root.kids[0]!;
    if (this.#root instanceof Inner && this.#root.kids.length === 0) this.#root = new Leaf();
  }
}

function sum(xs: number[]): number {
  let s = 0;
  for (const x of xs) s += x;
  return s;
}

function compareKeys(keys: Uint32Array, a: number, b: number): number {
  for (let w = 0; w < KEY_WORDS; w++) {
    const d = keys[a + w]! - keys[b + w]!;
    if (d !== 0) return d;
  }
  return 0;
}

function compareToSeparator(keys: Uint32Array, a: number, sep: Uint32Array): number {
  for (let w = 0; w < KEY_WORDS; w++) {
    const d = keys[a + w]! - sep[w]!;
    if (d !== 0) return d;
  }
  return 0;
}
