import { PlayerName } from '../player-name';
import { useState } from 'preact/hooks';
import { count, time } from '../format';
import { navigate, useLocation } from '../router';
import { Link, ListView, Screen } from '../ui';

// A channel id is any text (`global:lobby`), so it travels in the query.
const channelLink = (id: string) => `/chat/channel?id=${encodeURIComponent(id)}`;

/** Channels running on this node, and a way to any channel's stored history. */
export function Chat() {
  const [id, setId] = useState('');
  return (
    <Screen title="Chat" subtitle="Channels running on this node, busiest first. Stored history of any channel opens by its id.">
      <form
        class="controls"
        onSubmit={(e) => {
          e.preventDefault();
          if (id.trim()) navigate(channelLink(id.trim()));
        }}
      >
        <label class="grow">
          Channel id
          <input name="channel" placeholder="global:lobby" value={id} onInput={(e) => setId((e.target as HTMLInputElement).value)} />
        </label>
        <button type="submit">Open history</button>
      </form>
      <ListView
        path="/api/v1/ops/chat/channels"
        search="Channel id"
        rowKey={(c) => c.channel_id}
        columns={[
          { label: 'Channel', sort: 'channel_id', cell: (c) => <Link to={channelLink(c.channel_id)}>{c.channel_id}</Link> },
          { label: 'Players joined', sort: 'members', numeric: true, cell: (c) => count(c.members) },
        ]}
        empty="No channel runs on this node."
      />
    </Screen>
  );
}

/** A channel's stored messages, newest first, filterable by sender. */
export function ChannelMessages() {
  const id = useLocation().query.get('id') ?? '';
  return (
    <Screen
      title={id}
      subtitle={
        <>
          <Link to="/chat">Chat</Link> / stored messages, newest first
        </>
      }
    >
      <ListView
        path="/api/v1/ops/chat/channels/{id}/messages"
        params={{ id }}
        search="Text"
        filters={[
          { key: 'sender_id', label: 'Sender', kind: 'id' },
          { key: 'channel_type', label: 'Type', kind: 'text' },
        ]}
        rowKey={(m) => m.id}
        columns={[
          { label: 'Sent', sort: 'sent_at', cell: (m) => time(m.sent_at) },
          { label: 'Sender', sort: 'sender_id', cell: (m) => <PlayerName id={m.sender_id} /> },
          { label: 'Type', sort: 'channel_type', cell: (m) => m.channel_type },
          { label: 'Message', cell: (m) => <span class="message">{m.content}</span> },
        ]}
        empty="No stored message matches."
      />
    </Screen>
  );
}
