// `npm run bench -- http [seconds] [connections] [rounds]`: throughput,
// latency and server CPU per request of a cheap route through the whole svc
// pipeline (node:http adapter → readiness → bearer → rate limiter →
// itty-router → handler → security headers → request log), against a bare
// node:http server answering the same JSON, measured in the same run. Servers
// run in child processes; the load generator (autocannon) runs in this one.
// Rounds alternate bare and svc so drifting load on a shared machine hits both;
// the verdict uses the medians.
import autocannon from 'autocannon';
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { progress } from './_children';

const here = path.dirname(fileURLToPath(import.meta.url));
const seconds = Number(process.argv[2] ?? 8);
const connections = Number(process.argv[3] ?? 50);
const rounds = Number(process.argv[4] ?? 3);

interface Target {
  child: ChildProcess;
  port: number;
  cpu(): Promise<number>;
}

async function target(kind: 'bare' | 'svc'): Promise<Target> {
  const child = fork(path.join(here, '_http-targets.ts'), [kind], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m: { port: number }) => resolve(m.port));
    child.once('exit', (code) => reject(new Error(`${kind} target exited with ${code}`)));
  });
  const cpu = () =>
    new Promise<number>((resolve) => {
      child.once('message', (m: { cpu: number }) => resolve(m.cpu));
      child.send('cpu');
    });
  return { child, port, cpu };
}

interface Row {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  cpuUsPerRequest: number;
  errors: number;
}

async function measure(name: string, t: Target, route: string): Promise<Row> {
  const url = `http://127.0.0.1:${t.port}${route}`;
  const before = await t.cpu();
  const r = await autocannon({ url, connections, duration: seconds });
  const used = (await t.cpu()) - before;
  return { name, rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, cpuUsPerRequest: used / Math.max(1, r.requests.total), errors: r.errors + r.non2xx };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const bare = await target('bare');
const svc = await target('svc');
const rows: Row[] = [];
try {
  // Warm both up so the JIT has settled before anything is measured.
  for (const [t, route] of [[bare, '/'], [svc, '/api/v1/health']] as const) await autocannon({ url: `http://127.0.0.1:${t.port}${route}`, connections, duration: 2 });
  for (let i = 1; i <= rounds; i++) {
    progress(`round ${i} of ${rounds}: bare node:http`);
    rows.push(await measure(`bare node:http (baseline), round ${i}`, bare, '/'));
    progress(`round ${i} of ${rounds}: svc GET /api/v1/health`);
    rows.push(await measure(`svc GET /api/v1/health, round ${i}`, svc, '/api/v1/health'));
  }
} finally {
  bare.child.kill();
  svc.child.kill();
}

console.log(`\nHTTP pipeline benchmark: ${connections} connections, ${seconds} s per measurement, ${rounds} alternating rounds, loopback\n`);
console.log('| target | req/s | p50 ms | p99 ms | server CPU µs/req | errors |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.name} | ${Math.round(r.rps)} | ${r.p50} | ${r.p99} | ${r.cpuUsPerRequest.toFixed(1)} | ${r.errors} |`);
const bareRows = rows.filter((r) => r.name.startsWith('bare'));
const svcRows = rows.filter((r) => r.name.startsWith('svc'));
const ratio = median(svcRows.map((r) => r.rps)) / median(bareRows.map((r) => r.rps));
const cpuRatio = median(bareRows.map((r) => r.cpuUsPerRequest)) / median(svcRows.map((r) => r.cpuUsPerRequest));
console.log(`\nmedian svc / bare throughput: ${(ratio * 100).toFixed(1)} % (target ≥ 60 %) — ${ratio >= 0.6 ? 'met' : 'NOT met'}`);
console.log(`server CPU per request, bare / svc: ${(cpuRatio * 100).toFixed(1)} % (the throughput svc would keep if the server's core were the only limit)`);
