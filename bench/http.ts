// `npm run bench -- http [seconds] [connections] [rounds]`: throughput,
// latency and server CPU per request through the whole svc pipeline (node:http
// adapter → readiness → bearer → rate limiter → router → handler → security
// headers → request log) for two routes: a cheap one (`GET /api/v1/health`)
// and an authenticated read (`GET /api/v1/players/:id` with a bearer token,
// the token cache warm), each against a bare node:http server answering the
// same path with the same body (what svc answered it), measured in the same
// run. Servers run in child processes; the load generator (autocannon) runs
// in this one. Rounds alternate the targets
// so drifting load on a shared machine hits all of them; the verdicts use the
// medians. SVC_BENCH_ROOT measures another checkout's service with this
// benchmark (see bench/_children.ts).
//
// Calibration, in the same rounds: the bare server again, doing 5 and 10 µs
// of busy work before each answer of the health body. On loopback with the
// load generator on the same cores, a microsecond of work costs the server
// more than a microsecond (the kernel bills waking the load generator to the
// answering write, and a slower server finds it asleep more often), so these
// rows say which share of bare a given pipeline cost can keep on this machine.
// A last calibration row serves the authenticated read written by hand on
// node:http with only the work that route cannot skip (bench/_http-targets.ts,
// `bare-read`): the share no pipeline can beat here. The svc read's median
// throughput over the hand-written read's is issue 33's figure (target ≥ 85 %),
// printed last with each round's pair.
import autocannon from 'autocannon';
import { forkChild, svcRevision, type Child } from './_children';
import { progress, table } from './_report';

const CALIBRATION_US = [5, 10];

const seconds = Number(process.argv[2] ?? 8);
const connections = Number(process.argv[3] ?? 50);
const rounds = Number(process.argv[4] ?? 3);
const TARGET = 0.6;
/** Issue 33: svc's authenticated read against the same read written by hand, in the same run. */
const HAND_WRITTEN_TARGET = 0.85;

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
/** Each svc route and the bare server answering the same path with the same body. */
let pairs: { bare: Load; svc: Load }[] = [];
/** The bare server doing busy work before each answer of the health body. */
const calibrations: Load[] = [];
/** The authenticated read written by hand on node:http (compared with the profile's bare baseline). */
let handWritten: Load | null = null;
try {
  const svc = await forkChild('_http-targets.ts', ['svc']);
  children.push(svc);
  const { token, playerId } = svc.info as { token: string; playerId: string };
  const routes: { name: string; path: string; headers: Record<string, string> }[] = [
    { name: 'GET /api/v1/health', path: '/api/v1/health', headers: {} },
    { name: 'GET /api/v1/players/:id, bearer', path: `/api/v1/players/${playerId}`, headers: { authorization: `Bearer ${token}` } },
  ];
  // The first authenticated request fills the token cache; a refusal here
  // would make every measured request an error. Its body is what the bare
  // server sends for that path.
  const bodies: Record<string, string> = {};
  for (const r of routes) {
    const res = await fetch(`${svc.url}${r.path}`, { headers: r.headers });
    bodies[r.path] = await res.text();
    if (res.status !== 200) throw new Error(`${r.name} answered ${res.status}: ${bodies[r.path]}`);
  }
  const bare = await forkChild('_http-targets.ts', ['bare', JSON.stringify(bodies)]);
  children.push(bare);
  pairs = routes.map((r) => ({
    bare: { name: `bare node:http, same body as ${r.path.startsWith('/api/v1/health') ? 'health' : 'the profile'} (baseline)`, target: bare, path: r.path, headers: {} },
    svc: { name: `svc ${r.name}`, target: svc, path: r.path, headers: r.headers },
  }));
  for (const us of CALIBRATION_US) {
    const worker = await forkChild('_http-targets.ts', ['bare', JSON.stringify(bodies), String(us)]);
    children.push(worker);
    calibrations.push({ name: `bare node:http + ${us} µs of work per request, health body (calibration)`, target: worker, path: routes[0]!.path, headers: {} });
  }
  const read = await forkChild('_http-targets.ts', ['bare-read', JSON.stringify(bodies)]);
  children.push(read);
  handWritten = { name: 'authenticated read written by hand on bare node:http (calibration)', target: read, path: routes[1]!.path, headers: routes[1]!.headers };
  const loads = [...pairs.flatMap((p) => [p.bare, p.svc]), ...calibrations, handWritten];
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
console.log('');
for (const { bare, svc } of pairs) {
  const ratio = median(of(svc).map((r) => r.rps)) / median(of(bare).map((r) => r.rps));
  const cpuRatio = median(of(bare).map((r) => r.cpuUsPerRequest)) / median(of(svc).map((r) => r.cpuUsPerRequest));
  console.log(`median ${svc.name} / bare throughput: ${(ratio * 100).toFixed(1)} % (target ≥ ${TARGET * 100} %, informational) — ${ratio >= TARGET ? 'met' : 'NOT met'}`);
  console.log(`  server CPU per request, bare / svc: ${(cpuRatio * 100).toFixed(1)} % (the throughput svc would keep if the server's core were the only limit)`);
}
for (const load of calibrations) {
  const ratio = median(of(load).map((r) => r.rps)) / median(of(pairs[0]!.bare).map((r) => r.rps));
  console.log(`calibration: ${load.name.replace(/, health body \(calibration\)$/, '')} keeps ${(ratio * 100).toFixed(1)} % of bare`);
}
if (handWritten) {
  const ratio = median(of(handWritten).map((r) => r.rps)) / median(of(pairs[1]!.bare).map((r) => r.rps));
  console.log(`calibration: the authenticated read written by hand keeps ${(ratio * 100).toFixed(1)} % of bare (the most any pipeline can keep here)`);
  const read = pairs[1]!.svc;
  const svcRps = of(read).map((r) => r.rps);
  const handRps = of(handWritten).map((r) => r.rps);
  const share = median(svcRps) / median(handRps);
  // Each round's pair too: the spread between rounds on a shared machine is as large as most changes.
  const perRound = svcRps.map((rps, i) => `${((rps / handRps[i]!) * 100).toFixed(1)}`).join(' / ');
  console.log(
    `median ${read.name} / the same read written by hand: ${(share * 100).toFixed(1)} % (rounds ${perRound} %; target ≥ ${HAND_WRITTEN_TARGET * 100} %) — ${share >= HAND_WRITTEN_TARGET ? 'met' : 'NOT met'}`,
  );
}
