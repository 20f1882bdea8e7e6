import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerPlayer } from './support/accounts';
import { startTestServer, type TestServer } from './support/server';
import { TestSocket } from './support/ws-client';

// Wire-protocol 4.3: revocation closes the sockets that authenticated with
// the revoked token (normal close, no frame); other sessions stay up.
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.close();
});

async function connected(token: string): Promise<TestSocket> {
  const socket = await TestSocket.open(s);
  expect((await socket.request('session.connect', { token })).type).toBe('session.connected');
  return socket;
}

const login = async (username: string, password: string) =>
  (await s.call('POST', '/api/v1/auth/login', { body: { username, password } })).body as { access_token: string; refresh_token: string };

describe('token revocation and live sockets', () => {
  it('logout closes the sockets of the revoked access token and family, not the player’s other sessions', async () => {
    const p = await registerPlayer(s);
    const second = await login(p.username, p.password);
    const revokedSocket = await connected(p.access_token);
    const otherSession = await connected(second.access_token);

    const res = await s.call('POST', '/api/v1/auth/logout', { token: p.access_token, body: { refresh_token: p.refresh_token } });
    expect(res.status).toBe(200);
    expect(await revokedSocket.closed).toEqual({ code: 1000, reason: 'session_closed' });
    expect((await otherSession.request('session.heartbeat')).type).toBe('session.heartbeat');
    otherSession.ws.close();
  });

  it('a reused refresh token closes the sockets of its whole family', async () => {
    const p = await registerPlayer(s);
    const rotated = (await s.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: p.refresh_token } })).body as { access_token: string };
    const socket = await connected(rotated.access_token);
    // Replaying the already rotated token revokes the family, the new access token included.
    expect((await s.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: p.refresh_token } })).status).toBe(401);
    expect((await socket.closed).code).toBe(1000);
  });
});
