import { count, ms } from '../format';
import { Figure, ListView, Screen } from '../ui';

/** The matchmaker's last published sample, per mode; no tickets or players are shown. */
export function Matchmaker() {
  return (
    <Screen title="Matchmaker" subtitle="Queue depth and waits per mode, refreshed every 3 s.">
      <ListView
        path="/api/v1/ops/matchmaker"
        everyMs={3000}
        rowKey={(r) => r.mode}
        header={({ queue: q }) => (
          <div class="figures">
            <Figure label="Waiting" value={count(q.waiting)} testId="mm-waiting" />
            <Figure label="Modes" value={count(q.modes)} />
            <Figure label="Sample age" value={q.sampled_at === null ? 'no sample yet' : ms(q.age_ms)} />
          </div>
        )}
        columns={[
          { label: 'Mode', sort: 'mode', cell: (r) => r.mode },
          { label: 'Waiting', sort: 'waiting', numeric: true, cell: (r) => count(r.waiting) },
          { label: 'Oldest wait', sort: 'oldest_wait_ms', numeric: true, cell: (r) => ms(r.oldest_wait_ms) },
          { label: 'Average wait', sort: 'average_wait_ms', numeric: true, cell: (r) => ms(r.average_wait_ms) },
        ]}
        empty="Nobody is queued."
      />
    </Screen>
  );
}
