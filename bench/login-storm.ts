// Login storm: does password hashing starve cheap authenticated reads?
//
//   npm run bench -- login-storm [--accounts 200] [--concurrency 200] [--rounds 1] [--baseline-ms 3000]
//
// Starts the real host (host/main.ts from the sources, embedded database,
// default 100000 PBKDF2 iterations) as a child process, registers the
// accounts, measures the p99 of GET /players/:id alone (baseline), then again
// while `concurrency` clients log in `rounds` times each. Target: read p99
// under 25 ms during the storm.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startHost } from './_children';
import { progress } from './_report';

const TARGET_P99_MS = 25;

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}
const ACCOUNTS = arg('accounts', 200);
const CONCURRENCY = arg('concurrency', 200);
const ROUNDS = arg('rounds', 1);
const BASELINE_MS = arg('baseline-ms', 3000);

interface Reply {
  status: number;
  body: any;
  ms: number;
}

function call(port: number, agent: Agent, method: string, urlPath: string, body?: unknown, token?: string): Promise<Reply> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers: Record<string, string | number> = {};
  if (payload !== undefined) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = Buffer.byteLength(payload);
  }
  if (token) headers.authorization = `Bearer ${token}`;
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path: urlPath, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const ms = performance.now() - started;
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null, ms });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

function stats(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
  return { n: sorted.length, p50: at(0.5), p95: at(0.95), p99: at(0.99), max: sorted[sorted.length - 1] ?? NaN };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-login-storm-'));
  const config = path.join(dir, 'config.json');
  // Buckets out of the way: this measures hashing against reads, not the limiter.
  const big = { limit: 1_000_000, window: 1000 };
  writeFileSync(config, JSON.stringify({ rate_limits: { register: big, auth: big, api: big } }));
  const host = await startHost({ SVC_DATA_DIR: path.join(dir, 'data'), SVC_CONFIG: config }, [], { from: 'sources' });
  const port = host.port;

  try {
    await host.ready(120_000);
    const control = new Agent({ keepAlive: true, maxSockets: 16 });

    const prefix = `storm${Date.now().toString(36)}`;
    const password = 'storm password';
    const accounts: { username: string; id: string }[] = [];
    progress(`registering ${ACCOUNTS} accounts`);
    const registerStarted = performance.now();
    for (let i = 0; i < ACCOUNTS; i += 8) {
      const batch = Array.from({ length: Math.min(8, ACCOUNTS - i) }, (_, k) => `${prefix}_${i + k}`);
      const replies = await Promise.all(batch.map((username) => call(port, control, 'POST', '/api/v1/auth/register', { username, password })));
      for (const [k, r] of replies.entries()) {
        if (r.status !== 200) throw new Error(`register failed: ${r.status} ${JSON.stringify(r.body)}`);
        accounts.push({ username: batch[k]!, id: r.body.player_id });
      }
    }
    const registerMs = performance.now() - registerStarted;

    const reader = await call(port, control, 'POST', '/api/v1/auth/login', { username: accounts[0]!.username, password });
    const readerAgent = new Agent({ keepAlive: true, maxSockets: 1 });
    const target = `/api/v1/players/${accounts[accounts.length - 1]!.id}`;
    const readUntil = async (done: () => boolean): Promise<{ samples: number[]; errors: number }> => {
      const samples: number[] = [];
      let errors = 0;
      while (!done()) {
        const r = await call(port, readerAgent, 'GET', target, undefined, reader.body.access_token);
        if (r.status === 200) samples.push(r.ms);
        else errors++;
        await new Promise((res) => setTimeout(res, 2));
      }
      return { samples, errors };
    };

    // Warm-up, then the quiet baseline.
    await readUntil(((end) => () => performance.now() > end)(performance.now() + 500));
    const baselineEnd = performance.now() + BASELINE_MS;
    progress('reads without the storm');
    const baseline = await readUntil(() => performance.now() > baselineEnd);

    const stormAgent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
    let stormDone = false;
    const loginSamples: number[] = [];
    let loginErrors = 0;
    progress(`reads during a storm of ${CONCURRENCY} concurrent logins`);
    const stormStarted = performance.now();
    const during = readUntil(() => stormDone);
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async (_, w) => {
        const account = accounts[w % accounts.length]!;
        for (let r = 0; r < ROUNDS; r++) {
          const res = await call(port, stormAgent, 'POST', '/api/v1/auth/login', { username: account.username, password });
          if (res.status === 200) loginSamples.push(res.ms);
          else loginErrors++;
        }
      }),
    );
    stormDone = true;
    const stormMs = performance.now() - stormStarted;
    const storm = await during;

    const b = stats(baseline.samples);
    const d = stats(storm.samples);
    const l = stats(loginSamples);
    const f = (x: number) => x.toFixed(1).padStart(8);
    const lines = [
      `login-storm: ${ACCOUNTS} accounts, ${CONCURRENCY} concurrent logins x ${ROUNDS} rounds, PBKDF2 100000 iterations (default), embedded database`,
      `registered ${ACCOUNTS} accounts in ${(registerMs / 1000).toFixed(1)} s; storm lasted ${(stormMs / 1000).toFixed(1)} s ` +
        `(${(loginSamples.length / (stormMs / 1000)).toFixed(0)} logins/s)`,
      '',
      `| ${'measurement'.padEnd(37)} |        n |  p50 ms |  p95 ms |  p99 ms |  max ms | errors |`,
      `|${'-'.repeat(39)}|---------:|--------:|--------:|--------:|--------:|-------:|`,
      `| GET /players/:id, no storm (baseline) | ${String(b.n).padStart(8)} |${f(b.p50)} |${f(b.p95)} |${f(b.p99)} |${f(b.max)} | ${String(baseline.errors).padStart(6)} |`,
      `| GET /players/:id, during storm         | ${String(d.n).padStart(8)} |${f(d.p50)} |${f(d.p95)} |${f(d.p99)} |${f(d.max)} | ${String(storm.errors).padStart(6)} |`,
      `| POST /auth/login (storm)               | ${String(l.n).padStart(8)} |${f(l.p50)} |${f(l.p95)} |${f(l.p99)} |${f(l.max)} | ${String(loginErrors).padStart(6)} |`,
      '',
      `read p99 during storm: ${d.p99.toFixed(1)} ms (baseline ${b.p99.toFixed(1)} ms); target < ${TARGET_P99_MS} ms: ${d.p99 < TARGET_P99_MS ? 'PASS' : 'FAIL'}`,
    ];
    console.log(lines.join('\n'));
    control.destroy();
    readerAgent.destroy();
    stormAgent.destroy();
    if (loginErrors || storm.errors || baseline.errors) process.exitCode = 1;
  } finally {
    await host.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
