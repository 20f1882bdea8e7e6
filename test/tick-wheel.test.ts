import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TickWheel } from '../host/realtime/lanes/tick-wheel';

// The wheel on a fake clock: every timer it sets and every instant it reads are the test's.
const T0 = 1_800_000_000_000;

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

function ticker(period: number) {
  const dues: number[] = [];
  return { dues, item: { period, tick: (due: number) => void dues.push(due), skipped: () => {} } };
}

describe('tick wheel', () => {
  it('puts items whose period is whole grid steps on the grid, and wakes only for slots that hold something', () => {
    let passes = 0;
    const wheel = new TickWheel(() => Date.now(), () => passes++);
    const matches = Array.from({ length: 30 }, () => ticker(100));
    for (const m of matches) wheel.add(m.item);
    vi.advanceTimersByTime(1000);
    wheel.close();
    // The wheel's slot i is due at T0 + 1 + i (mod a turn): a match's slot is a multiple of 5.
    for (const m of matches) {
      expect(m.dues.length).toBeGreaterThanOrEqual(9);
      for (const due of m.dues) expect((due - T0 - 1) % TickWheel.GRID).toBe(0);
      for (let i = 1; i < m.dues.length; i++) expect(m.dues[i]! - m.dues[i - 1]!).toBe(100);
    }
    // 30 matches on at most the 20 grid slots of a turn: at most 20 passes a turn, not 100.
    expect(passes).toBeLessThanOrEqual(10 * 20 + 1);
    expect(passes).toBeGreaterThanOrEqual(100);
  });

  it('spreads matches over every slot when its ticks run on the main thread (grid 1)', () => {
    const wheel = new TickWheel(() => Date.now(), () => {}, 1);
    const matches = Array.from({ length: 30 }, () => ticker(100));
    for (const m of matches) wheel.add(m.item);
    vi.advanceTimersByTime(300);
    wheel.close();
    const slots = new Set(matches.map((m) => (m.dues[0]! - T0 - 1) % 100));
    expect(slots.size).toBe(15);
    expect([...slots].some((slot) => slot % TickWheel.GRID !== 0)).toBe(true);
  });

  it('keeps periods off the grid exact, on a wheel whose timer skips empty slots', () => {
    const wheel = new TickWheel(() => Date.now(), () => {});
    const match = ticker(100);
    const odd = ticker(33);
    wheel.add(match.item);
    wheel.add(odd.item);
    vi.advanceTimersByTime(2000);
    wheel.close();
    // The first tick comes at the first pass of its slot a period after it was added (up to a turn).
    for (let i = 1; i < odd.dues.length; i++) expect(odd.dues[i]! - odd.dues[i - 1]!).toBe(33);
    expect(odd.dues.length).toBeGreaterThanOrEqual(Math.floor((2000 - 101) / 33));
    expect(match.dues.length).toBeGreaterThanOrEqual(19);
  });

  it('does not pass over an item added while the timer waits for a later slot', () => {
    const wheel = new TickWheel(() => Date.now(), () => {});
    // One match alone: the timer sleeps from its slot to the same slot a turn later.
    wheel.add(ticker(100).item);
    // At T0 + 147 the wheel stands at slot 46: a 5 ms item goes on grid slot 50, passed at T0 + 151, which
    // is when it is first due. The timer, set for the match's slot at T0 + 201, must wake for it.
    vi.advanceTimersByTime(147);
    const fast = ticker(5);
    wheel.add(fast.item);
    vi.advanceTimersByTime(700);
    wheel.close();
    expect(fast.dues[0]).toBe(T0 + 151);
    expect(fast.dues.length).toBeGreaterThanOrEqual(138);
    for (let i = 1; i < fast.dues.length; i++) expect(fast.dues[i]! - fast.dues[i - 1]!).toBe(5);
  });
});
