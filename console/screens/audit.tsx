import { time } from '../format';
import { ListView, Screen } from '../ui';

export function AuditLog() {
  return (
    <Screen title="Audit log" subtitle="Every operator mutation, newest first. Unattested names were self-asserted.">
      <ListView
        path="/api/v1/ops/audit"
        search="Action, name or target"
        filters={[
          { key: 'action', label: 'Action', kind: 'text' },
          { key: 'actor_source', label: 'Source', kind: 'text', placeholder: 'console' },
          { key: 'outcome', label: 'Outcome', kind: 'text', placeholder: 'ok' },
          { key: 'target_id', label: 'Target', kind: 'text' },
        ]}
        rowKey={(a) => a.id}
        columns={[
          { label: 'When', sort: 'occurred_at', cell: (a) => time(a.occurred_at) },
          { label: 'Who', sort: 'actor_id', cell: (a) => <span title={a.actor_id}>{a.actor_display}{a.actor_attested ? '' : ' *'}</span> },
          { label: 'Via', cell: (a) => a.actor_source },
          { label: 'Action', sort: 'action', cell: (a) => <code>{a.action}</code> },
          { label: 'Target', cell: (a) => (a.target_id ? <code class="clip" title={a.target_id}>{a.target_id}</code> : '–') },
          { label: 'Outcome', sort: 'outcome', cell: (a) => <span class={`tag ${a.outcome}`}>{a.outcome}</span> },
          { label: 'Counts', cell: (a) => `${a.succeeded_count} ok / ${a.failed_count} failed` },
        ]}
        empty="No operator has changed anything yet."
      />
    </Screen>
  );
}
