import { PlayerName } from '../player-name';
import { count, time } from '../format';
import { useLocation } from '../router';
import { Link, ListView, Screen } from '../ui';

// A board id is any text, so it travels in the query, never as a path segment.
const boardLink = (id: string) => `/leaderboards/board?id=${encodeURIComponent(id)}`;

export function Leaderboards() {
  return (
    <Screen title="Leaderboards" subtitle="Boards held live on this node or stored, largest first.">
      <ListView
        path="/api/v1/ops/leaderboards"
        search="Board id"
        rowKey={(b) => b.board_id}
        columns={[
          { label: 'Board', sort: 'board_id', cell: (b) => <Link to={boardLink(b.board_id)}>{b.board_id}</Link> },
          { label: 'Entries', sort: 'entries', numeric: true, cell: (b) => count(b.entries) },
          { label: 'Top score', sort: 'top_score', numeric: true, cell: (b) => count(b.top_score) },
          { label: 'Updated', sort: 'updated_at', cell: (b) => time(b.updated_at) },
          { label: 'Live', cell: (b) => (b.live ? <span class="tag ok">live</span> : <span class="muted">stored</span>) },
        ]}
        empty="No board has an entry yet."
      />
    </Screen>
  );
}

/** A board's entries with their ranks on the whole board (not on the page). */
export function BoardEntries() {
  const id = useLocation().query.get('id') ?? '';
  return (
    <Screen
      title={id}
      subtitle={
        <>
          <Link to="/leaderboards">Leaderboards</Link> / entries, ranked on the whole board
        </>
      }
    >
      <ListView
        path="/api/v1/ops/leaderboards/{id}/entries"
        params={{ id }}
        rowKey={(e) => e.id}
        columns={[
          { label: 'Rank', numeric: true, cell: (e) => <strong>{count(e.rank)}</strong> },
          { label: 'Player', sort: 'player_id', cell: (e) => <PlayerName id={e.player_id} /> },
          { label: 'Score', sort: 'score', numeric: true, cell: (e) => count(e.score) },
          { label: 'Sub-score', sort: 'sub_score', numeric: true, cell: (e) => count(e.sub_score) },
          { label: 'Updated', sort: 'updated_at', cell: (e) => time(e.updated_at) },
        ]}
        empty="This board has no stored entries yet."
      />
    </Screen>
  );
}
