import { hostname } from 'node:os';
import { monitorEventLoopDelay, performance, type EventLoopUtilization, type IntervalHistogram } from 'node:perf_hooks';
import type { NodeProbe, NodeSample } from '../../runtime/contracts/services';
import type { LiveHost } from '../realtime/live';

/** Event-loop figures describe the last complete window of this length (the first one until it completes). */
const WINDOW_MS = 10_000;
const NS_PER_MS = 1e6;

interface LoopWindow {
  p50: number;
  p99: number;
  max: number;
  utilization: number;
}

/**
 * The node's view of its own process for `/ops/stats`. Event-loop delay comes
 * from Node's sampling histogram (a timer every 10 ms, so figures under that
 * resolution read as about 10 ms) and is rotated every window, so an old
 * stall does not hide in a lifetime average; utilisation is measured over
 * the same window.
 */
export class ProcessProbe implements NodeProbe {
  readonly #delay: IntervalHistogram = monitorEventLoopDelay({ resolution: 10 });
  readonly #node = `${hostname()}:${process.pid}`;
  readonly #timer: ReturnType<typeof setInterval>;
  #since: EventLoopUtilization = performance.eventLoopUtilization();
  #last: LoopWindow | null = null;

  constructor(
    private readonly live: LiveHost,
    private readonly workers: number,
  ) {
    this.#delay.enable();
    this.#timer = setInterval(() => this.#rotate(), WINDOW_MS);
    this.#timer.unref();
  }

  sample(): NodeSample {
    const loop = this.#last ?? this.#current();
    const memory = process.memoryUsage();
    const live = this.#liveCounts();
    return {
      node: this.#node,
      uptime_ms: Math.round(process.uptime() * 1000),
      event_loop_lag_p50_ms: loop.p50,
      event_loop_lag_p99_ms: loop.p99,
      event_loop_lag_max_ms: loop.max,
      event_loop_utilization: loop.utilization,
      memory_rss: memory.rss,
      memory_heap_used: memory.heapUsed,
      memory_heap_total: memory.heapTotal,
      memory_external: memory.external,
      memory_array_buffers: memory.arrayBuffers,
      active_handles: process.getActiveResourcesInfo().length,
      script_workers: this.workers,
      ...live,
    };
  }

  close(): void {
    clearInterval(this.#timer);
    this.#delay.disable();
  }

  #current(): LoopWindow {
    const h = this.#delay;
    const ms = (ns: number) => Math.round((ns / NS_PER_MS) * 100) / 100;
    const utilization = performance.eventLoopUtilization(this.#since).utilization;
    if (h.count === 0) return { p50: 0, p99: 0, max: 0, utilization: round(utilization) };
    return { p50: ms(h.percentile(50)), p99: ms(h.percentile(99)), max: ms(h.max), utilization: round(utilization) };
  }

  #rotate(): void {
    this.#last = this.#current();
    this.#delay.reset();
    this.#since = performance.eventLoopUtilization();
  }

  /** Zero before the real-time services start (the first requests of a boot). */
  #liveCounts(): Pick<NodeSample, 'live_matches' | 'live_worlds' | 'sockets' | 'tick_lateness_p99_ms'> {
    try {
      return {
        live_matches: this.live.matches.size,
        live_worlds: this.live.worlds.size,
        sockets: this.live.gateway.sessions.size,
        tick_lateness_p99_ms: this.live.matches.lateness().p99,
      };
    } catch {
      return { live_matches: 0, live_worlds: 0, sockets: 0, tick_lateness_p99_ms: 0 };
    }
  }
}

function round(share: number): number {
  return Math.round(share * 1000) / 1000;
}
