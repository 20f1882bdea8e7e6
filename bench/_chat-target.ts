// Child process for bench/chat.ts. `bare`: a `ws` server that answers every
// request frame and broadcasts each `chat.send` to every socket with one
// encoding. `svc`: the real node with one listed channel and open buckets.
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { serveParent, svcImport } from './_children';

if (process.argv[2] === 'bare') {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
  wss.on('connection', (ws) => {
    ws.on('message', (data) => {
      const f = JSON.parse(data.toString());
      if (f.type === 'chat.send') {
        const text = JSON.stringify({ type: 'chat.message', payload: { channel_id: f.payload.channel_id, sender_id: 'bare', content: f.payload.content, sent_at: Date.now() } });
        for (const c of wss.clients) c.send(text);
      } else if ('cid' in f) {
        ws.send(JSON.stringify({ type: f.type === 'session.connect' ? 'session.connected' : 'chat.joined', cid: f.cid, payload: {} }));
      }
    });
  });
  await new Promise((r) => wss.once('listening', r));
  serveParent({ port: (wss.address() as AddressInfo).port });
} else {
  const { openEmbedded } = await svcImport<typeof import('../host/infra/database')>('host/infra/database.ts');
  const { createHost } = await svcImport<typeof import('../host/host')>('host/host.ts');
  const { jsonLogger } = await svcImport<typeof import('../runtime/platform/log')>('runtime/platform/log.ts');
  const { parseSettings } = await svcImport<typeof import('../runtime/contracts/settings')>('runtime/contracts/settings.ts');
  const big = { limit: 1_000_000_000, window: 1000 };
  const { settings } = parseSettings({
    pbkdf2_iterations: 1000,
    rate_limits: { api: big, register: big, auth: big, ws_connect: big },
    game_modes: { bench: { chat_channels: ['bench'] } },
    chat_send_rate: { limit: 1000, window: 1000 },
    // Members only listen; keep them past the 60 s inbound-idle close.
    ws_idle_timeout_ms: 600_000,
  });
  const database = await openEmbedded({});
  // Log lines are formatted as in production and dropped, so their cost counts.
  const running = await createHost({ settings, database, log: jsonLogger(() => {}, 'info') });
  await running.ready;
  serveParent({ port: running.port });
}
