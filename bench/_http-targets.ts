// Child process for bench/http.ts: serves either the full svc pipeline or a
// bare node:http server answering the same JSON, and prints its port.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { openEmbedded } from '../host/database';
import { startServer } from '../host/server';
import { jsonLogger } from '../runtime/log';
import { parseSettings } from '../runtime/settings';

const kind = process.argv[2];
if (kind === 'bare' || kind === 'bare-async') {
  const body = JSON.stringify({ status: 'ok' });
  const write = (res: import('node:http').ServerResponse) => {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  const server = createServer((_req, res) => {
    if (kind === 'bare') write(res);
    else void Promise.resolve().then(() => write(res));
  });
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
} else {
  const { settings } = parseSettings({ rate_limits: { api: { limit: 1_000_000_000, window: 1000 } } });
  const database = await openEmbedded({});
  // Request lines are written as in production, to a sink, so their cost counts.
  const log = jsonLogger(() => {}, 'info');
  const running = await startServer({ settings, database, log });
  await running.ready;
  process.send!({ port: running.port });
}

// 'cpu' answers the CPU time this process has used (µs), so the parent can
// state server CPU per request, which contention on a shared machine skews
// far less than throughput. 'exit' leaves cleanly so --cpu-prof can write out.
process.on('message', (m) => {
  if (m === 'exit') process.exit(0);
  if (m === 'cpu') {
    const u = process.cpuUsage();
    process.send!({ cpu: u.user + u.system });
  }
});
