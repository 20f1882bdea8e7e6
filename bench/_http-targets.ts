// Child process for bench/http.ts: serves either the full svc pipeline or a
// bare node:http server answering the same JSON, path by path (after a given
// number of microseconds of busy work per request, for the calibration rows), or
// `bare-read`: an authenticated read written by hand on node:http with only the
// work the route cannot skip. The svc target registers one player over HTTP and
// announces `{port, token, playerId}`, so the parent can measure an
// authenticated read with that player's bearer token.
import { hash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serveParent, svcImport } from './_children';

const kind = process.argv[2];
if (kind === 'bare-read') {
  // What any server answering `GET /api/v1/players/:id` with a bearer token
  // must do, with no framework: read the bearer, hash it and find it in a
  // token cache, spend the player's rate-limit bucket, match the path and
  // check the id, find the profile's JSON text, mint a request id, send the
  // content type, the six security headers and the request id, and write one
  // request log line. Unknown tokens are admitted (the parent sends one).
  const bodies = new Map<string, string>(Object.entries(JSON.parse(process.argv[3] ?? '{}') as Record<string, string>));
  const tokens = new Map<string, string>();
  const buckets = new Map<string, { start: number; count: number }>();
  const PROFILE = /^\/api\/v1\/players\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;
  // The service's own security headers, so both answers carry the same bytes.
  const { SECURITY_HEADERS } = await svcImport<typeof import('../handlers/http')>('handlers/http.ts');
  const SECURITY = Object.entries(SECURITY_HEADERS).flat();
  // The line goes to a sink, as the svc target's request lines do.
  const sink = (_line: string): void => {};
  const answer = async (req: IncomingMessage, res: ServerResponse) => {
    const started = performance.now();
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1] ?? '';
    const key = hash('sha256', bearer, 'hex');
    let playerId = tokens.get(key);
    if (playerId === undefined) tokens.set(key, (playerId = randomUUID()));
    const now = Date.now();
    let bucket = buckets.get(playerId);
    if (!bucket || now - bucket.start >= 1000) buckets.set(playerId, (bucket = { start: now, count: 0 }));
    bucket.count++;
    const id = PROFILE.exec(req.url ?? '')?.[1];
    const body = (id && bodies.get(req.url!)) ?? '{}';
    const requestId = randomUUID();
    await undefined;
    const line = JSON.stringify({ ts: new Date(now).toISOString(), level: 'info', event: 'http_request', request_id: requestId, method: req.method, route: '/api/v1/players/:id', status: 200, duration_ms: performance.now() - started, ip: req.socket.remoteAddress, player_id: playerId });
    sink(line);
    res.writeHead(200, ['content-type', 'application/json; charset=utf-8', ...SECURITY, 'x-request-id', requestId, 'content-length', String(Buffer.byteLength(body))]);
    res.end(body);
  };
  const server = createServer((req, res) => void answer(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  serveParent({ port: (server.address() as AddressInfo).port });
} else if (kind === 'bare') {
  // The bodies svc answered, by path (a JSON argument), so that each baseline
  // sends the same bytes as the route it is compared with.
  const bodies = new Map<string, string>(Object.entries(JSON.parse(process.argv[3] ?? '{}') as Record<string, string>));
  const fallback = JSON.stringify({ status: 'ok' });
  // Optional microseconds of busy work per request (the calibration rows of bench/http.ts).
  const workUs = Number(process.argv[4] ?? 0);
  const write = (path: string, res: ServerResponse) => {
    if (workUs > 0) {
      const until = performance.now() + workUs / 1000;
      while (performance.now() < until);
    }
    const body = bodies.get(path) ?? fallback;
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  const server = createServer((req, res) => write(req.url ?? '/', res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  serveParent({ port: (server.address() as AddressInfo).port });
} else {
  const { openEmbedded } = await svcImport<typeof import('../host/infra/database')>('host/infra/database.ts');
  const { createHost } = await svcImport<typeof import('../host/host')>('host/host.ts');
  const { jsonLogger } = await svcImport<typeof import('../runtime/platform/log')>('runtime/platform/log.ts');
  const { parseSettings } = await svcImport<typeof import('../runtime/contracts/settings')>('runtime/contracts/settings.ts');
  // One address sends everything: the buckets must not be what is measured.
  const open = { limit: 1_000_000_000, window: 1000 };
  const { settings } = parseSettings({ pbkdf2_iterations: 1000, rate_limits: { api: open, register: open, auth: open } });
  const database = await openEmbedded({});
  // Request lines are written as in production, to a sink, so their cost counts.
  const log = jsonLogger(() => {}, 'info');
  const running = await createHost({ settings, database, log });
  await running.ready;
  const res = await fetch(`http://127.0.0.1:${running.port}/api/v1/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: `bench_${process.pid}`, password: 'bench-password-1' }),
  });
  if (res.status !== 200) throw new Error(`register answered ${res.status}: ${await res.text()}`);
  const player = (await res.json()) as { player_id: string; access_token: string };
  serveParent({ port: running.port, token: player.access_token, playerId: player.player_id });
}
