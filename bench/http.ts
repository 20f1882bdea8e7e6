// `npm run bench -- http [seconds] [connections]`: throughput and latency of a
// cheap route through the whole svc pipeline (node:http adapter → fetch
// Request → readiness → bearer → rate limiter → itty-router → handler →
// security headers → request log), against a bare node:http server answering
// the same JSON, measured in the same run. Servers run in child processes; the
// load generator (autocannon) runs in this one.
import autocannon from 'autocannon';
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const seconds = Number(process.argv[2] ?? 10);
const connections = Number(process.argv[3] ?? 50);

async function target(kind: 'bare' | 'svc'): Promise<{ child: ChildProcess; port: number }> {
  const child = fork(path.join(here, '_http-targets.ts'), [kind], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m: { port: number }) => resolve(m.port));
    child.once('exit', (code) => reject(new Error(`${kind} target exited with ${code}`)));
  });
  return { child, port };
}

interface Row {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

async function measure(name: string, port: number, path: string): Promise<Row> {
  // A short warm-up lets the JIT settle before the measured run.
  await autocannon({ url: `http://127.0.0.1:${port}${path}`, connections, duration: 2 });
  const r = await autocannon({ url: `http://127.0.0.1:${port}${path}`, connections, duration: seconds });
  return { name, rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

const rows: Row[] = [];
for (const [kind, route] of [['bare', '/'], ['svc', '/api/v1/health']] as const) {
  const t = await target(kind);
  try {
    rows.push(await measure(kind === 'bare' ? 'bare node:http (baseline)' : 'svc pipeline GET /api/v1/health', t.port, route));
  } finally {
    t.child.kill();
  }
}

const [bare, svc] = rows as [Row, Row];
console.log(`\nHTTP pipeline benchmark: ${connections} connections, ${seconds} s per target, loopback\n`);
console.log('| target | req/s | p50 ms | p99 ms | errors |');
console.log('|---|---:|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.name} | ${Math.round(r.rps)} | ${r.p50} | ${r.p99} | ${r.errors} |`);
const ratio = svc.rps / bare.rps;
console.log(`\nsvc / bare throughput: ${(ratio * 100).toFixed(1)} % (target ≥ 60 %) — ${ratio >= 0.6 ? 'met' : 'NOT met'}`);
