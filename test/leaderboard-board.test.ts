import { describe, expect, it } from 'vitest';
import type { EntryRow } from '../runtime/contracts/services';
import { Board, INT64_MAX, INT64_MIN, type BoardRules } from '../runtime/leaderboards/board';

// The in-memory board against a naive model: a map of entries sorted in full
// on every read. Randomised, with a seeded generator so a failure replays.

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return s / 2 ** 32;
  };
}

function uuid(r: () => number): string {
  const hex = Array.from({ length: 32 }, () => Math.floor(r() * 16).toString(16)).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

class Model {
  readonly rows = new Map<string, EntryRow>();
  constructor(readonly rules: BoardRules) {}

  submit(playerId: string, score: bigint, subScore: bigint, now: number): void {
    const old = this.rows.get(playerId);
    if (old && this.rules.operator === 'incr') {
      score = clamp(old.score + score);
      subScore = clamp(old.subScore + subScore);
    } else if (old && this.rules.operator === 'best' && this.compare({ playerId, score, subScore, updatedAt: now }, old) >= 0) {
      return;
    }
    this.rows.set(playerId, { playerId, score, subScore, updatedAt: now });
  }

  compare(a: EntryRow, b: EntryRow): number {
    const dir = this.rules.order === 'desc' ? -1 : 1;
    if (a.score !== b.score) return a.score < b.score ? -dir : dir;
    if (a.subScore !== b.subScore) return a.subScore < b.subScore ? -dir : dir;
    if (a.playerId === b.playerId) return 0;
    return a.playerId < b.playerId ? -1 : 1;
  }

  sorted(): EntryRow[] {
    return [...this.rows.values()].sort((a, b) => this.compare(a, b));
  }
}

function clamp(v: bigint): bigint {
  return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : v;
}

function score(r: () => number): bigint {
  const pick = r();
  // Mostly a small range, so ties on score (and sub-score) are common; sometimes the 64-bit extremes.
  if (pick < 0.05) return r() < 0.5 ? INT64_MAX - BigInt(Math.floor(r() * 3)) : INT64_MIN + BigInt(Math.floor(r() * 3));
  if (pick < 0.1) return BigInt(Math.floor((r() - 0.5) * 2 ** 53)) * 1024n;
  return BigInt(Math.floor((r() - 0.5) * 40));
}

describe('in-memory leaderboard against a sorted array', () => {
  for (const rules of [
    { order: 'desc', operator: 'best' },
    { order: 'asc', operator: 'best' },
    { order: 'desc', operator: 'set' },
    { order: 'asc', operator: 'incr' },
    { order: 'desc', operator: 'incr' },
  ] as BoardRules[]) {
    it(`keeps the order, ranks, top and around (${rules.order}, ${rules.operator})`, () => {
      const r = rng(rules.order.length * 7 + rules.operator.length);
      const board = new Board('b', rules, 4);
      const model = new Model(rules);
      const players = Array.from({ length: 700 }, () => uuid(r));
      for (let step = 0; step < 12_000; step++) {
        const p = players[Math.floor(r() * players.length)]!;
        if (r() < 0.08) {
          expect(board.remove(p)).toBe(model.rows.delete(p));
        } else {
          const s = score(r);
          const sub = r() < 0.5 ? 0n : BigInt(Math.floor(r() * 4));
          const standing = board.submit(p, s, sub, step);
          model.submit(p, s, sub, step);
          const kept = model.rows.get(p)!;
          expect(standing).toMatchObject({ playerId: p, score: kept.score, subScore: kept.subScore, updatedAt: kept.updatedAt });
        }
        // The head a board keeps formatted must follow every change that reaches it.
        if (step % 25 === 0) {
          const head = model.sorted().slice(0, 100);
          expect(board.top(100)).toEqual(head.map((row, i) => ({ ...row, rank: i + 1 })));
        }
        if (step % 500 === 0 || step === 11_999) {
          const sorted = model.sorted();
          expect([...board.entries()]).toEqual(sorted);
          expect(board.size).toBe(sorted.length);
          sorted.forEach((row, i) => expect(board.get(row.playerId)?.rank).toBe(i + 1));
          const n = Math.floor(r() * 120);
          expect(board.top(n).map((s) => s.playerId)).toEqual(sorted.slice(0, n).map((s) => s.playerId));
          const who = sorted[Math.floor(r() * sorted.length)];
          if (who) {
            const at = sorted.indexOf(who);
            const range = 1 + Math.floor(r() * 8);
            const around = board.around(who.playerId, range);
            expect(around.map((s) => s.playerId)).toEqual(sorted.slice(Math.max(0, at - range), at + range + 1).map((s) => s.playerId));
            expect(around.map((s) => s.rank)).toEqual(around.map((_, i) => Math.max(0, at - range) + i + 1));
          }
        }
      }
    });
  }

  it('survives emptying and refilling (nodes unlinked, the root collapsing)', () => {
    const r = rng(99);
    const board = new Board('b', { order: 'desc', operator: 'set' });
    const model = new Model({ order: 'desc', operator: 'set' });
    for (let round = 0; round < 3; round++) {
      const players = Array.from({ length: 20_000 }, () => uuid(r));
      for (const p of players) {
        const s = score(r);
        board.submit(p, s, 0n, round);
        model.submit(p, s, 0n, round);
      }
      expect([...board.entries()]).toEqual(model.sorted());
      for (const p of players) if (r() < 0.97) expect(board.remove(p)).toBe(model.rows.delete(p));
      expect([...board.entries()]).toEqual(model.sorted());
      for (const p of [...model.rows.keys()]) expect(board.remove(p)).toBe(model.rows.delete(p));
      expect(board.size).toBe(0);
      expect(board.top(10)).toEqual([]);
    }
  });

  it('counts changed entries once until taken, and gives failed ones back', () => {
    const board = new Board('b', { order: 'desc', operator: 'best' });
    const a = '00000000-0000-7000-8000-000000000001';
    const b = '00000000-0000-7000-8000-000000000002';
    board.submit(a, 5n, 0n, 1);
    board.submit(a, 7n, 0n, 2);
    board.submit(b, 1n, 0n, 3);
    expect(board.dirtyCount).toBe(2);
    expect(board.takeDirty(0, 1).rows.map((row) => [row.playerId, row.score])).toEqual([[a, 7n]]);
    const rest = board.takeDirty(1, 10);
    expect(rest.rows.map((row) => [row.playerId, row.score])).toEqual([[b, 1n]]);
    expect(rest.next).toBe(-1);
    expect(board.takeDirty(0, 10)).toEqual({ rows: [], next: -1 });
    // A worse score under `best` changes nothing, so nothing is written.
    board.submit(a, 3n, 0n, 4);
    expect(board.dirtyCount).toBe(0);
    board.markDirty([a, '00000000-0000-7000-8000-0000000000ff']);
    expect(board.takeDirty(0, 10).rows.map((row) => row.playerId)).toEqual([a]);
    board.load({ playerId: b, score: 9n, subScore: 0n, updatedAt: 5 });
    expect(board.dirtyCount).toBe(0);
    expect(board.top(1)[0]).toMatchObject({ playerId: b, score: 9n, rank: 1 });
  });
});
