// `npm run bench -- chat [seconds] [members]`: chat fan-out. One channel with
// 1,000 members (each its own WebSocket on 127.0.0.1, all held by this
// load-generator process); the server runs in a child process. Measures the
// latency from `chat.send` to the LAST member receiving the `chat.message`
// (p50/p99), checks that every member got every message exactly once, and
// reports deliveries per second; first at the target rate (20 messages/s,
// target p99 < 50 ms), then flooding (100 messages/s) for the ceiling. The
// baseline, measured in the same run with the same client code, is a bare
// `ws` server that answers every request frame and broadcasts each
// `chat.send` to every socket with one encoding.
import { WebSocket } from 'ws';
import { forkChild } from './_children';
import { progress } from './_report';

const CHANNEL = 'global:bench';

interface Member {
  ws: WebSocket;
  /** message id → times received (must end at exactly 1). */
  got: Map<string, number>;
}

interface Phase {
  target: string;
  phase: string;
  rate: number;
  sent: number;
  p50: number;
  p99: number;
  max: number;
  deliveriesPerSec: number;
  lost: number;
  duplicated: number;
}

async function register(port: number, i: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: `bench_${process.pid}_${i}`, password: 'bench-password-1' }),
  });
  if (res.status !== 200) throw new Error(`register ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** Opens a socket, authenticates it, joins the channel; resolves when joined. */
function member(port: number, token: string, onMessage: (m: Member, frame: { type: string; payload: { content: string } }) => void): Promise<Member> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, { perMessageDeflate: false });
    const m: Member = { ws, got: new Map() };
    ws.on('error', reject);
    ws.on('open', () => ws.send(JSON.stringify({ type: 'session.connect', cid: 'c', payload: { token } })));
    ws.on('message', (data) => {
      const text = data.toString();
      // The hot path skips JSON.parse: the generator must not be what is measured.
      if (text.startsWith('{"type":"chat.message"')) {
        const at = text.indexOf('"content":"') + 11;
        return onMessage(m, { type: 'chat.message', payload: { content: text.slice(at, text.indexOf('"', at)) } });
      }
      const f = JSON.parse(text);
      if (f.type === 'session.connected') ws.send(JSON.stringify({ type: 'chat.join', cid: 'j', payload: { channel_id: CHANNEL } }));
      else if (f.type === 'chat.joined') resolve(m);
      else if (f.type === 'chat.message') onMessage(m, f);
      else if (f.type === 'error') reject(new Error(JSON.stringify(f.payload)));
    });
  });
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function runTarget(kind: 'bare' | 'svc', seconds: number, members: number): Promise<Phase[]> {
  const target = await forkChild('_chat-target.ts', [kind]);
  const port = target.port;
  try {
    const tokens: string[] = [];
    if (kind === 'svc') {
      for (let i = 0; i < members; i += 25) {
        tokens.push(...(await Promise.all(Array.from({ length: Math.min(25, members - i) }, (_, k) => register(port, i + k)))));
      }
    } else {
      for (let i = 0; i < members; i++) tokens.push('bare');
    }

    const sentAt = new Map<string, number>();
    const lastAt = new Map<string, number>();
    const received = new Map<string, number>();
    const onMessage = (m: Member, f: { payload: { content: string } }) => {
      const id = f.payload.content;
      const now = performance.now();
      m.got.set(id, (m.got.get(id) ?? 0) + 1);
      received.set(id, (received.get(id) ?? 0) + 1);
      lastAt.set(id, now);
    };
    const all: Member[] = [];
    for (let i = 0; i < members; i += 50) {
      all.push(...(await Promise.all(tokens.slice(i, i + 50).map((t) => member(port, t, onMessage)))));
    }

    const phases: Phase[] = [];
    for (const [phase, rate, secs] of [['warm-up', 20, 2], ['target', 20, seconds], ['flood', 100, Math.max(3, Math.floor(seconds / 2))]] as const) {
      progress(`${kind}: ${phase}, ${rate} msgs/s for ${secs} s into ${members} members`);
      // Senders spread the rate so no socket nears the 60 frames/s cap.
      const senders = all.slice(0, Math.max(1, Math.ceil(rate / 20)));
      const ids: string[] = [];
      const total = rate * secs;
      const started = performance.now();
      for (let n = 0; n < total; n++) {
        const due = started + (n * 1000) / rate;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const id = `${phase}-${n}`;
        ids.push(id);
        sentAt.set(id, performance.now());
        senders[n % senders.length]!.ws.send(JSON.stringify({ type: 'chat.send', payload: { channel_id: CHANNEL, content: id } }));
      }
      // Drain: wait until every message reached every member; after 30 s what is missing counts as lost.
      const deadline = performance.now() + 30_000;
      while (performance.now() < deadline && ids.some((id) => (received.get(id) ?? 0) < members)) await new Promise((r) => setTimeout(r, 20));
      const elapsed = (Math.max(...ids.map((id) => lastAt.get(id) ?? started)) - started) / 1000;
      if (phase === 'warm-up') continue;
      const latencies = ids.filter((id) => received.get(id) === members).map((id) => lastAt.get(id)! - sentAt.get(id)!).sort((a, b) => a - b);
      let lost = 0;
      let duplicated = 0;
      for (const m of all) {
        for (const id of ids) {
          const c = m.got.get(id) ?? 0;
          if (c === 0) lost++;
          if (c > 1) duplicated += c - 1;
        }
      }
      const deliveries = ids.reduce((sum, id) => sum + (received.get(id) ?? 0), 0);
      phases.push({
        target: kind === 'bare' ? 'bare ws broadcast (baseline)' : 'svc chat (persisted, ACL, buffer)',
        phase,
        rate,
        sent: ids.length,
        p50: percentile(latencies, 50),
        p99: percentile(latencies, 99),
        max: latencies[latencies.length - 1] ?? NaN,
        deliveriesPerSec: deliveries / elapsed,
        lost,
        duplicated,
      });
    }
    for (const m of all) m.ws.terminate();
    return phases;
  } finally {
    await target.stop();
  }
}

const seconds = Number(process.argv[2] ?? 10);
const members = Number(process.argv[3] ?? 1000);
const rows = [...(await runTarget('bare', seconds, members)), ...(await runTarget('svc', seconds, members))];
console.log(`\nChat fan-out: one channel, ${members} member sockets on 127.0.0.1 (load generator and server in separate processes)\n`);
console.log('| target | phase | msgs/s in | msgs | p50 ms | p99 ms | max ms | deliveries/s | lost | duplicated |');
console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const r of rows) {
  console.log(`| ${r.target} | ${r.phase} | ${r.rate} | ${r.sent} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.max.toFixed(1)} | ${Math.round(r.deliveriesPerSec)} | ${r.lost} | ${r.duplicated} |`);
}
const svc = rows.find((r) => r.target.startsWith('svc') && r.phase === 'target')!;
const clean = rows.every((r) => r.lost === 0 && r.duplicated === 0);
console.log(`\nsvc at ${svc.rate} msgs/s: p99 ${svc.p99.toFixed(1)} ms (target < 50 ms) — ${svc.p99 < 50 ? 'met' : 'NOT met'}; no loss or duplication: ${clean ? 'yes' : 'NO'}`);
// Member sockets still open in this process would keep it alive.
process.exit(0);
