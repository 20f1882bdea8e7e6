import { api } from '../api';
import { count, ms, shortId, time } from '../format';
import { useLoad } from '../load';
import { Figure, ListView, Screen } from '../ui';

/** What runs on this node now, and the stored records of finished matches. */
export function Matches() {
  const live = useLoad('stats', () => api.get('/api/v1/ops/stats'), { everyMs: 5000 });
  const s = live.data?.data;
  return (
    <Screen title="Matches" subtitle="Live figures of this node, then finished match records.">
      <div class="figures">
        <Figure label="Live matches" value={count(s?.live_matches)} testId="live-matches" />
        <Figure label="Live worlds" value={count(s?.live_worlds)} />
        <Figure label="Tick lateness p99" value={ms(s?.tick_lateness_p99_ms)} />
      </div>
      <h2>Records</h2>
      <ListView
        path="/api/v1/ops/matches"
        search="Mode"
        filters={[
          { key: 'mode', label: 'Mode', kind: 'text' },
          { key: 'status', label: 'Status', kind: 'text', placeholder: 'finished' },
        ]}
        rowKey={(m) => m.id}
        columns={[
          { label: 'Id', sort: 'id', cell: (m) => <code title={m.id}>{shortId(m.id)}</code> },
          { label: 'Mode', sort: 'mode', cell: (m) => m.mode },
          { label: 'Status', sort: 'status', cell: (m) => <span class={`tag ${m.status}`}>{m.status}</span> },
          { label: 'Started', sort: 'started_at', cell: (m) => time(m.started_at) },
          { label: 'Finished', sort: 'finished_at', cell: (m) => time(m.finished_at) },
          { label: 'Result', cell: (m) => <code class="clip">{JSON.stringify(m.result)}</code> },
        ]}
        empty="No match has finished yet."
      />
    </Screen>
  );
}
