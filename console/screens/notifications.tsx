import { PlayerName } from '../player-name';
import { time } from '../format';
import { ListView, Screen } from '../ui';

export function Notifications() {
  return (
    <Screen title="Notifications" subtitle="Stored notifications of every player, newest first.">
      <ListView
        path="/api/v1/ops/notifications"
        search="Subject"
        filters={[
          { key: 'player_id', label: 'Player', kind: 'id' },
          { key: 'type', label: 'Type', kind: 'text' },
          { key: 'read', label: 'Read', kind: 'boolean' },
        ]}
        rowKey={(n) => n.id}
        columns={[
          { label: 'Sent', sort: 'sent_at', cell: (n) => time(n.sent_at) },
          { label: 'Player', sort: 'player_id', cell: (n) => <PlayerName id={n.player_id} /> },
          { label: 'Type', sort: 'type', cell: (n) => n.type },
          { label: 'Subject', sort: 'subject', cell: (n) => n.subject },
          { label: 'Read', sort: 'read', cell: (n) => (n.read ? 'yes' : <strong>no</strong>) },
        ]}
        empty="No notification matches."
      />
    </Screen>
  );
}
