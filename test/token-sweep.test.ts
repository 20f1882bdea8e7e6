import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerPlayer } from './support/accounts';
import { startTestServer, type TestServer } from './support/server';

// The service's clock is the test's: moving it ages every token at once.
let offset = 0;
const clock = { now: () => Date.now() + offset };
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ access_token_ttl: 60, refresh_token_ttl: 3600 }, { clock });
});
afterAll(async () => {
  await s.close();
});

const tokensOf = async (playerId: string) =>
  (await s.ctx.db.selectFrom('player_tokens').select('context').where('user_id', '=', playerId).execute()).map((r) => r.context).sort();

describe('expired token sweep', () => {
  it('deletes tokens past their expiry and keeps the live ones', async () => {
    const p = await registerPlayer(s);
    expect(await tokensOf(p.player_id)).toEqual(['access', 'refresh']);
    expect(await s.tokenSweeper.sweep()).toBe(0);

    offset += 120_000; // past the access token's minute, inside the refresh token's hour
    expect(await s.tokenSweeper.sweep()).toBeGreaterThanOrEqual(1);
    expect(await tokensOf(p.player_id)).toEqual(['refresh']);
    // The surviving refresh token still works, and what it issues is live.
    const refreshed = await s.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: p.refresh_token } });
    expect(refreshed.status).toBe(200);
    expect((await s.call('GET', `/api/v1/players/${p.player_id}`, { token: refreshed.body.access_token })).status).toBe(200);

    offset += 2 * 3600_000; // past everything
    await s.tokenSweeper.sweep();
    expect(await tokensOf(p.player_id)).toEqual([]);
    expect(s.logs.some((l) => l.event === 'expired_tokens_deleted')).toBe(true);
  });
});
