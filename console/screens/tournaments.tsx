import { count, time } from '../format';
import { Link, ListView, Screen } from '../ui';

export function Tournaments() {
  return (
    <Screen title="Tournaments" subtitle="Every tournament, whatever its status; live ones are carried by this node's clock.">
      <ListView
        path="/api/v1/ops/tournaments"
        search="Name"
        filters={[
          { key: 'status', label: 'Status', kind: 'text', placeholder: 'active' },
          { key: 'leaderboard_id', label: 'Board', kind: 'text' },
        ]}
        rowKey={(t) => t.id}
        columns={[
          { label: 'Name', sort: 'name', cell: (t) => t.name },
          { label: 'Status', sort: 'status', cell: (t) => <span class={`tag ${t.status}`}>{t.status}</span> },
          { label: 'Board', sort: 'leaderboard_id', cell: (t) => <Link to={`/leaderboards/board?id=${encodeURIComponent(t.leaderboard_id)}`}>{t.leaderboard_id}</Link> },
          { label: 'Starts', sort: 'start_at', cell: (t) => time(t.start_at) },
          { label: 'Ends', sort: 'end_at', cell: (t) => time(t.end_at) },
          { label: 'Max entries', numeric: true, cell: (t) => count(t.max_entries) },
          { label: 'Live', cell: (t) => (t.live ? <span class="tag ok">live</span> : <span class="muted">–</span>) },
        ]}
        empty="No tournament is declared."
      />
    </Screen>
  );
}
