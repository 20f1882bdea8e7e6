import { describe, expect, it } from 'vitest';
import type { Bus, BusHandler } from '../host/fleet/bus';
import { FleetPresence } from '../host/fleet/fleet-presence';
import { silentLogger } from '../runtime/platform/log';

/** A node's presence copy, with the other nodes' bus messages delivered by the test. */
function node(nodeId = 'a') {
  const handlers = new Map<string, BusHandler>();
  const bus = { nodeId, prefix: '', redis: null, publish: () => {}, on: (kind: string, h: BusHandler) => void handlers.set(kind, h) } as unknown as Bus;
  const presence = new FleetPresence(bus, silentLogger);
  return {
    presence,
    from: (other: string, playerId: string, status: string | null, at: number) =>
      handlers.get('presence')!({ p: playerId, v: status === null ? null : { status, metadata: {} }, a: at }, other),
    gone: (other: string) => handlers.get('node_gone')!({}, other),
  };
}

describe('FleetPresence', () => {
  it('keeps a player online while any node holds their sockets, with the newest presence set on any of them', () => {
    const a = node('a');
    a.presence.set('p', { status: 'online', metadata: {} });
    a.from('b', 'p', 'in_game', Date.now() + 1000);
    expect(a.presence.get('p')?.status).toBe('in_game');
    a.from('c', 'p', 'away', Date.now() + 500);
    expect(a.presence.get('p')?.status).toBe('in_game');
    // An older word from a node does not replace its newer one.
    a.from('b', 'p', 'lobby', Date.now() - 5000);
    expect(a.presence.get('p')?.status).toBe('in_game');

    a.from('b', 'p', null, Date.now());
    expect(a.presence.get('p')?.status).toBe('away');
    a.presence.clear('p');
    expect(a.presence.isOnline('p')).toBe(true);
    a.gone('c');
    expect(a.presence.isOnline('p')).toBe(false);
    expect(a.presence.get('p')).toBeNull();
    expect(a.presence.count()).toBe(0);
  });

  it('forgets a dead node, and only the players it alone held go offline', () => {
    const a = node('a');
    a.presence.set('both', { status: 'online', metadata: {} });
    a.from('b', 'both', 'online', Date.now());
    a.from('b', 'only-b', 'online', Date.now());
    expect(a.presence.count()).toBe(2);
    a.gone('b');
    expect(a.presence.isOnline('both')).toBe(true);
    expect(a.presence.isOnline('only-b')).toBe(false);
    // A clear from a node that holds nothing of the player changes nothing.
    a.from('b', 'both', null, Date.now());
    expect(a.presence.isOnline('both')).toBe(true);
  });
});
