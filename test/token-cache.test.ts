import { describe, expect, it } from 'vitest';
import { TokenCache } from '../host/infra/token-cache';
import { hashToken, type ResolvedAccess } from '../runtime/accounts/tokens';

/** The host cache in isolation, with a fake lookup whose answers and timing the test controls. */
function harness(ttlMs = 60_000) {
  let now = 1_000_000;
  const rows = new Map<string, ResolvedAccess>();
  let lookups = 0;
  let gate: Promise<void> | null = null;
  const cache = new TokenCache({
    now: () => now,
    ttlMs,
    lookup: async (hash) => {
      lookups++;
      const answer = rows.get(hash) ?? null;
      if (gate) await gate;
      return answer;
    },
  });
  return {
    cache,
    advance: (ms: number) => void (now += ms),
    lookups: () => lookups,
    async put(token: string, playerId: string, expiresIn = 3_600_000) {
      rows.set(await hashToken(token), { principal: { playerId, tokenId: `t-${token}` }, expiresAt: now + expiresIn });
    },
    async remove(token: string) {
      rows.delete(await hashToken(token));
    },
    hold() {
      let release!: () => void;
      gate = new Promise((r) => (release = r));
      return () => {
        gate = null;
        release();
      };
    },
  };
}

describe('TokenCache', () => {
  it('answers repeated resolutions from memory until the TTL', async () => {
    const h = harness(1000);
    await h.put('a', 'p1');
    expect(await h.cache.resolve('a')).toEqual({ playerId: 'p1', tokenId: 't-a' });
    expect(await h.cache.resolve('a')).toEqual({ playerId: 'p1', tokenId: 't-a' });
    expect(h.lookups()).toBe(1);
    h.advance(1001);
    await h.cache.resolve('a');
    expect(h.lookups()).toBe(2);
  });

  it('never serves a token past its own expiry', async () => {
    const h = harness();
    await h.put('a', 'p1', 500);
    expect(await h.cache.resolve('a')).not.toBeNull();
    await h.remove('a');
    h.advance(501);
    expect(await h.cache.resolve('a')).toBeNull();
  });

  it('evicts by token and by player at once', async () => {
    const h = harness();
    await h.put('a', 'p1');
    await h.put('b', 'p1');
    await h.put('c', 'p2');
    for (const t of ['a', 'b', 'c']) await h.cache.resolve(t);
    for (const t of ['a', 'b', 'c']) await h.remove(t);

    await h.cache.evictToken('a');
    expect(await h.cache.resolve('a')).toBeNull();
    expect(await h.cache.resolve('b')).not.toBeNull();

    h.cache.evictPlayer('p1');
    expect(await h.cache.resolve('b')).toBeNull();
    expect(await h.cache.resolve('c')).toEqual({ playerId: 'p2', tokenId: 't-c' });
  });

  it('remembers unknown tokens briefly (5 s)', async () => {
    const h = harness();
    expect(await h.cache.resolve('nope')).toBeNull();
    expect(await h.cache.resolve('nope')).toBeNull();
    expect(h.lookups()).toBe(1);
    h.advance(5001);
    await h.cache.resolve('nope');
    expect(h.lookups()).toBe(2);
  });

  it('does not cache a lookup that was in flight when an eviction happened', async () => {
    const h = harness();
    await h.put('a', 'p1');
    const release = h.hold();
    const racing = h.cache.resolve('a');
    await new Promise((r) => setTimeout(r, 10));
    // Revocation commits and evicts while the lookup still holds the old row.
    await h.remove('a');
    h.cache.evictPlayer('p1');
    release();
    expect(await racing).not.toBeNull();
    expect(await h.cache.resolve('a')).toBeNull();
  });

  it('caches nothing with a zero TTL, and refuses oversized strings without a lookup', async () => {
    const h = harness(0);
    await h.put('a', 'p1');
    await h.cache.resolve('a');
    await h.cache.resolve('a');
    expect(h.lookups()).toBe(2);
    expect(await h.cache.resolve('x'.repeat(257))).toBeNull();
    expect(await h.cache.resolve('')).toBeNull();
    expect(h.lookups()).toBe(2);
  });

  it('stays within its size bound, dropping the least recently used first', async () => {
    const cache = new TokenCache({ now: () => 0, ttlMs: 60_000, maxEntries: 3, lookup: async () => null });
    for (const t of ['a', 'b', 'c', 'd']) await cache.resolve(t);
    expect(cache.size).toBe(3);
  });

  it('keeps a player who keeps making requests through a flood of distinct garbage tokens', async () => {
    let lookups = 0;
    const cache = new TokenCache({
      now: () => 0,
      ttlMs: 60_000,
      maxEntries: 100,
      lookup: async (hash) => {
        lookups++;
        return hash === realHash ? { principal: { playerId: 'p1', tokenId: 't1' }, expiresAt: 1e12 } : null;
      },
    });
    const realHash = await hashToken('real');
    await cache.resolve('real');
    for (let i = 0; i < 1000; i++) {
      await cache.resolve(`garbage-${i}`);
      if (i % 50 === 0) expect(await cache.resolve('real')).toEqual({ playerId: 'p1', tokenId: 't1' });
    }
    // One lookup for the real token, one per garbage token; the real one never fell out.
    expect(lookups).toBe(1 + 1000);
    expect(cache.size).toBe(100);
    // Evicted garbage left no trace in the per-player index: evicting the player still works.
    cache.evictPlayer('p1');
    await cache.resolve('real');
    expect(lookups).toBe(1002);
  });
  it('while told to trust answers for a bounded time (a fleet node cut off from its bus), re-reads what is older', async () => {
    const h = harness();
    await h.put('a', 'p1');
    expect(await h.cache.resolve('a')).not.toBeNull();
    h.cache.trustFor(1000);
    h.advance(999);
    expect(await h.cache.resolve('a')).not.toBeNull();
    expect(h.lookups()).toBe(1);
    // Revoked where this node could not hear it: the database says so once the answer is older than the bound.
    await h.remove('a');
    h.advance(1);
    expect(await h.cache.resolve('a')).toBeNull();
    expect(h.lookups()).toBe(2);
    h.cache.trustFor(null);
    await h.put('b', 'p2');
    await h.cache.resolve('b');
    h.advance(30_000);
    await h.cache.resolve('b');
    expect(h.lookups()).toBe(3);
  });

  it('evictAll drops every entry, and a lookup that raced it is not cached', async () => {
    const h = harness();
    await h.put('a', 'p1');
    await h.put('b', 'p2');
    await h.cache.resolve('a');
    const release = h.hold();
    const racing = h.cache.resolve('b');
    h.cache.evictAll();
    release();
    expect(await racing).not.toBeNull();
    expect(h.cache.size).toBe(0);
    await h.cache.resolve('a');
    expect(h.lookups()).toBe(3);
  });
});
