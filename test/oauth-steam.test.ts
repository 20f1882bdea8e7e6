import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './support/accounts';
import { startTestServer, type TestServer } from './support/server';

/**
 * The ticket provider against a local fake of its web API on loopback
 * (`steam_api_base`). The fake answers by ticket: accept, refuse, a
 * malformed reply, a dropped connection, or no answer at all (timeout).
 */

const TICKETS = { refuse: 'bad0', malformed: 'beef', drop: 'd00d', hang: 'dead', noSummary: 'cafe' };
/** Steam ids the fake reports as VAC-banned. */
const vacBanned = new Set<string>();

let fake: Server;
let calls: URL[] = [];
let s: TestServer;
const hanging: ServerResponse[] = [];

function steamId(ticket: string): string {
  return `7656119${String(parseInt(ticket.slice(0, 8), 16) % 1e10).padStart(10, '0')}`;
}

function answer(req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'http://fake');
  calls.push(url);
  const send = (body: unknown) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(typeof body === 'string' ? body : JSON.stringify(body));
  };
  if (url.pathname === '/ISteamUserAuth/AuthenticateUserTicket/v1/') {
    const ticket = url.searchParams.get('ticket') ?? '';
    if (ticket === TICKETS.refuse) return send({ response: { error: { errorcode: 101, errordesc: 'Invalid ticket' } } });
    if (ticket === TICKETS.malformed) return send('<html>oops</html>');
    if (ticket === TICKETS.drop) return void req.socket.destroy();
    if (ticket === TICKETS.hang) return void hanging.push(res);
    const id = ticket === TICKETS.noSummary ? '76561190000000000' : steamId(ticket);
    return send({ response: { params: { result: 'OK', steamid: id, ownersteamid: id, vacbanned: vacBanned.has(id), publisherbanned: false } } });
  }
  if (url.pathname === '/ISteamUser/GetPlayerSummaries/v2/') {
    if (url.searchParams.get('steamids') === '76561190000000000') return send({ response: {} });
    return send({ response: { players: [{ steamid: url.searchParams.get('steamids'), personaname: 'Gabe N.' }] } });
  }
  res.writeHead(404).end();
}

beforeAll(async () => {
  fake = createServer(answer);
  await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
  const port = (fake.address() as AddressInfo).port;
  s = await startTestServer({
    steam_api_key: 'test-api-key',
    steam_app_id: 480,
    steam_api_base: `http://127.0.0.1:${port}`,
    provider_timeout_ms: 300,
  });
});
afterAll(async () => {
  for (const res of hanging) res.destroy();
  await s?.close();
  fake.closeAllConnections();
  await new Promise<void>((resolve) => fake.close(() => resolve()));
});

const steam = (token: string) => s.call('POST', '/api/v1/auth/oauth', { body: { provider: 'steam', token } });
const rejectedWith = async (token: string, reason: string) => {
  const res = await steam(token);
  expectError(res, 401, 'auth.provider_rejected');
  expect(res.body.error.details.reason).toBe(reason);
};

describe('ticket provider', () => {
  it('validates the ticket with the API (key and app id), names the player from the summary, then logs in', async () => {
    calls = [];
    const ticket = '0123456789ABCDEFabcdef'.repeat(4);
    const res = await steam(ticket);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.created).toBe(true);
    const uid = steamId(ticket);
    expect(res.body.username).toMatch(new RegExp(`^steam_${uid.slice(0, 8)}_\\d{4}$`));
    expect(calls.map((c) => c.pathname)).toEqual(['/ISteamUserAuth/AuthenticateUserTicket/v1/', '/ISteamUser/GetPlayerSummaries/v2/']);
    expect(calls[0]!.searchParams.get('key')).toBe('test-api-key');
    expect(calls[0]!.searchParams.get('appid')).toBe('480');
    expect(calls[0]!.searchParams.get('ticket')).toBe(ticket);
    const me = await s.call('GET', `/api/v1/players/${res.body.player_id}`, { token: res.body.access_token });
    expect(me.body.display_name).toBe('Gabe N.');

    const again = await steam(ticket);
    expect(again.status).toBe(200);
    expect(again.body.created).toBeUndefined();
    expect(again.body.player_id).toBe(res.body.player_id);
    expect(JSON.stringify(s.logs)).not.toContain('test-api-key');
  });

  it('stores the provider flags and refreshes them on every sign-in', async () => {
    const ticket = 'ba11ba1100ff';
    const first = await steam(ticket);
    expect(first.status).toBe(200);
    const flags = async () =>
      (await s.ctx.db.selectFrom('player_identities').select('provider_metadata').where('player_id', '=', first.body.player_id).executeTakeFirstOrThrow()).provider_metadata;
    expect(await flags()).toEqual({ vacbanned: false, publisherbanned: false });
    vacBanned.add(steamId(ticket));
    expect((await steam(ticket)).body.player_id).toBe(first.body.player_id);
    expect(await flags()).toEqual({ vacbanned: true, publisherbanned: false });
  });

  it('keeps the sign-in when the summary has no name (display name falls back to the username)', async () => {
    const res = await steam(TICKETS.noSummary);
    expect(res.status).toBe(200);
    const me = await s.call('GET', `/api/v1/players/${res.body.player_id}`, { token: res.body.access_token });
    expect(me.body.display_name).toBe(res.body.username);
  });

  it('rejects non-hex, empty and over-long tickets before any outbound call', async () => {
    calls = [];
    for (const bad of ['xyz', '12 34', '0x1234', 'ab-cd', 'é1', 'a'.repeat(4097), '']) await rejectedWith(bad, 'malformed_ticket');
    expect(calls).toHaveLength(0);
    expect((await steam('a'.repeat(4096))).status).toBe(200);
  });

  it('answers provider rejections with their reasons: refused, malformed reply, unreachable, timeout', async () => {
    await rejectedWith(TICKETS.refuse, 'ticket_refused');
    await rejectedWith(TICKETS.malformed, 'malformed_reply');
    await rejectedWith(TICKETS.drop, 'provider_unreachable');
    await rejectedWith(TICKETS.hang, 'timeout');
  });
});

describe('configuration', () => {
  it('needs both the key and the app id; otherwise steam is unsupported and the boot says why', async () => {
    const half = await startTestServer({ steam_api_key: 'only-a-key' });
    try {
      expectError(await half.call('POST', '/api/v1/auth/oauth', { body: { provider: 'steam', token: 'abcd' } }), 401, 'auth.unsupported_provider');
      expect(half.logs.some((l) => l.event === 'steam_provider_dropped')).toBe(true);
    } finally {
      await half.close();
    }
  });
});
