import { describe, expect, it } from 'vitest';
import { bootBanner, type BannerInput } from '../host/banner';
import { parseSettings } from '../runtime/contracts/settings';

const pepper = 'p'.repeat(32);

function banner(raw: Record<string, unknown>, declared: { guestAuth?: boolean; registration?: 'open' | 'closed' | null } = {}, over: Partial<BannerInput> = {}): string {
  const { settings } = parseSettings(raw);
  return bootBanner({
    version: '1.2.3',
    url: 'http://localhost:8084',
    configFile: null,
    database: { kind: 'embedded', dataDir: '/srv/data' },
    gameDir: '/srv/game',
    game: { modes: new Map(), guestAuth: declared.guestAuth ?? false, registration: declared.registration ?? null, notices: [] },
    ctx: {
      settings,
      game: { guestAuth: () => declared.guestAuth ?? false, registration: () => declared.registration ?? null },
      identity: { supports: (p: string) => p === 'discord', verify: async () => { throw new Error('unused'); } },
    },
    ...over,
  });
}

describe('boot banner', () => {
  it('says what runs and on what, and hides a database password', () => {
    const text = banner({}, {}, { configFile: '/etc/svc.json', database: { kind: 'postgres', url: 'postgres://svc:hunter2@db:5432/svc' } });
    expect(text.split('\n')[0]).toBe('svc 1.2.3 listening on http://localhost:8084 (REST /api/v1, WebSocket /ws)');
    expect(text).toContain('/etc/svc.json');
    expect(text).toContain('PostgreSQL at postgres://svc:***@db:5432/svc');
    expect(text).not.toContain('hunter2');
    expect(text).toContain('providers     discord');
  });

  it('gives the reason a feature is off', () => {
    expect(banner({})).toMatch(/guests +disabled: the game script does not declare `guest_auth = true`/);
    expect(banner({ guest_auth: false }, { guestAuth: true })).toMatch(/guests +disabled by the `guest_auth` setting/);
    expect(banner({}, { guestAuth: true })).toMatch(/guests +disabled: no `guest_verifier_pepper` of 32 bytes/);
    expect(banner({ guest_verifier_pepper: pepper }, { guestAuth: true })).toMatch(/guests +enabled/);
    expect(banner({ guest_verifier_pepper: pepper }, { guestAuth: true })).not.toContain(pepper);
    expect(banner({ registration: 'closed' })).toMatch(/registration +closed \(the `registration` setting\)/);
    expect(banner({}, { registration: 'closed' })).toMatch(/registration +closed \(declared by the game script\)/);
  });
});
