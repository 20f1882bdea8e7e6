import { describe, expect, it } from 'vitest';
import type { JsonObject, JsonValue } from '../runtime/lua/host-interface';
import { MAX_PHASE_MS, MAX_PHASES, parsePhases, PhaseClock, type PhaseSpec, type StartRule } from '../runtime/phases/phases';

function phases(raw: JsonValue): PhaseSpec[] {
  return parsePhases(raw).phases;
}

function startOf(start: JsonValue | undefined): { start: StartRule; problems: string[] } {
  const entry: JsonObject = start === undefined ? { name: 'p' } : { name: 'p', start };
  const parsed = parsePhases([entry]);
  return { start: parsed.phases[0]!.start, problems: parsed.problems };
}

function spec(name: string, durationMs: number, start: StartRule = { type: 'prev_ended' }): PhaseSpec {
  return { name, durationMs, start, config: {} };
}

const T0 = 1_000_000;

describe('parsePhases', () => {
  it('reads every start form', () => {
    expect(startOf(undefined)).toEqual({ start: { type: 'prev_ended' }, problems: [] });
    expect(startOf('prev_ended')).toEqual({ start: { type: 'prev_ended' }, problems: [] });
    expect(startOf('all_ready')).toEqual({ start: { type: 'all_ready' }, problems: [] });
    expect(startOf(5000)).toEqual({ start: { type: 'timer', ms: 5000 }, problems: [] });
    expect(startOf({ timer: 2500 })).toEqual({ start: { type: 'timer', ms: 2500 }, problems: [] });
    expect(startOf({ players: 3 })).toEqual({ start: { type: 'players', count: 3 }, problems: [] });
  });

  it('falls back to prev_ended on any other start, naming it', () => {
    const bads: JsonValue[] = ['soon', true, ['all_ready'], { players: 'three' }, { timer: '5s' }, { other: 1 }, { players: 2, timer: 100 }];
    for (const bad of bads) {
      const { start, problems } = startOf(bad);
      expect(start, JSON.stringify(bad)).toEqual({ type: 'prev_ended' });
      expect(problems, JSON.stringify(bad)).toEqual([expect.stringMatching(/phases\[1\] \(p\): start/)]);
    }
  });

  it('clamps timers and player counts', () => {
    expect(startOf(-10)).toEqual({ start: { type: 'timer', ms: 0 }, problems: [expect.stringMatching(/negative/)] });
    expect(startOf({ timer: -1 }).start).toEqual({ type: 'timer', ms: 0 });
    expect(startOf({ timer: MAX_PHASE_MS * 2 }).start).toEqual({ type: 'timer', ms: MAX_PHASE_MS });
    expect(startOf({ timer: 0.2 }).start).toEqual({ type: 'timer', ms: 1 });
    expect(startOf({ players: 0 })).toEqual({ start: { type: 'players', count: 1 }, problems: [expect.stringMatching(/below 1/)] });
    expect(startOf({ players: -4 }).start).toEqual({ type: 'players', count: 1 });
    expect(startOf({ players: 2.5 }).start).toEqual({ type: 'players', count: 3 });
  });

  it('reads durations: absent or non-number is 0 (no timer), negatives are 0, huge ones capped', () => {
    const parsed = parsePhases([
      { name: 'a', duration: 30_000 },
      { name: 'b' },
      { name: 'c', duration: '30' },
      { name: 'd', duration: -5 },
      { name: 'e', duration: MAX_PHASE_MS + 1 },
      { name: 'f', duration: 0.5 },
    ]);
    expect(parsed.phases.map((p) => p.durationMs)).toEqual([30_000, 0, 0, 0, MAX_PHASE_MS, 1]);
    expect(parsed.problems).toEqual([
      expect.stringMatching(/phases\[3\] \(c\): duration is not a number/),
      expect.stringMatching(/phases\[4\] \(d\): duration is negative/),
      expect.stringMatching(/phases\[5\] \(e\): duration is over/),
    ]);
  });

  it('keeps a config table and replaces anything else with {}', () => {
    const parsed = parsePhases([
      { name: 'a', config: { map: 'docks', rounds: 3 } },
      { name: 'b' },
      { name: 'c', config: {} },
      { name: 'd', config: 'docks' },
      { name: 'e', config: [1, 2] },
    ]);
    expect(parsed.phases.map((p) => p.config)).toEqual([{ map: 'docks', rounds: 3 }, {}, {}, {}, {}]);
    expect(parsed.problems).toHaveLength(2);
  });

  it('drops entries without a good name, reporting each', () => {
    const parsed = parsePhases([
      { duration: 5 },
      'lobby',
      { name: 7 },
      { name: '' },
      { name: 'x'.repeat(65) },
      { name: 'tab\there' },
      { name: 'bad\ud800' },
      { name: 'é'.repeat(32) },
      { name: 'Round 1 ⚔' },
    ]);
    expect(parsed.phases.map((p) => p.name)).toEqual(['é'.repeat(32), 'Round 1 ⚔']);
    expect(parsed.problems).toHaveLength(7);
    expect(parsed.problems[0]).toMatch(/phases\[1\] has no string name/);
    expect(parsed.problems[1]).toMatch(/phases\[2\] is not a table/);
  });

  it('ignores a non-list with a problem; nil and the empty table are simply no phases', () => {
    expect(parsePhases(undefined)).toEqual({ phases: [], problems: [] });
    expect(parsePhases(null)).toEqual({ phases: [], problems: [] });
    expect(parsePhases({})).toEqual({ phases: [], problems: [] });
    expect(parsePhases([])).toEqual({ phases: [], problems: [] });
    for (const bad of ['phases', 3, true, { '1': { name: 'a' }, '3': { name: 'b' } }]) {
      const parsed = parsePhases(bad);
      expect(parsed.phases).toEqual([]);
      expect(parsed.problems).toEqual([expect.stringMatching(/must return a list/)]);
    }
  });

  it('caps the phase count', () => {
    const raw = Array.from({ length: MAX_PHASES + 10 }, (_, i) => ({ name: `p${i}` }));
    const parsed = parsePhases(raw);
    expect(parsed.phases).toHaveLength(MAX_PHASES);
    expect(parsed.phases.at(-1)!.name).toBe(`p${MAX_PHASES - 1}`);
    expect(parsed.problems).toEqual([expect.stringMatching(/10 more ignored/)]);
  });
});

describe('PhaseClock', () => {
  it('starts the first phase at creation, before any join', () => {
    const clock = new PhaseClock(phases([{ name: 'lobby', duration: 10_000 }, { name: 'play' }]), T0);
    expect(clock.status).toBe('active');
    expect(clock.current?.name).toBe('lobby');
    expect(clock.advance(T0)).toEqual([{ ended: null, started: 'lobby', at: T0 }]);
    expect(clock.advance(T0 + 1)).toEqual([]);
  });

  it('does not construct over an empty list', () => {
    expect(() => new PhaseClock([], T0)).toThrow(RangeError);
  });

  it('runs timed phases one after another, and completes after the last', () => {
    const clock = new PhaseClock([spec('a', 1000), spec('b', 2000)], T0);
    clock.advance(T0);
    expect(clock.wakeAt()).toBe(T0 + 1000);
    expect(clock.advance(T0 + 999)).toEqual([]);
    expect(clock.advance(T0 + 1000)).toEqual([{ ended: 'a', started: 'b', at: T0 + 1000 }]);
    expect(clock.wakeAt()).toBe(T0 + 3000);
    expect(clock.complete).toBe(false);
    expect(clock.advance(T0 + 3000)).toEqual([{ ended: 'b', started: null, at: T0 + 3000 }]);
    expect(clock.complete).toBe(true);
    expect(clock.status).toBe('complete');
    expect(clock.current).toBeNull();
    expect(clock.wakeAt()).toBeNull();
    expect(clock.advance(T0 + 99_999)).toEqual([]);
  });

  it('waits for a start timer after the previous phase ends, and from creation for the first', () => {
    const clock = new PhaseClock([spec('intro', 1000, { type: 'timer', ms: 500 }), spec('round', 1000, { type: 'timer', ms: 3000 })], T0);
    expect(clock.status).toBe('waiting');
    expect(clock.wakeAt()).toBe(T0 + 500);
    expect(clock.advance(T0 + 499)).toEqual([]);
    expect(clock.advance(T0 + 500)).toEqual([{ ended: null, started: 'intro', at: T0 + 500 }]);
    expect(clock.advance(T0 + 1500)).toEqual([{ ended: 'intro', started: null, at: T0 + 1500 }]);
    expect(clock.status).toBe('waiting');
    expect(clock.wakeAt()).toBe(T0 + 4500);
    expect(clock.advance(T0 + 4499)).toEqual([]);
    expect(clock.advance(T0 + 4500)).toEqual([{ ended: null, started: 'round', at: T0 + 4500 }]);
  });

  it('catches up several transitions in one advance, each at its due time', () => {
    const clock = new PhaseClock(
      [spec('a', 1000), spec('b', 500, { type: 'timer', ms: 0 }), spec('c', 200, { type: 'timer', ms: 300 }), spec('d', 0)],
      T0,
    );
    expect(clock.advance(T0 + 10_000)).toEqual([
      { ended: null, started: 'a', at: T0 },
      { ended: 'a', started: 'b', at: T0 + 1000 },
      { ended: 'b', started: null, at: T0 + 1500 },
      { ended: null, started: 'c', at: T0 + 1800 },
      { ended: 'c', started: 'd', at: T0 + 2000 },
    ]);
    expect(clock.current?.name).toBe('d');
    expect(clock.payload(T0 + 10_000)).toMatchObject({ status: 'active', phase: 'd', remaining_ms: null });
  });

  it('passes through many zero-wait phases in one bounded call', () => {
    const list = Array.from({ length: MAX_PHASES }, (_, i) => spec(`p${i}`, 1, { type: 'timer', ms: 0 }));
    const clock = new PhaseClock(list, T0);
    const transitions = clock.advance(T0 + 1_000_000);
    expect(transitions).toHaveLength(MAX_PHASES + 1);
    expect(transitions.at(-1)).toEqual({ ended: `p${MAX_PHASES - 1}`, started: null, at: T0 + MAX_PHASES });
    expect(clock.complete).toBe(true);
  });

  it('holds a players phase waiting until enough are present', () => {
    const clock = new PhaseClock([spec('lobby', 0, { type: 'players', count: 2 }), spec('play', 1000)], T0);
    expect(clock.advance(T0)).toEqual([]);
    expect(clock.payload(T0)).toEqual({ status: 'waiting', phase: 'lobby', start_condition: { type: 'players', value: 2 } });
    clock.setPlayers(['alice']);
    expect(clock.advance(T0 + 100)).toEqual([]);
    clock.setPlayers(['alice', 'bob']);
    expect(clock.advance(T0 + 200)).toEqual([{ ended: null, started: 'lobby', at: T0 + 200 }]);
    // Once started it does not stop when players leave.
    clock.setPlayers([]);
    expect(clock.advance(T0 + 300)).toEqual([]);
    expect(clock.status).toBe('active');
  });

  it('starts a players phase the moment the previous ends when the players were already there', () => {
    const clock = new PhaseClock([spec('warmup', 1000), spec('match', 5000, { type: 'players', count: 2 })], T0);
    clock.setPlayers(['alice', 'bob']);
    clock.advance(T0 + 10);
    expect(clock.advance(T0 + 4000)).toEqual([{ ended: 'warmup', started: 'match', at: T0 + 1000 }]);
    expect(clock.payload(T0 + 4000)).toMatchObject({ remaining_ms: 2000 });
  });

  it('starts a players phase when the set arrives, not when the wait began', () => {
    const clock = new PhaseClock([spec('warmup', 1000), spec('match', 5000, { type: 'players', count: 2 })], T0);
    clock.setPlayers(['alice']);
    clock.advance(T0);
    expect(clock.advance(T0 + 2000)).toEqual([{ ended: 'warmup', started: null, at: T0 + 1000 }]);
    clock.setPlayers(['alice', 'bob']);
    expect(clock.advance(T0 + 3000)).toEqual([{ ended: null, started: 'match', at: T0 + 3000 }]);
    expect(clock.wakeAt()).toBe(T0 + 8000);
  });

  it('starts an all_ready phase when every present player (at least one) is ready', () => {
    const clock = new PhaseClock([spec('ready_up', 0, { type: 'all_ready' }), spec('play', 1000)], T0);
    expect(clock.payload(T0)).toEqual({ status: 'waiting', phase: 'ready_up', start_condition: 'all_ready' });
    expect(clock.setReady('alice', true)).toBe(false);
    clock.setPlayers(['alice', 'bob']);
    expect(clock.advance(T0 + 10)).toEqual([]);
    expect(clock.setReady('alice', true)).toBe(true);
    expect(clock.isReady('alice')).toBe(true);
    expect(clock.advance(T0 + 20)).toEqual([]);
    clock.setReady('bob', true);
    clock.setReady('alice', false);
    expect(clock.advance(T0 + 30)).toEqual([]);
    clock.setReady('alice', true);
    expect(clock.advance(T0 + 40)).toEqual([{ ended: null, started: 'ready_up', at: T0 + 40 }]);
  });

  it('lets a leaving unready player unblock all_ready, and forgets the readiness of those who leave', () => {
    const clock = new PhaseClock([spec('ready_up', 0, { type: 'all_ready' })], T0);
    clock.setPlayers(['alice', 'bob']);
    clock.setReady('alice', true);
    clock.setReady('bob', true);
    clock.setPlayers(['alice', 'carol']);
    expect(clock.isReady('bob')).toBe(false);
    expect(clock.advance(T0 + 10)).toEqual([]);
    clock.setPlayers(['alice']);
    expect(clock.advance(T0 + 20)).toEqual([{ ended: null, started: 'ready_up', at: T0 + 20 }]);
    // Nobody present is not "everyone ready".
    const empty = new PhaseClock([spec('ready_up', 0, { type: 'all_ready' })], T0);
    expect(empty.advance(T0 + 1000)).toEqual([]);
  });

  it('consumes readiness when it starts an all_ready phase', () => {
    const clock = new PhaseClock([spec('r1', 1000, { type: 'all_ready' }), spec('r2', 1000, { type: 'all_ready' })], T0);
    clock.setPlayers(['alice']);
    clock.setReady('alice', true);
    expect(clock.advance(T0)).toEqual([{ ended: null, started: 'r1', at: T0 }]);
    expect(clock.isReady('alice')).toBe(false);
    expect(clock.advance(T0 + 1000)).toEqual([{ ended: 'r1', started: null, at: T0 + 1000 }]);
    clock.setReady('alice', true);
    expect(clock.advance(T0 + 1500)).toEqual([{ ended: null, started: 'r2', at: T0 + 1500 }]);
  });

  it('counts remaining_ms down, as an integer, and reports null for an untimed phase', () => {
    const clock = new PhaseClock(phases([{ name: 'round', duration: 30_000, config: { map: 'docks' } }, { name: 'free' }]), T0);
    clock.advance(T0);
    expect(clock.payload(T0)).toEqual({ status: 'active', phase: 'round', remaining_ms: 30_000, config: { map: 'docks' }, timers: {} });
    expect(clock.payload(T0 + 12_345)).toMatchObject({ remaining_ms: 17_655 });
    expect(clock.payload(T0 + 12_345.4)).toMatchObject({ remaining_ms: 17_655 });
    expect(clock.payload(T0 + 40_000)).toMatchObject({ remaining_ms: 0 });
    expect(clock.payload(T0 - 5000)).toMatchObject({ remaining_ms: 30_000 });
    clock.advance(T0 + 30_000);
    expect(clock.payload(T0 + 31_000)).toEqual({ status: 'active', phase: 'free', remaining_ms: null, config: {}, timers: {} });
  });

  it('answers the payload and listing forms for waiting, active and complete', () => {
    const clock = new PhaseClock([spec('countdown', 0, { type: 'timer', ms: 5000 }), spec('play', 1000)], T0);
    expect(clock.payload(T0)).toEqual({ status: 'waiting', phase: 'countdown', start_condition: { type: 'timer', value: 5000 } });
    expect(clock.listing(T0)).toEqual({ status: 'waiting', phase: 'countdown', start_condition: { type: 'timer', value: 5000 } });
    clock.advance(T0 + 5000);
    expect(clock.listing(T0 + 5000)).toEqual({ status: 'active', phase: 'countdown', remaining_ms: null });
    clock.endCurrent(T0 + 6000);
    expect(clock.listing(T0 + 6250)).toEqual({ status: 'active', phase: 'play', remaining_ms: 750 });
    clock.advance(T0 + 7000);
    expect(clock.payload(T0 + 7000)).toEqual({ status: 'complete', phase: null });
    expect(clock.listing(T0 + 7000)).toEqual({ status: 'complete', phase: null });
    const after = new PhaseClock([spec('first', 100), spec('second', 100, { type: 'players', count: 1 })], T0);
    after.advance(T0 + 100);
    expect(after.payload(T0 + 100)).toEqual({ status: 'waiting', phase: 'second', start_condition: { type: 'players', value: 1 } });
  });

  it('endCurrent ends an untimed phase and goes on as on a timer', () => {
    const clock = new PhaseClock([spec('lobby', 0), spec('round', 1000), spec('results', 0, { type: 'timer', ms: 200 })], T0);
    clock.advance(T0);
    expect(clock.advance(T0 + 60_000)).toEqual([]);
    expect(clock.endCurrent(T0 + 60_000)).toEqual([{ ended: 'lobby', started: 'round', at: T0 + 60_000 }]);
    expect(clock.endCurrent(T0 + 60_400)).toEqual([{ ended: 'round', started: null, at: T0 + 60_400 }]);
    expect(clock.payload(T0 + 60_400)).toEqual({ status: 'waiting', phase: 'results', start_condition: { type: 'timer', value: 200 } });
    // Nothing is active while waiting: endCurrent only catches up.
    expect(clock.endCurrent(T0 + 60_500)).toEqual([]);
    expect(clock.endCurrent(T0 + 60_600)).toEqual([
      { ended: null, started: 'results', at: T0 + 60_600 },
      { ended: 'results', started: null, at: T0 + 60_600 },
    ]);
    expect(clock.complete).toBe(true);
    expect(clock.endCurrent(T0 + 70_000)).toEqual([]);
  });

  it('endCurrent catches up first, so it never ends a phase the timer already ended', () => {
    const clock = new PhaseClock([spec('a', 1000), spec('b', 0)], T0);
    clock.advance(T0);
    expect(clock.endCurrent(T0 + 1500)).toEqual([
      { ended: 'a', started: 'b', at: T0 + 1000 },
      { ended: 'b', started: null, at: T0 + 1500 },
    ]);
  });

  it('does not run the schedule backwards when the clock steps back', () => {
    const clock = new PhaseClock([spec('a', 1000), spec('b', 1000)], T0);
    clock.advance(T0 + 1500);
    expect(clock.advance(T0 + 100)).toEqual([]);
    expect(clock.current?.name).toBe('b');
    expect(clock.endCurrent(T0 + 200)).toEqual([{ ended: 'b', started: null, at: T0 + 1500 }]);
  });

  it('mends specs built in code that would break the schedule', () => {
    const clock = new PhaseClock([spec('a', Number.NaN), spec('b', -5, { type: 'timer', ms: -100 }), spec('c', Infinity, { type: 'timer', ms: Infinity })], T0);
    expect(clock.phases.map((p) => p.durationMs)).toEqual([0, 0, 0]);
    expect(clock.endCurrent(T0 + 10)).toEqual([
      { ended: null, started: 'a', at: T0 },
      { ended: 'a', started: 'b', at: T0 + 10 },
    ]);
    clock.endCurrent(T0 + 20);
    expect(clock.status).toBe('waiting');
    expect(clock.wakeAt()).toBeNull();
  });
});
