// `npm run bench -- http [seconds] [connections] [rounds]`: throughput,
// latency and server CPU per request through the whole svc pipeline (node:http
// adapter → readiness → bearer → rate limiter → router → handler → security
// headers → request log) for two routes: a cheap one (`GET /api/v1/health`)
// and an authenticated read (`GET /api/v1/players/:id` with a bearer token,
// the token cache warm), against a bare node:http server answering JSON,
// measured in the same run. Servers run in child processes; the load
// generator (autocannon) runs in this one. Rounds alternate the three targets
// so drifting load on a shared machine hits all of them; the verdicts use the
// medians. SVC_BENCH_ROOT measures another checkout's service with this
// benchmark (see bench/_children.ts).
import autocannon from 'autocannon';
import { forkChild, svcRevision, type Child } from './_children';
import { progress, table } from './_report';

const seconds = Number(process.argv[2] ?? 8);
const connections = Number(process.argv[3] ?? 50);
const rounds = Number(process.argv[4] ?? 3);
const TARGET = 0.6;

interface Load {
  name: string;
  target: Child;
  path: string;
  headers: Record<string, string>;
}

interface Row {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  cpuUsPerRequest: number;
  errors: number;
}

function run(load: Load, duration: number) {
  return autocannon({ url: `${load.target.url}${load.path}`, headers: load.headers, connections, duration });
}

async function measure(load: Load, round: number): Promise<Row> {
  const before = load.target.cpuMs();
  const r = await run(load, seconds);
  const usedUs = (load.target.cpuMs() - before) * 1000;
  return { name: `${load.name}, round ${round}`, rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, cpuUsPerRequest: usedUs / Math.max(1, r.requests.total), errors: r.errors + r.non2xx };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const children: Child[] = [];
const rows: Row[] = [];
let loads: Load[] = [];
try {
  const bare = await forkChild('_http-targets.ts', ['bare']);
  children.push(bare);
  const svc = await forkChild('_http-targets.ts', ['svc']);
  children.push(svc);
  const { token, playerId } = svc.info as { token: string; playerId: string };
  loads = [
    { name: 'bare node:http (baseline)', target: bare, path: '/', headers: {} },
    { name: 'svc GET /api/v1/health', target: svc, path: '/api/v1/health', headers: {} },
    { name: 'svc GET /api/v1/players/:id, bearer', target: svc, path: `/api/v1/players/${playerId}`, headers: { authorization: `Bearer ${token}` } },
  ];
  // The first authenticated request fills the token cache; a refusal here would make every measured request an error.
  const first = await fetch(`${svc.url}${loads[2]!.path}`, { headers: loads[2]!.headers });
  if (first.status !== 200) throw new Error(`GET /api/v1/players/:id answered ${first.status}: ${await first.text()}`);
  // Warm every target up so the JIT has settled before anything is measured.
  for (const load of loads) await run(load, 2);
  for (let i = 1; i <= rounds; i++) {
    for (const load of loads) {
      progress(`round ${i} of ${rounds}: ${load.name}`);
      rows.push(await measure(load, i));
    }
  }
} finally {
  await Promise.all(children.map((c) => c.stop()));
}

table(
  `HTTP pipeline benchmark: ${connections} connections, ${seconds} s per measurement, ${rounds} alternating rounds, loopback; svc from ${svcRevision()}`,
  ['target', 'req/s', 'p50 ms', 'p99 ms', 'server CPU µs/req', 'errors'],
  rows.map((r) => [r.name, Math.round(r.rps), r.p50, r.p99, r.cpuUsPerRequest.toFixed(1), r.errors]),
);
const of = (load: Load) => rows.filter((r) => r.name.startsWith(`${load.name},`));
const [bareLoad, ...svcLoads] = loads;
const bareRps = median(of(bareLoad!).map((r) => r.rps));
const bareCpu = median(of(bareLoad!).map((r) => r.cpuUsPerRequest));
console.log('');
for (const load of svcLoads) {
  const ratio = median(of(load).map((r) => r.rps)) / bareRps;
  const cpuRatio = bareCpu / median(of(load).map((r) => r.cpuUsPerRequest));
  console.log(`median ${load.name} / bare throughput: ${(ratio * 100).toFixed(1)} % (target ≥ ${TARGET * 100} %, informational) — ${ratio >= TARGET ? 'met' : 'NOT met'}`);
  console.log(`  server CPU per request, bare / svc: ${(cpuRatio * 100).toFixed(1)} % (the throughput svc would keep if the server's core were the only limit)`);
}
