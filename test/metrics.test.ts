import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gameDir, matchScript } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, TestSocket } from './support/ws-client';

/**
 * The metrics listener, black-box: a node with `metrics_port: 0` binds a free
 * port beside the API and says where (`metricsUrl`); traffic over HTTP and the
 * socket moves the counters; the scrape parses as the Prometheus text format.
 */

/** One sample line: name, labels, value. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

interface Family {
  type: string;
  help: string;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const SUFFIXES: Record<string, readonly string[]> = { histogram: ['_bucket', '_sum', '_count'], summary: ['', '_sum', '_count'] };

/**
 * A strict reader of the text exposition format (0.0.4): every line is a
 * HELP, a TYPE or a sample of the family last declared; label values are
 * quoted with `\\`, `\"` and `\n` escapes; values are floats or ±Inf/NaN.
 * Anything else throws, naming the line.
 */
function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  if (!text.endsWith('\n')) throw new Error('exposition does not end with a newline');
  let current: { name: string; family: Family } | null = null;
  const lines = text.slice(0, -1).split('\n');
  lines.forEach((line, i) => {
    const fail = (why: string) => {
      throw new Error(`line ${i + 1} (${JSON.stringify(line)}): ${why}`);
    };
    if (line === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) {
        if (line.startsWith('# HELP') || line.startsWith('# TYPE')) fail('malformed comment');
        return;
      }
      const [, kind, name, rest] = m as unknown as [string, string, string, string];
      if (!NAME.test(name)) fail('bad metric name');
      let family = families.get(name);
      if (!family) {
        if (current && current.name !== name && families.has(name)) fail('family split');
        family = { type: 'untyped', help: '', samples: [] };
        families.set(name, family);
      }
      if (kind === 'TYPE') {
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest)) fail('unknown type');
        if (family.samples.length > 0) fail('TYPE after samples');
        family.type = rest;
      } else {
        family.help = rest;
      }
      current = { name, family };
      return;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( -?\d+)?$/.exec(line);
    if (!m) return fail('not a sample');
    const [, name, , body, raw] = m as unknown as [string, string, string | undefined, string | undefined, string];
    if (!current) return fail('sample before any TYPE');
    const suffixes = SUFFIXES[current.family.type] ?? [''];
    if (!suffixes.some((s) => name === current!.name + s)) fail(`sample does not belong to family ${current.name}`);
    const labels: Record<string, string> = {};
    if (body !== undefined && body !== '') {
      let rest = body;
      while (rest.length > 0) {
        const lm = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/.exec(rest);
        if (!lm) fail('malformed labels');
        const [whole, key, quoted] = lm as unknown as [string, string, string];
        if (!LABEL.test(key) || key in labels) fail(`bad or repeated label ${key}`);
        labels[key] = quoted.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
        rest = rest.slice(whole.length);
      }
    }
    let value: number;
    if (raw === '+Inf') value = Infinity;
    else if (raw === '-Inf') value = -Infinity;
    else if (raw === 'NaN') value = NaN;
    else if (/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(raw)) value = Number(raw);
    else return fail('bad value');
    current.family.samples.push({ name, labels, value });
  });
  for (const [name, family] of families) {
    if (family.type === 'histogram') checkHistogram(name, family);
  }
  return families;
}

/** Buckets rise with `le`, end at +Inf, and +Inf equals `_count`, per label set. */
function checkHistogram(name: string, family: Family): void {
  const series = new Map<string, Sample[]>();
  for (const s of family.samples) {
    if (s.name !== `${name}_bucket`) continue;
    const { le, ...rest } = s.labels;
    if (le === undefined) throw new Error(`${name}: bucket without le`);
    const key = JSON.stringify(rest);
    series.set(key, [...(series.get(key) ?? []), s]);
  }
  for (const [key, buckets] of series) {
    const last = buckets[buckets.length - 1]!;
    if (last.labels.le !== '+Inf') throw new Error(`${name}${key}: last bucket is not +Inf`);
    for (let i = 1; i < buckets.length; i++) {
      if (Number(buckets[i]!.labels.le) <= Number(buckets[i - 1]!.labels.le)) throw new Error(`${name}${key}: le not increasing`);
      if (buckets[i]!.value < buckets[i - 1]!.value) throw new Error(`${name}${key}: bucket counts fall`);
    }
    const count = family.samples.find((s) => s.name === `${name}_count` && JSON.stringify(s.labels) === key);
    if (!count || count.value !== last.value) throw new Error(`${name}${key}: _count differs from the +Inf bucket`);
  }
}

/** The metric families the "Metrics" section of docs/operations.md lists, read from that page itself. */
function documentedMetrics(): Map<string, string> {
  const page = readFileSync(new URL('../docs/operations.md', import.meta.url), 'utf8');
  const start = page.indexOf('\n## Metrics\n');
  expect(start, 'docs/operations.md has a Metrics section').toBeGreaterThan(0);
  const end = page.indexOf('\n## ', start + 5);
  const section = page.slice(start, end < 0 ? undefined : end);
  const listed = new Map<string, string>();
  for (const m of section.matchAll(/^\| `([a-z_:][a-z0-9_:]*)` \| (counter|gauge|histogram) \|/gm)) listed.set(m[1]!, m[2]!);
  return listed;
}

/** Process metrics from prom-client's collectors (docs/operations.md names them as a group). */
const PROCESS_METRICS = ['process_cpu_seconds_total', 'process_start_time_seconds', 'process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_version_info', 'nodejs_active_handles_total'];

const game = gameDir({
  'config.lua': 'return { duel = "duel.lua" }',
  // An input `boom` makes handle_input fail: one Lua callback failure of class `error`.
  'duel.lua': matchScript(
    'match_size = 2\nquick_play = true',
    `function handle_input(player_id, input, state)
  if input.boom then error("boom") end
  return state
end`,
  ),
});

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer(
    {
      metrics_port: 0,
      matchmaker_tick_ms: 50,
      game_modes: { duel: { match_size: 2, quick_play: true, chat_channels: ['lobby'] } },
      rate_limits: { register: { limit: 5, window: 60_000 } },
    },
    { gameDir: game.dir },
  );
});
afterAll(async () => {
  await s?.close();
  game.remove();
});

async function scrape(url = s.metricsUrl!): Promise<{ status: number; type: string | null; families: Map<string, Family> }> {
  const res = await fetch(url);
  const text = await res.text();
  return { status: res.status, type: res.headers.get('content-type'), families: parseExposition(text) };
}

function value(families: Map<string, Family>, name: string, labels: Record<string, string> = {}, sample = name): number {
  const family = families.get(name);
  if (!family) return 0;
  const hit = family.samples.find((x) => x.name === sample && Object.entries(labels).every(([k, v]) => x.labels[k] === v));
  return hit?.value ?? 0;
}

describe('the metrics listener', () => {
  it('listens on its own port on loopback and answers only GET /metrics', async () => {
    expect(s.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    expect(new URL(s.metricsUrl!).port).not.toBe(String(s.port));
    const base = s.metricsUrl!.replace(/\/metrics$/, '');
    for (const path of ['/', '/metrics/', '/api/v1/health', '/metricsx']) expect((await fetch(base + path)).status, path).toBe(404);
    expect((await fetch(s.metricsUrl!, { method: 'POST', body: '{}' })).status).toBe(404);
    // The API port does not serve metrics.
    expect((await fetch(`${s.url}/metrics`)).status).toBe(404);
    const first = await scrape();
    expect(first.status).toBe(200);
    expect(first.type).toMatch(/^text\/plain; version=0\.0\.4/);
  });

  it('counts HTTP requests by route template, never by raw path, with a duration histogram', async () => {
    const before = (await scrape()).families;
    const a = await connectPlayer(s, 'm');
    const ids = ['00000000-0000-7000-8000-000000000001', '00000000-0000-7000-8000-000000000002'];
    for (const id of ids) expect((await s.call('GET', `/api/v1/players/${id}`, { token: a.token })).status).toBe(404);
    expect((await s.call('GET', '/api/v1/no/such/route')).status).toBe(404);
    const after = (await scrape()).families;

    const route = { route: '/api/v1/players/:id', method: 'GET', status: '404' };
    expect(value(after, 'svc_http_requests_total', route) - value(before, 'svc_http_requests_total', route)).toBe(2);
    const register = { route: '/api/v1/auth/register', method: 'POST', status: '200' };
    expect(value(after, 'svc_http_requests_total', register) - value(before, 'svc_http_requests_total', register)).toBeGreaterThanOrEqual(1);
    const routes = after.get('svc_http_requests_total')!.samples.map((x) => x.labels.route!);
    for (const id of ids) expect(routes.some((r) => r.includes(id))).toBe(false);
    expect(routes.some((r) => r.includes('/no/such'))).toBe(false);
    const durations = { route: '/api/v1/players/:id', method: 'GET' };
    expect(value(after, 'svc_http_request_duration_seconds', durations, 'svc_http_request_duration_seconds_count')).toBeGreaterThanOrEqual(2);
    expect(value(after, 'svc_http_request_duration_seconds', { ...durations, le: '+Inf' }, 'svc_http_request_duration_seconds_bucket')).toBeGreaterThanOrEqual(2);
    a.socket.close();
  });

  it('counts frames in and out by type, sockets, chat deliveries, matches, ticks, Lua failures and refusals', async () => {
    const before = (await scrape()).families;
    const a = await connectPlayer(s, 'm');
    const b = await connectPlayer(s, 'm');
    const sockets = value((await scrape()).families, 'svc_ws_sessions');
    expect(sockets).toBeGreaterThanOrEqual(2);

    a.socket.send({ type: 'no.such.frame', payload: {} });
    a.socket.send({ type: 'another.unknown', payload: {} });
    await a.socket.next('error');
    await a.socket.next('error');

    for (const p of [a, b]) expect((await p.socket.request('chat.join', { channel_id: 'global:lobby' })).type).toBe('chat.joined');
    a.socket.send({ type: 'chat.send', payload: { channel_id: 'global:lobby', content: 'hello' } });
    await a.socket.next('chat.message');
    await b.socket.next('chat.message');

    await a.socket.request('matchmaker.add', { mode: 'duel' });
    await b.socket.request('matchmaker.add', { mode: 'duel' });
    await a.socket.next('match.matched');
    await b.socket.next('match.matched');
    await a.socket.next('match.state');
    a.socket.send({ type: 'match.input', payload: { boom: true } });

    // Registration past its bucket (5 per minute here) is refused in the `register` group.
    let refused = 0;
    for (let i = 0; i < 8; i++) if ((await s.call('POST', '/api/v1/auth/register', { body: { username: `x${i}`, password: 'short' } })).status === 429) refused++;
    expect(refused).toBeGreaterThan(0);

    let after = (await scrape()).families;
    for (let i = 0; i < 50 && value(after, 'svc_lua_callback_failures_total', { reason: 'error' }) <= value(before, 'svc_lua_callback_failures_total', { reason: 'error' }); i++) {
      await new Promise((r) => setTimeout(r, 50));
      after = (await scrape()).families;
    }
    const moved = (name: string, labels: Record<string, string> = {}, sample = name) => value(after, name, labels, sample) - value(before, name, labels, sample);

    expect(moved('svc_ws_frames_in_total', { type: 'session.connect' })).toBe(2);
    expect(moved('svc_ws_frames_in_total', { type: 'unknown' })).toBe(2);
    expect(after.get('svc_ws_frames_in_total')!.samples.some((x) => x.labels.type === 'no.such.frame')).toBe(false);
    expect(moved('svc_ws_frames_in_total', { type: 'chat.send' })).toBe(1);
    expect(moved('svc_ws_frames_in_total', { type: 'match.input' })).toBe(1);
    expect(moved('svc_ws_frames_out_total', { type: 'session.connected' })).toBe(2);
    expect(moved('svc_ws_frames_out_total', { type: 'error' })).toBeGreaterThanOrEqual(2);
    expect(moved('svc_ws_frames_out_total', { type: 'chat.message' })).toBe(2);
    expect(moved('svc_ws_frames_out_total', { type: 'match.state' })).toBeGreaterThanOrEqual(1);
    expect(moved('svc_chat_messages_delivered_total')).toBe(2);
    expect(value(after, 'svc_live_matches')).toBeGreaterThanOrEqual(1);
    expect(moved('svc_match_tick_lateness_seconds', {}, 'svc_match_tick_lateness_seconds_count')).toBeGreaterThanOrEqual(1);
    expect(moved('svc_matchmaker_wait_seconds', { mode: 'duel' }, 'svc_matchmaker_wait_seconds_count')).toBe(2);
    expect(value(after, 'svc_matchmaker_queue_depth', { mode: 'duel' })).toBe(0);
    expect(moved('svc_lua_callback_failures_total', { reason: 'error' })).toBeGreaterThanOrEqual(1);
    expect(moved('svc_rate_limit_refusals_total', { group: 'register' })).toBe(refused);
    expect(moved('svc_db_query_duration_seconds', {}, 'svc_db_query_duration_seconds_count')).toBeGreaterThan(0);
    expect(value(after, 'svc_db_pool_max')).toBeGreaterThanOrEqual(1);
    a.socket.close();
    b.socket.close();
  });

  it('exposes every metric docs/operations.md lists, with its type, and the process metrics', async () => {
    const { families } = await scrape();
    const listed = documentedMetrics();
    expect(listed.size).toBeGreaterThan(15);
    for (const [name, type] of listed) {
      expect(families.get(name)?.type, name).toBe(type);
      expect(name.startsWith('svc_'), name).toBe(true);
    }
    // Every svc_ family is documented.
    for (const name of families.keys()) if (name.startsWith('svc_')) expect(listed.has(name), `${name} is in docs/operations.md`).toBe(true);
    for (const name of PROCESS_METRICS) expect(families.has(name), name).toBe(true);
    // The process probe already samples the event loop: prom-client's own lag collector stays off.
    expect(families.has('nodejs_eventloop_lag_seconds')).toBe(false);
  });
});

describe('without metrics_port', () => {
  it('opens no listener', async () => {
    const before = listeningServers();
    const plain = await startTestServer({});
    try {
      expect(plain.metricsUrl).toBeNull();
      // One listening socket more, the API's; a node with metrics_port opens two.
      expect(listeningServers()).toBe(before + 1);
      expect((await fetch(`${plain.url}/metrics`)).status).toBe(404);
    } finally {
      await plain.close();
    }
    // A closed listener's handle goes away a loop turn after its 'close' event.
    await expect.poll(listeningServers).toBe(before);
    const metered = await startTestServer({ metrics_port: 0 });
    try {
      expect(listeningServers()).toBe(before + 2);
    } finally {
      await metered.close();
    }
  });

  it('closes its listener with the node', async () => {
    const node = await startTestServer({ metrics_port: 0 });
    const url = node.metricsUrl!;
    expect((await fetch(url)).status).toBe(200);
    await node.close();
    expect(await accepts(Number(new URL(url).port))).toBe(false);
  });
});

/** Whether something accepts TCP connections on the port of 127.0.0.1. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

/** Listening TCP sockets of this process. */
function listeningServers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'TCPServerWrap').length;
}
