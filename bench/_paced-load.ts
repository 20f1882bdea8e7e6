// Child process for latency under a given load (bench/leaderboard.ts): sends
// requests at an even pace (open loop) over a fixed number of keep-alive
// connections and reports latency measured from each request's scheduled
// time, so a stalled server or a late generator counts against the figure
// instead of hiding behind fewer requests. autocannon's `overallRate` sends
// each second's requests in a burst, which measures its own bursts; closed
// loops measure queueing.
import { Agent, request } from 'node:http';
import { serveParent } from './_children';

interface Request {
  path: string;
  headers: Record<string, string>;
  /** JSON text; makes it a POST. */
  body?: string;
}

interface Target {
  url: string;
  connections: number;
  /** Each timed request picks one at random. */
  requests: Request[];
}

let target: (Target & { agent: Agent }) | null = null;

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}

/** Resolves to the status, or 0 when the request failed. */
function send(agent: Agent, url: string, r: Request): Promise<number> {
  return new Promise((resolve) => {
    const headers = r.body === undefined ? r.headers : { ...r.headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(r.body)) };
    const req = request(`${url}${r.path}`, { agent, method: r.body === undefined ? 'GET' : 'POST', headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.end(r.body);
  });
}

serveParent(
  {},
  {
    /**
     * Sends every request once, untimed: connections open and the node's
     * token cache holds each player, as for clients already playing (a cold
     * token costs a database read, measured elsewhere). The parent warms
     * every generator before it times any, so no warm-up lands in a window.
     */
    async warm(t: Target) {
      const agent = new Agent({ keepAlive: true, maxSockets: t.connections });
      target = { ...t, agent };
      for (let i = 0; i < t.requests.length; i += t.connections) await Promise.all(t.requests.slice(i, i + t.connections).map((r) => send(agent, t.url, r)));
    },

    async paced(window: { rate: number; seconds: number }) {
      if (!target) throw new Error('warm first');
      const m = { ...target, ...window };
      const agent = m.agent;
      const latencies: number[] = [];
      let errors = 0;
      const total = Math.round(m.rate * m.seconds);
      const interval = 1000 / m.rate;
      const pending: Promise<void>[] = [];
      const fire = (due: number) => {
        const r = m.requests[Math.floor(Math.random() * m.requests.length)]!;
        pending.push(
          send(agent, m.url, r).then((status) => {
            if (status !== 200) errors++;
            latencies.push(performance.now() - due);
          }),
        );
      };
      const started = performance.now();
      let sent = 0;
      while (sent < total) {
        const now = performance.now();
        // Everything due by now goes out; the next wake is the next due time.
        while (sent < total && started + sent * interval <= now) fire(started + sent++ * interval);
        const wait = started + sent * interval - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
      await Promise.all(pending);
      const seconds = (performance.now() - started) / 1000;
      latencies.sort((a, b) => a - b);
      return { rps: latencies.length / seconds, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), errors };
    },
  },
);
