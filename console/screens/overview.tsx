import { api, type Data, type Row } from '../api';
import { Chart } from '../chart';
import { bytes, count, ms } from '../format';
import { useLoad, type Loaded } from '../load';
import { Failure, Figure, Screen } from '../ui';

type Features = Data<'/api/v1/ops/features'>;
type Stats = Data<'/api/v1/ops/stats'>;
type ModeRow = Row<'/api/v1/ops/matchmaker'>;

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

/** One sample: the node's figures, with the charts' history grown by them. */
async function sample(): Promise<Stats> {
  const [s, mm] = await Promise.all([api.get('/api/v1/ops/stats'), api.get('/api/v1/ops/matchmaker', { query: { limit: '200' } })]);
  history = push(history, s.data, mm.data);
  return s.data;
}

/**
 * Node figures and features (the app's one read of them), with live charts
 * refreshed every few seconds from `/ops/stats` and `/ops/matchmaker`.
 */
export function Overview(props: { features: Loaded<Features> }) {
  const live = useLoad('overview', sample, { everyMs: EVERY_MS });
  const stats = live.data;
  const features = props.features.data;
  const series = history;

  return (
    <Screen title="Overview" subtitle={stats ? <>Node <code>{stats.node}</code>, up {ms(stats.uptime_ms)}; refreshed every {EVERY_MS / 1000} s</> : 'Loading node figures…'}>
      <Failure error={live.error ?? props.features.error} />
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
