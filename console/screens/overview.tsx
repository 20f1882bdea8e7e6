import { useEffect, useState } from 'preact/hooks';
import { ops, type ApiFailure, type Page } from '../api';
import { Chart } from '../chart';
import { bytes, count, ms } from '../format';
import { Failure, Figure, Screen } from '../ui';

export interface Component {
  name: string;
  version: string;
  capabilities: { name: string; enabled: boolean }[];
}
export interface Features {
  core: Component;
  extensions: Component[];
}

interface Stats {
  node: string;
  online_players: number | null;
  uptime_ms: number | null;
  event_loop_lag_p99_ms: number | null;
  event_loop_utilization: number | null;
  memory_rss: number | null;
  memory_heap_used: number | null;
  script_workers: number | null;
  live_matches: number | null;
  live_worlds: number | null;
  sockets: number | null;
  tick_lateness_p99_ms: number | null;
  matchmaker_waiting: number | null;
}

interface ModeRow {
  mode: string;
  waiting: number;
  oldest_wait_ms: number;
  average_wait_ms: number;
}

/** Samples kept per chart: ten minutes at the refresh interval. */
const KEEP = 200;
const EVERY_MS = 3000;

interface Series {
  t: number[];
  online: (number | null)[];
  matches: (number | null)[];
  worlds: (number | null)[];
  lateness: (number | null)[];
  depth: (number | null)[];
  oldest: (number | null)[];
}

const empty = (): Series => ({ t: [], online: [], matches: [], worlds: [], lateness: [], depth: [], oldest: [] });
// Kept across visits to other screens, so coming back shows the history so far.
let history: Series = empty();

function push(s: Series, stats: Stats, modes: ModeRow[]): Series {
  const keep = <T,>(list: T[], value: T) => [...list, value].slice(-KEEP);
  const oldest = modes.reduce((m, r) => Math.max(m, r.oldest_wait_ms), 0);
  return {
    t: keep(s.t, Date.now() / 1000),
    online: keep(s.online, stats.online_players),
    matches: keep(s.matches, stats.live_matches),
    worlds: keep(s.worlds, stats.live_worlds),
    lateness: keep(s.lateness, stats.tick_lateness_p99_ms),
    depth: keep(s.depth, stats.matchmaker_waiting),
    oldest: keep(s.oldest, modes.length ? oldest / 1000 : 0),
  };
}

/** Node figures and features, with live charts refreshed every few seconds from `/ops/stats` and `/ops/matchmaker`. */
export function Overview() {
  const [stats, setStats] = useState<Stats | null>(null);
  const [features, setFeatures] = useState<Features | null>(null);
  const [series, setSeries] = useState<Series>(history);
  const [error, setError] = useState<ApiFailure | null>(null);

  useEffect(() => {
    let stopped = false;
    const sample = async () => {
      try {
        const [s, mm] = await Promise.all([ops<{ data: Stats }>('/stats'), ops<Page<ModeRow>>('/matchmaker?limit=200')]);
        if (stopped) return;
        history = push(history, s.data, mm.data);
        setStats(s.data);
        setSeries(history);
        setError(null);
      } catch (err) {
        if (!stopped) setError(err as ApiFailure);
      }
    };
    void sample();
    ops<{ data: Features }>('/features').then((f) => !stopped && setFeatures(f.data), (err) => !stopped && setError(err as ApiFailure));
    const timer = setInterval(sample, EVERY_MS);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, []);

  return (
    <Screen title="Overview" subtitle={stats ? <>Node <code>{stats.node}</code>, up {ms(stats.uptime_ms)}; refreshed every {EVERY_MS / 1000} s</> : 'Loading node figures…'}>
      <Failure error={error} />
      <div class="figures">
        <Figure label="Online players" value={count(stats?.online_players)} testId="figure-online" />
        <Figure label="Live matches" value={count(stats?.live_matches)} />
        <Figure label="Live worlds" value={count(stats?.live_worlds)} />
        <Figure label="Sockets" value={count(stats?.sockets)} />
        <Figure label="Matchmaker waiting" value={count(stats?.matchmaker_waiting)} />
        <Figure label="Tick lateness p99" value={ms(stats?.tick_lateness_p99_ms)} />
        <Figure label="Event-loop lag p99" value={ms(stats?.event_loop_lag_p99_ms)} />
        <Figure label="Memory (RSS)" value={bytes(stats?.memory_rss)} hint={stats ? `heap ${bytes(stats.memory_heap_used)}` : undefined} />
      </div>
      <div class="charts">
        <Chart title="Online players" testId="chart-online" lines={[{ label: 'online', color: '#2f7de1' }]} data={[series.t, series.online]} />
        <Chart
          title="Live matches and worlds"
          lines={[
            { label: 'matches', color: '#d9822b' },
            { label: 'worlds', color: '#8e5bd6' },
          ]}
          data={[series.t, series.matches, series.worlds]}
        />
        <Chart title="Tick lateness p99 (ms)" lines={[{ label: 'p99', color: '#d64545', format: (v) => ms(v) }]} data={[series.t, series.lateness]} />
        <Chart
          title="Matchmaker depth and oldest wait (s)"
          lines={[
            { label: 'waiting', color: '#1f9d6b' },
            { label: 'oldest wait s', color: '#6b7a90' },
          ]}
          data={[series.t, series.depth, series.oldest]}
        />
      </div>
      {features ? <FeatureList features={features} /> : null}
    </Screen>
  );
}

function FeatureList({ features }: { features: Features }) {
  return (
    <div class="features" data-testid="features">
      <h2>
        {features.core.name} <span class="muted">{features.core.version}</span>
      </h2>
      <ul class="chips">
        {features.core.capabilities.map((c) => (
          <li class={c.enabled ? 'chip on' : 'chip off'} title={c.enabled ? 'on' : 'off'}>
            {c.name}
          </li>
        ))}
      </ul>
      <h2>Extensions</h2>
      {features.extensions.length === 0 ? <p class="muted">None installed.</p> : null}
      {features.extensions.map((e) => (
        <p>
          <strong>{e.name}</strong> <span class="muted">{e.version}</span> — {e.capabilities.map((c) => c.name).join(', ')}
        </p>
      ))}
    </div>
  );
}
