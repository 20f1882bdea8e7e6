import { ops } from '../api';
import { count, ms, shortId, time } from '../format';
import { useLoad } from '../load';
import { Figure, ListView, Screen } from '../ui';

interface MatchRecord {
  id: string;
  mode: string;
  status: string;
  result: unknown;
  started_at: string | null;
  finished_at: string | null;
  inserted_at: string;
}

/** What runs on this node now, and the stored records of finished matches. */
export function Matches() {
  const live = useLoad('stats', () => ops<{ data: { live_matches: number | null; live_worlds: number | null; tick_lateness_p99_ms: number | null } }>('/stats'), { everyMs: 5000 });
  const s = live.data?.data;
  return (
    <Screen title="Matches" subtitle="Live figures of this node, then finished match records.">
      <div class="figures">
        <Figure label="Live matches" value={count(s?.live_matches)} testId="live-matches" />
        <Figure label="Live worlds" value={count(s?.live_worlds)} />
        <Figure label="Tick lateness p99" value={ms(s?.tick_lateness_p99_ms)} />
      </div>
      <h2>Records</h2>
      <ListView<MatchRecord>
        path="/matches"
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
