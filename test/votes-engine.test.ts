import { describe, expect, it } from 'vitest';
import type { JsonObject } from '../runtime/lua/host-interface';
import { LATE_CAST_GRACE_MS, parseVoteConfig, Vote, type VoteConfig } from '../runtime/votes/engine';

const OPTIONS = [
  { id: 'north', label: 'North Gate' },
  { id: 'south', label: 'South Gate' },
  { id: 'east', label: 'East Gate' },
];

function config(extra: JsonObject = {}): VoteConfig {
  const parsed = parseVoteConfig({ options: OPTIONS, ...extra });
  if (!parsed || !parsed.ok) throw new Error(`bad config: ${JSON.stringify(parsed)}`);
  return parsed.config;
}

const VOTERS = ['a', 'b', 'c', 'd'];
const first = () => 0;

function voteOf(extra: JsonObject = {}, voters = VOTERS): Vote {
  return new Vote('v-1', config(extra), voters, 1000);
}

describe('vote config', () => {
  it('takes the documented defaults', () => {
    expect(config()).toMatchObject({
      vote_id: null,
      template: 'default',
      method: 'plurality',
      visibility: 'live',
      window_ms: 15_000,
      window_type: 'fixed',
      max_revotes: 3,
      veto_enabled: false,
      tie_breaker: 'first',
      quorum: 0,
      require_supermajority: false,
    });
  });

  it('reads nil, false and an empty table as no vote', () => {
    expect(parseVoteConfig(null)).toBeNull();
    expect(parseVoteConfig(false)).toBeNull();
    expect(parseVoteConfig({})).toBeNull();
  });

  it('names what is wrong with a table that cannot describe a vote', () => {
    const problem = (raw: JsonObject) => {
      const out = parseVoteConfig(raw);
      return out && !out.ok ? out.problem : null;
    };
    expect(problem({ template: 'x' })).toMatch(/options/);
    expect(problem({ options: ['a'] })).toMatch(/options/);
    expect(problem({ options: ['a', 'a'] })).toMatch(/twice/);
    expect(problem({ options: OPTIONS, method: 'borda' })).toMatch(/method/);
    expect(problem({ options: OPTIONS, window_ms: 5 })).toMatch(/window_ms/);
    expect(problem({ options: OPTIONS, quorum: 2 })).toMatch(/quorum/);
    expect(problem({ options: OPTIONS, weights: { a: -1 } })).toMatch(/weights/);
  });

  it('keeps a script vote_id only when it is a UUID, and labels bare option ids with themselves', () => {
    const id = '0190c1f7-4444-7000-8000-000000000004';
    expect(config({ vote_id: id }).vote_id).toBe(id);
    expect(config({ vote_id: 'mine' }).vote_id).toBeNull();
    const parsed = parseVoteConfig({ options: ['x', 'y'] });
    expect(parsed?.ok && parsed.config.options).toEqual([{ id: 'x', label: 'x' }, { id: 'y', label: 'y' }]);
  });
});

describe('tallies', () => {
  it('plurality: one vote each, most votes wins, ties go to the option listed first', () => {
    const v = voteOf();
    v.cast('a', 'south', 1000);
    v.cast('b', 'north', 1000);
    expect(v.result(first)).toMatchObject({ winner: 'north', counts: { north: 1, south: 1, east: 0 }, total_votes: 2, turnout: 0.5 });
    v.cast('c', 'south', 1000);
    expect(v.result(first)).toMatchObject({ winner: 'south', distribution: { north: 1 / 3, south: 2 / 3, east: 0 } });
  });

  it('a random tie breaker picks among the tied options only', () => {
    const v = voteOf({ tie_breaker: 'random' });
    v.cast('a', 'south', 1000);
    v.cast('b', 'east', 1000);
    expect(v.result(() => 0).winner).toBe('south');
    expect(v.result(() => 0.99).winner).toBe('east');
  });

  it('approval: each approved option counts once per voter', () => {
    const v = voteOf({ method: 'approval' });
    expect(v.cast('a', ['north', 'south'], 1000).ok).toBe(true);
    expect(v.cast('b', ['south'], 1000).ok).toBe(true);
    expect(v.cast('c', 'east', 1000).ok).toBe(true);
    expect(v.result(first)).toMatchObject({ winner: 'south', counts: { north: 1, south: 2, east: 1 }, total_votes: 3 });
    expect(v.cast('d', ['north', 'north'], 1000)).toEqual({ ok: false, reason: 'invalid_option' });
    expect(v.cast('d', [], 1000)).toEqual({ ok: false, reason: 'invalid_option' });
  });

  it('weighted: a voter counts for their weight, 1 by default', () => {
    const v = voteOf({ method: 'weighted', weights: { a: 5, b: 0.5 } });
    v.cast('a', 'east', 1000);
    v.cast('b', 'north', 1000);
    v.cast('c', 'north', 1000);
    v.cast('d', 'north', 1000);
    expect(v.result(first)).toMatchObject({ winner: 'east', counts: { east: 5, north: 2.5, south: 0 }, total_votes: 4 });
  });

  it('ranked: instant runoff drops the weakest option until one holds a majority', () => {
    const v = voteOf({ method: 'ranked' }, ['a', 'b', 'c', 'd', 'e']);
    v.cast('a', ['north', 'east'], 1000);
    v.cast('b', ['north'], 1000);
    v.cast('c', ['south', 'north'], 1000);
    v.cast('d', ['south'], 1000);
    v.cast('e', ['east', 'south'], 1000);
    const r = v.result(first);
    // Round 1: north 2, south 2, east 1 -> east dropped, its ballot moves to south.
    expect(r.winner).toBe('south');
    expect(r.counts).toEqual({ north: 2, south: 2, east: 1 });
    expect(r.rounds).toEqual([{ north: 2, south: 2, east: 1 }, { north: 2, south: 3 }]);
  });

  it('refuses an option that is not offered, and a list for a single-choice method', () => {
    const v = voteOf();
    expect(v.cast('a', 'west', 1000)).toEqual({ ok: false, reason: 'invalid_option' });
    expect(v.cast('a', ['north'], 1000)).toEqual({ ok: false, reason: 'invalid_option' });
    expect(v.cast('a', 7, 1000)).toEqual({ ok: false, reason: 'invalid_option' });
  });
});

describe('quorum and consensus', () => {
  it('nobody voting, or turnout under the quorum, has no winner and says no_quorum', () => {
    expect(voteOf().result(first)).toMatchObject({ winner: null, status: 'no_quorum', total_votes: 0, turnout: 0 });
    const v = voteOf({ quorum: 0.75 });
    v.cast('a', 'north', 1000);
    v.cast('b', 'north', 1000);
    expect(v.result(first)).toMatchObject({ winner: null, status: 'no_quorum', turnout: 0.5 });
    v.cast('c', 'south', 1000);
    expect(v.result(first)).toMatchObject({ winner: 'north' });
    expect(v.result(first).status).toBeUndefined();
  });

  it('a required supermajority the leader misses has no winner and says no_consensus', () => {
    const v = voteOf({ require_supermajority: true, supermajority: 0.75 });
    v.cast('a', 'north', 1000);
    v.cast('b', 'north', 1000);
    v.cast('c', 'south', 1000);
    expect(v.result(first)).toMatchObject({ winner: null, status: 'no_consensus' });
    v.cast('d', 'north', 1000);
    expect(v.result(first)).toMatchObject({ winner: 'north' });
  });

  it('nobody eligible: turnout 0', () => {
    expect(voteOf({}, []).result(first)).toMatchObject({ turnout: 0, winner: null, status: 'no_quorum' });
  });
});

describe('casting rules', () => {
  it('a cast within the 500 ms grace after the window counts; one after it is refused', () => {
    const v = voteOf({ window_ms: 1000 });
    expect(v.windowEndsAt).toBe(2000);
    expect(v.cast('a', 'north', 2000 + LATE_CAST_GRACE_MS).ok).toBe(true);
    expect(v.cast('b', 'north', 2000 + LATE_CAST_GRACE_MS + 1)).toEqual({ ok: false, reason: 'vote_closed' });
    expect(v.timeRemaining(2200)).toBe(0);
    expect(v.timeRemaining(1500)).toBe(500);
  });

  it('a voter may change their vote max_revotes times', () => {
    const v = voteOf({ max_revotes: 2 });
    expect(v.cast('a', 'north', 1000).ok).toBe(true);
    expect(v.cast('a', 'south', 1000).ok).toBe(true);
    expect(v.cast('a', 'east', 1000).ok).toBe(true);
    expect(v.cast('a', 'north', 1000)).toEqual({ ok: false, reason: 'rate_limited' });
    expect(v.votesCast()).toEqual({ a: 'east' });
  });

  it('only the eligible vote: those present at the start, narrowed by voters', () => {
    const v = voteOf({ voters: ['a', 'b', 'zz'] });
    expect([...v.eligible]).toEqual(['a', 'b']);
    expect(v.cast('c', 'north', 1000)).toEqual({ ok: false, reason: 'not_eligible' });
  });

  it('ready_up closes once everyone has voted, not before min_window_ms', () => {
    const v = voteOf({ window_type: 'ready_up', min_window_ms: 300, window_ms: 5000 }, ['a', 'b']);
    expect(v.closesAt()).toBe(1000 + 5000 + LATE_CAST_GRACE_MS);
    v.cast('a', 'north', 1000);
    expect(v.closesAt()).toBe(6500);
    v.cast('b', 'north', 1000);
    expect(v.closesAt()).toBe(1300);
  });

  it('veto needs veto_enabled, an eligible voter and an open vote', () => {
    expect(voteOf().vetoRefusal('a', 1000)).toBe('veto_disabled');
    const v = voteOf({ veto_enabled: true, window_ms: 1000 });
    expect(v.vetoRefusal('zz', 1000)).toBe('not_eligible');
    expect(v.vetoRefusal('a', 1000)).toBeNull();
    expect(v.vetoRefusal('a', 2000 + LATE_CAST_GRACE_MS + 1)).toBe('vote_closed');
  });
});
