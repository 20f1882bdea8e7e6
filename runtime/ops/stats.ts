import type { Ctx } from '../contracts/context';
import type { NodeSample } from '../contracts/services';
import type { OpsStats } from '../schemas/ops';

/**
 * `GET /ops/stats`: one node's health, as Node measures it. The reference
 * names its fields after another runtime's internals (process counts, run
 * queues, memory pools); docs/operator-api.md maps each to the Node figure that answers
 * the same question here, and leaves out the ones with no honest counterpart.
 */

export function nodeStats(ctx: Pick<Ctx, 'probe' | 'live'>): OpsStats {
  const sample = ctx.probe?.sample() ?? null;
  return {
    ...(sample ?? UNMEASURED),
    online_players: onlinePlayers(ctx),
    matchmaker_waiting: matchmakerWaiting(ctx),
  };
}

/** An embedding host that keeps no probe answers the figures it cannot know as null. */
const UNMEASURED: { [K in keyof NodeSample]: K extends 'node' ? string : null } = {
  node: 'unknown',
  uptime_ms: null,
  event_loop_lag_p50_ms: null,
  event_loop_lag_p99_ms: null,
  event_loop_lag_max_ms: null,
  event_loop_utilization: null,
  memory_rss: null,
  memory_heap_used: null,
  memory_heap_total: null,
  memory_external: null,
  memory_array_buffers: null,
  active_handles: null,
  script_workers: null,
  live_matches: null,
  live_worlds: null,
  sockets: null,
  tick_lateness_p99_ms: null,
};

/** Players with a live socket anywhere in the fleet; null when presence is not running or out of touch (the reference's "presence unavailable"). */
function onlinePlayers(ctx: Pick<Ctx, 'live'>): number | null {
  try {
    return ctx.live.presence.onlineCount();
  } catch {
    return null;
  }
}

/** Tickets waiting across modes, from the matchmaker's last published sample (never the queue itself). */
function matchmakerWaiting(ctx: Pick<Ctx, 'live'>): number | null {
  try {
    return Object.values(ctx.live.matchmaker.samples()).reduce((sum, mode) => sum + mode.waiting, 0);
  } catch {
    return null;
  }
}
