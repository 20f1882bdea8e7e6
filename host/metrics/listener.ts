import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../../runtime/platform/log';
import type { NodeMetrics } from './registry';

/** The `/metrics` listener, on its own port so the scrape never shares the API's address, limits or logs. */
export interface MetricsListener {
  port: number;
  url: string;
  close(): Promise<void>;
}

/**
 * Serves `GET /metrics` (and HEAD) in the Prometheus text format; anything
 * else is a bare 404. Keep-alive connections from a scraper would hold
 * `server.close()` open, so closing drops them at once: a scrape cut short
 * by shutdown costs nothing.
 */
export async function listenForScrapes(metrics: NodeMetrics, port: number, host: string, log: Logger): Promise<MetricsListener> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8', 'content-length': '10' });
      res.end('not found\n');
      return;
    }
    metrics.scrape().then(
      (text) => {
        res.writeHead(200, { 'content-type': metrics.contentType, 'content-length': String(Buffer.byteLength(text)), 'cache-control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (err) => {
        log.error('metrics_scrape_failed', { error: err });
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
        res.end('scrape failed\n');
      },
    );
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (err) => log.error('metrics_listener_failed', { error: err }));
  const bound = (server.address() as AddressInfo).port;
  const shown = host.includes(':') ? `[${host}]` : host;
  log.info('metrics_listening', { host, port: bound });
  return {
    port: bound,
    url: `http://${shown}:${bound}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
