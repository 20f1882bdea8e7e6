import autocannon from 'autocannon';
import { forkChild } from './_children';
const kind = process.argv[2] ?? 'svc';
const svc = await forkChild('_http-targets.ts', ['svc'], { nodeFlags: kind === 'svc' ? [] : [] });
const { token, playerId } = svc.info as { token: string; playerId: string };
const path = `/api/v1/players/${playerId}`;
const headers = { authorization: `Bearer ${token}` };
const body = await (await fetch(`${svc.url}${path}`, { headers })).text();
let target = svc;
if (kind !== 'svc') {
  await svc.stop();
  target = await forkChild('_http-targets.ts', ['bare-read', JSON.stringify({ [path]: body })]);
}
const url = `${target.url}${path}`;
await autocannon({ url, headers, connections: 50, duration: 3 });
console.log('PID', target.pid, 'ready');
const c0 = target.cpuMs();
const r = await autocannon({ url, headers, connections: 50, duration: Number(process.argv[3] ?? 10) });
console.log(kind, 'rps', r.requests.average, 'cpu us/req', ((target.cpuMs() - c0) * 1000) / r.requests.total);
await target.stop();
