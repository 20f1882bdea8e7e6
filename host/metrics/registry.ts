import { createRequire } from 'node:module';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { FailureKind } from '../../runtime/lua/host-interface';
import { RATE_LIMIT_GROUPS, type RateLimitGroup } from '../../runtime/contracts/settings';
import { clientFrames, serverPushes } from '../../runtime/schemas/wire';
import type { NodeProbe } from '../../runtime/contracts/services';
import type { MatchmakerSample } from '../../runtime/contracts/live';
import type { PoolUse } from '../infra/database';

/** Why the datagram plane dropped a datagram (docs/datagrams.md): every drop is silent on the wire and counted here. */
export const DATAGRAM_DROPS = [
  'malformed',
  'budget',
  'unknown_conn',
  'conn_budget',
  'mac',
  'replay',
  'challenge',
  'rebind_limit',
  'input_budget',
  'input_malformed',
  'input_unrouted',
  'send_failed',
] as const;
export type DatagramDrop = (typeof DATAGRAM_DROPS)[number];

/** A count a hot path bumps in place; folded into its counter when scraped. */
export interface Tally {
  n: number;
}

/**
 * What the hot paths call. Frames, chat deliveries, Lua failures and
 * rate-limit refusals are plain number increments on cells resolved ahead of
 * time, so a frame costs no allocation; prom-client sees them only at scrape.
 */
export interface MetricHooks {
  /** One answered HTTP request; `route` is the matched template, undefined when none matched. */
  httpServed(route: string | undefined, method: string, status: number, seconds: number): void;
  /** One inbound WebSocket message, by its `type` (types no client frame declares count as `unknown`). */
  frameIn(type: string): void;
  /** The cell counting outbound frames of this type (undeclared types share `other`); add one per socket written. */
  frameOut(type: string): Tally;
  /** The same for a frame already encoded: the type is read from its leading `{"type":"…"`. */
  frameOutOf(text: string): Tally;
  tickLateness(ms: number): void;
  /** A match tick its lane did not run because the match had taken more than its share of the lane. */
  tickThrottled(mode: string): void;
  /** A matchmaker ticket grouped into a match after waiting this long. */
  matchmakerMatched(mode: string, waitedMs: number): void;
  /** Chat messages written to sockets. */
  readonly chatDelivered: Tally;
  luaFailure(kind: FailureKind, count: number): void;
  rateRefused(group: RateLimitGroup): void;
  dbStatement(seconds: number): void;
  /** Datagrams that reached the plane's port. */
  readonly datagramsIn: Tally;
  /** Datagrams the plane wrote: poses, one per subscriber, and the replies to `hello` and `ping`. */
  readonly datagramsOut: Tally;
  /** Pose values written as the nearest int16 end because their scale was too fine for them. */
  readonly poseSaturated: Tally;
  datagramDropped(reason: DatagramDrop): void;
}

const DISCARDED: Tally = { n: 0 };

/** A node without `metrics_port`: every hook does nothing, so the hot paths need no branch. */
export const NO_METRICS: MetricHooks = {
  httpServed() {},
  frameIn() {},
  frameOut: () => DISCARDED,
  frameOutOf: () => DISCARDED,
  tickLateness() {},
  tickThrottled() {},
  matchmakerMatched() {},
  chatDelivered: DISCARDED,
  luaFailure() {},
  rateRefused() {},
  dbStatement() {},
  datagramsIn: DISCARDED,
  datagramsOut: DISCARDED,
  poseSaturated: DISCARDED,
  datagramDropped() {},
};

/** The gauges' sources, read at scrape time only. */
export interface MetricSources {
  sockets(): number;
  liveMatches(): number;
  liveWorlds(): number;
  matchmaker(): Record<string, MatchmakerSample>;
  pool(): PoolUse | null;
  probe: NodeProbe;
  /** Live datagram bindings (minted, bound or not); 0 with the plane off. */
  datagramBindings(): number;
}

const HTTP_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const FAILURE_KINDS: readonly FailureKind[] = ['error', 'malformed', 'timeout', 'heap_exhausted', 'instructions_exhausted'];
const SERVER_FRAME_PREFIX = '{"type":"';

/**
 * Node's own process collectors from prom-client, minus two: event-loop lag,
 * which the process probe behind `/ops/stats` already samples (its figures
 * are exported below instead of a second histogram), and GC durations, whose
 * collector installs a process-wide observer per registry that nothing can
 * disconnect (every host in a test process would add one). prom-client's
 * `collectDefaultMetrics` takes no exclusion list, so the collectors are
 * loaded one by one.
 */
const PROCESS_COLLECTORS = [
  'processCpuTotal',
  'processStartTime',
  'osMemoryHeap',
  'processOpenFileDescriptors',
  'processMaxFileDescriptors',
  'processResources',
  'processHandles',
  'processRequests',
  'heapSizeAndUsed',
  'heapSpacesSizeAndUsed',
  'version',
] as const;
type Collector = (registry: Registry, config: Record<string, unknown>) => void;
const requireCollector = createRequire(import.meta.url);

/**
 * One node's metrics: a registry of its own (tests run several hosts in one
 * process, and prom-client's default registry would mix them), the hooks the
 * hot paths call, and the gauges read from the live services when scraped.
 */
export class NodeMetrics implements MetricHooks {
  readonly registry = new Registry();
  readonly chatDelivered: Tally = { n: 0 };
  readonly datagramsIn: Tally = { n: 0 };
  readonly datagramsOut: Tally = { n: 0 };
  readonly poseSaturated: Tally = { n: 0 };
  readonly #dropped = new Map<DatagramDrop, Tally>(DATAGRAM_DROPS.map((r) => [r, { n: 0 }]));
  readonly #in = new Map<string, Tally>();
  readonly #unknownIn: Tally = { n: 0 };
  readonly #out = new Map<string, Tally>();
  readonly #otherOut: Tally = { n: 0 };
  readonly #lua = new Map<FailureKind, Tally>(FAILURE_KINDS.map((k) => [k, { n: 0 }]));
  readonly #refused = new Map<RateLimitGroup, Tally>(RATE_LIMIT_GROUPS.map((g) => [g, { n: 0 }]));
  readonly #requests: Counter<'route' | 'method' | 'status'>;
  readonly #duration: Histogram<'route' | 'method'>;
  readonly #lateness: Histogram;
  readonly #throttled: Counter<'mode'>;
  readonly #waited: Histogram<'mode'>;
  readonly #statements: Histogram;

  constructor(sources: MetricSources) {
    const registers = [this.registry];
    for (const frame of clientFrames) {
      this.#in.set(frame.type, { n: 0 });
      if (frame.reply) this.#out.set(frame.reply.type, { n: 0 });
    }
    for (const push of serverPushes) this.#out.set(push.type, { n: 0 });
    for (const type of ['error', 'rpc.error', 'module.message']) this.#out.set(type, { n: 0 });

    this.#requests = new Counter({
      name: 'svc_http_requests_total',
      help: 'HTTP requests answered, by route template, method and status.',
      labelNames: ['route', 'method', 'status'],
      registers,
    });
    this.#duration = new Histogram({
      name: 'svc_http_request_duration_seconds',
      help: 'Time from a request arriving to its answer being handed to the socket, by route template and method.',
      labelNames: ['route', 'method'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    new Gauge({
      name: 'svc_ws_sessions',
      help: 'Open WebSocket connections.',
      registers,
      collect() {
        this.set(sources.sockets());
      },
    });
    const tallies = (metric: Counter<string>, label: string, cells: Iterable<[string, Tally]>) => {
      metric.reset();
      for (const [value, cell] of cells) if (cell.n > 0) metric.inc({ [label]: value }, cell.n);
    };
    const framesIn = this.#in;
    const unknownIn = this.#unknownIn;
    new Counter({
      name: 'svc_ws_frames_in_total',
      help: 'WebSocket messages received, by frame type; undeclared types count as "unknown".',
      labelNames: ['type'],
      registers,
      collect() {
        tallies(this, 'type', [...framesIn, ['unknown', unknownIn]]);
      },
    });
    const framesOut = this.#out;
    const otherOut = this.#otherOut;
    new Counter({
      name: 'svc_ws_frames_out_total',
      help: 'WebSocket frames written to sockets, by frame type; script-named broadcasts count as "other".',
      labelNames: ['type'],
      registers,
      collect() {
        tallies(this, 'type', [...framesOut, ['other', otherOut]]);
      },
    });
    new Gauge({
      name: 'svc_live_matches',
      help: 'Matches running on this node.',
      registers,
      collect() {
        this.set(sources.liveMatches());
      },
    });
    new Gauge({
      name: 'svc_live_worlds',
      help: 'Worlds running on this node.',
      registers,
      collect() {
        this.set(sources.liveWorlds());
      },
    });
    this.#lateness = new Histogram({
      name: 'svc_match_tick_lateness_seconds',
      help: 'How late match ticks ran after they were due; a skipped tick counts as one whole period (0.1 s).',
      buckets: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1],
      registers,
    });
    this.#throttled = new Counter({
      name: 'svc_match_ticks_throttled_total',
      help: 'Match ticks not run because their match had taken more than its share of its script lane, by mode.',
      labelNames: ['mode'],
      registers,
    });
    new Gauge({
      name: 'svc_matchmaker_queue_depth',
      help: 'Tickets waiting per mode, from the sample the matchmaker publishes every tick.',
      labelNames: ['mode'],
      registers,
      collect() {
        this.reset();
        for (const [mode, sample] of Object.entries(sources.matchmaker())) this.set({ mode }, sample.waiting);
      },
    });
    new Gauge({
      name: 'svc_matchmaker_oldest_wait_seconds',
      help: 'Wait of the oldest ticket per mode, from the same sample.',
      labelNames: ['mode'],
      registers,
      collect() {
        this.reset();
        for (const [mode, sample] of Object.entries(sources.matchmaker())) this.set({ mode }, sample.oldest_wait_ms / 1000);
      },
    });
    this.#waited = new Histogram({
      name: 'svc_matchmaker_wait_seconds',
      help: 'How long tickets waited before the matchmaker grouped them into a match, per mode.',
      labelNames: ['mode'],
      buckets: [0.5, 1, 2, 5, 10, 20, 30, 60, 120],
      registers,
    });
    const chat = this.chatDelivered;
    new Counter({
      name: 'svc_chat_messages_delivered_total',
      help: 'Chat messages written to sockets (one per recipient socket).',
      registers,
      collect() {
        this.reset();
        this.inc(chat.n);
      },
    });
    const pool = (pick: (use: PoolUse) => number) =>
      function (this: Gauge) {
        const use = sources.pool();
        this.set(use ? pick(use) : 0);
      };
    new Gauge({ name: 'svc_db_pool_max', help: 'Connections the database pool may open.', registers, collect: pool((u) => u.max) });
    new Gauge({ name: 'svc_db_pool_connections', help: 'Connections the database pool holds open.', registers, collect: pool((u) => u.open) });
    new Gauge({ name: 'svc_db_pool_idle', help: 'Open connections not checked out.', registers, collect: pool((u) => u.idle) });
    new Gauge({ name: 'svc_db_pool_waiting', help: 'Checkouts waiting for a free connection.', registers, collect: pool((u) => u.waiting) });
    this.#statements = new Histogram({
      name: 'svc_db_query_duration_seconds',
      help: 'Time of one SQL statement, from being sent to its answer (or failure).',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
      registers,
    });
    const lua = this.#lua;
    new Counter({
      name: 'svc_lua_callback_failures_total',
      help: 'Failed Lua callbacks (every one, including those the log rate limit leaves out), by reason class.',
      labelNames: ['reason'],
      registers,
      collect() {
        tallies(this, 'reason', lua);
      },
    });
    const refused = this.#refused;
    new Counter({
      name: 'svc_rate_limit_refusals_total',
      help: 'Requests, frames and actions the node rate limiter refused, by group.',
      labelNames: ['group'],
      registers,
      collect() {
        tallies(this, 'group', refused);
      },
    });
    const total = (name: string, help: string, cell: Tally) =>
      new Counter({
        name,
        help,
        registers,
        collect() {
          this.reset();
          this.inc(cell.n);
        },
      });
    total('svc_datagrams_received_total', 'Datagrams that reached the datagram plane\'s UDP port.', this.datagramsIn);
    total('svc_datagrams_sent_total', 'Datagrams the plane wrote: poses (one per subscriber) and the hello_ok and pong replies.', this.datagramsOut);
    total('svc_datagram_pose_saturated_total', 'Pose field values written as the nearest int16 end: the field\'s scale is too fine for the world.', this.poseSaturated);
    const dropped = this.#dropped;
    new Counter({
      name: 'svc_datagrams_dropped_total',
      help: 'Datagrams the plane dropped without an answer, by reason.',
      labelNames: ['reason'],
      registers,
      collect() {
        tallies(this, 'reason', dropped);
      },
    });
    new Gauge({
      name: 'svc_datagram_bindings',
      help: 'Live datagram bindings on this node, minted or bound.',
      registers,
      collect() {
        this.set(sources.datagramBindings());
      },
    });
    const loop = (pick: (sample: ReturnType<NodeProbe['sample']>) => number) =>
      function (this: Gauge) {
        this.set(pick(sources.probe.sample()));
      };
    new Gauge({
      name: 'svc_event_loop_lag_p50_seconds',
      help: 'Event-loop delay, median over the last complete 10 s window (the /ops/stats probe).',
      registers,
      collect: loop((s) => s.event_loop_lag_p50_ms / 1000),
    });
    new Gauge({ name: 'svc_event_loop_lag_p99_seconds', help: 'Event-loop delay, 99th percentile over the same window.', registers, collect: loop((s) => s.event_loop_lag_p99_ms / 1000) });
    new Gauge({ name: 'svc_event_loop_lag_max_seconds', help: 'Event-loop delay, maximum over the same window.', registers, collect: loop((s) => s.event_loop_lag_max_ms / 1000) });
    new Gauge({ name: 'svc_event_loop_utilization', help: 'Share of the same window the event loop was busy (0-1).', registers, collect: loop((s) => s.event_loop_utilization) });

    for (const name of PROCESS_COLLECTORS) {
      (requireCollector(`prom-client/lib/metrics/${name}`) as Collector)(this.registry, {});
    }
  }

  httpServed(route: string | undefined, method: string, status: number, seconds: number): void {
    const m = HTTP_METHODS.has(method) ? method : 'other';
    const r = route ?? '(none)';
    this.#requests.inc({ route: r, method: m, status });
    this.#duration.observe({ route: r, method: m }, seconds);
  }

  frameIn(type: string): void {
    (this.#in.get(type) ?? this.#unknownIn).n++;
  }

  frameOut(type: string): Tally {
    return this.#out.get(type) ?? this.#otherOut;
  }

  frameOutOf(text: string): Tally {
    if (!text.startsWith(SERVER_FRAME_PREFIX)) return this.#otherOut;
    const end = text.indexOf('"', SERVER_FRAME_PREFIX.length);
    return end < 0 ? this.#otherOut : this.frameOut(text.slice(SERVER_FRAME_PREFIX.length, end));
  }

  tickLateness(ms: number): void {
    this.#lateness.observe(ms > 0 ? ms / 1000 : 0);
  }

  tickThrottled(mode: string): void {
    this.#throttled.inc({ mode });
  }

  matchmakerMatched(mode: string, waitedMs: number): void {
    this.#waited.observe({ mode }, Math.max(0, waitedMs) / 1000);
  }

  luaFailure(kind: FailureKind, count: number): void {
    const cell = this.#lua.get(kind);
    if (cell) cell.n += count;
  }

  rateRefused(group: RateLimitGroup): void {
    const cell = this.#refused.get(group);
    if (cell) cell.n++;
  }

  dbStatement(seconds: number): void {
    this.#statements.observe(seconds);
  }

  datagramDropped(reason: DatagramDrop): void {
    this.#dropped.get(reason)!.n++;
  }

  /** The exposition text (Prometheus text format 0.0.4). */
  scrape(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
