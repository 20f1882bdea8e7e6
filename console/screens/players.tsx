import { useState } from 'preact/hooks';
import { api, failed, type Data, type Failed } from '../api';
import { count, shortId, time } from '../format';
import { useLoad } from '../load';
import { navigate, useLocation } from '../router';
import { Failure, Figure, Link, ListView, Screen } from '../ui';

type Player = Data<'/api/v1/ops/players/{id}'>;

export function PlayerList() {
  const erased = useLocation().query.get('erased');
  return (
    <Screen title="Players" subtitle="Search by username or display name; guests are unclaimed guest accounts.">
      {erased ? (
        <p class="notice ok" role="status">
          Erased <strong>{erased}</strong>.
        </p>
      ) : null}
      <ListView
        path="/api/v1/ops/players"
        search="Username or display name"
        filters={[{ key: 'guest', label: 'Guest', kind: 'boolean' }]}
        rowKey={(p) => p.id}
        columns={[
          { label: 'Username', sort: 'username', cell: (p) => <Link to={`/players/${p.id}`}>{p.username}</Link> },
          { label: 'Display name', sort: 'display_name', cell: (p) => p.display_name ?? <span class="muted">–</span> },
          { label: 'Id', sort: 'id', cell: (p) => <code title={p.id}>{shortId(p.id)}</code> },
          { label: 'Joined', sort: 'inserted_at', cell: (p) => time(p.inserted_at) },
          { label: 'Updated', sort: 'updated_at', cell: (p) => time(p.updated_at) },
        ]}
        empty="No player matches."
      />
    </Screen>
  );
}

/**
 * One player: profile and a summary of what is held about them, from the
 * light summary route; the full export is read only when asked for.
 */
export function PlayerPage(props: { id: string; canErase: boolean }) {
  const path = { id: props.id };
  const player = useLoad(`player:${props.id}`, () => api.get('/api/v1/ops/players/{id}', { path }));
  const held = useLoad(`summary:${props.id}`, () => api.get('/api/v1/ops/players/{id}/summary', { path }));
  const [erasing, setErasing] = useState(false);
  const [exporting, setExporting] = useState(false);
  const [exportError, setExportError] = useState<Failed | null>(null);
  const p = player.data?.data ?? null;
  const sum = held.data?.data ?? null;

  const download = async () => {
    setExporting(true);
    setExportError(null);
    try {
      const exp = (await api.get('/api/v1/ops/players/{id}/export', { path })).data;
      const blob = new Blob([JSON.stringify(exp, null, 2)], { type: 'application/json' });
      const url = URL.createObjectURL(blob);
      const a = document.createElement('a');
      a.href = url;
      a.download = `player-${props.id}.json`;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (err) {
      setExportError(failed(err));
    } finally {
      setExporting(false);
    }
  };

  return (
    <Screen
      title={p ? (p.display_name ?? p.username) : 'Player'}
      subtitle={
        <>
          <Link to="/players">Players</Link> / <code>{props.id}</code>
        </>
      }
      actions={
        <>
          <button type="button" onClick={download} disabled={exporting}>
            Export JSON
          </button>
          {props.canErase && p ? (
            <button type="button" class="danger" onClick={() => setErasing(true)}>
              Erase…
            </button>
          ) : null}
        </>
      }
    >
      <Failure error={player.error ?? held.error ?? exportError} />
      {p ? (
        <div class="figures">
          <Figure label="Username" value={p.username} testId="player-username" />
          <Figure label="Joined" value={time(p.inserted_at)} />
          <Figure label="Providers" value={sum ? sum.providers.join(', ') || 'none' : '–'} testId="player-providers" />
          <Figure label="Friends" value={count(sum?.friends)} />
          <Figure label="Groups" value={count(sum?.groups)} />
          <Figure label="Saves" value={count(sum?.saves.length)} hint={sum ? `${count(sum.storage.objects)} storage objects` : undefined} />
          <Figure label="Games" value={sum?.stats ? `${count(sum.stats.games_played)} (${count(sum.stats.wins)} won)` : '–'} testId="player-games" />
        </div>
      ) : null}
      {sum ? (
        <div class="columns">
          <Panel title="Wallets">
            <SmallTable rows={sum.wallets} empty="No wallet." columns={[['Currency', (r) => r.currency], ['Balance', (r) => count(r.balance)]]} />
          </Panel>
          <Panel title="Inventory">
            <SmallTable rows={sum.items} empty="No items." columns={[['Item', (r) => <code>{shortId(r.item_def_id)}</code>], ['Quantity', (r) => count(r.quantity)], ['Acquired', (r) => time(r.acquired_at)]]} />
          </Panel>
          <Panel title="Saves and storage">
            <SmallTable rows={sum.saves} empty="No cloud saves." columns={[['Slot', (r) => r.slot], ['Version', (r) => count(r.version)], ['Updated', (r) => time(r.updated_at)]]} />
            <p class="muted">
              {count(sum.storage.objects)} storage objects in {count(sum.storage.collections)} collections.
            </p>
          </Panel>
          <Panel title="Recent matches">
            <SmallTable rows={sum.recent_matches} empty="No matches played." columns={[['Mode', (r) => String(r.mode)], ['Status', (r) => r.status], ['Finished', (r) => time(r.finished_at)]]} />
          </Panel>
        </div>
      ) : held.loading ? (
        <p class="muted">Reading what is held about this player…</p>
      ) : null}
      {erasing && p ? <EraseDialog player={p} onClose={() => setErasing(false)} /> : null}
    </Screen>
  );
}

function Panel(props: { title: string; children: preact.ComponentChildren }) {
  return (
    <section class="panel">
      <h2>{props.title}</h2>
      {props.children}
    </section>
  );
}

function SmallTable<R>(props: { rows: R[]; empty: string; columns: [string, (r: R) => preact.ComponentChildren][] }) {
  if (props.rows.length === 0) return <p class="muted">{props.empty}</p>;
  return (
    <table class="small">
      <thead>
        <tr>
          {props.columns.map(([label]) => (
            <th>{label}</th>
          ))}
        </tr>
      </thead>
      <tbody>
        {props.rows.map((r) => (
          <tr>
            {props.columns.map(([label, cell]) => (
              <td data-label={label}>{cell(r)}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Erasure is final: the operator types the username back before the server is even asked. */
function EraseDialog(props: { player: Player; onClose: () => void }) {
  const [echo, setEcho] = useState('');
  const [error, setError] = useState<Failed | null>(null);
  const [busy, setBusy] = useState(false);
  const erase = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api.post('/api/v1/ops/players/{id}/erase', { path: { id: props.player.id }, body: { username: echo } });
      navigate(`/players?erased=${encodeURIComponent(props.player.username)}`);
    } catch (err) {
      setError(failed(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="modal-backdrop" role="dialog" aria-modal="true" aria-labelledby="erase-title">
      <form class="modal" onSubmit={erase}>
        <h2 id="erase-title">Erase {props.player.username}?</h2>
        <p>
          This deletes the player and everything held about them, for good. Type the username <code>{props.player.username}</code> to confirm.
        </p>
        <label>
          Username
          <input name="echo" autocomplete="off" value={echo} onInput={(e) => setEcho((e.target as HTMLInputElement).value)} autoFocus />
        </label>
        <Failure error={error} />
        <div class="modal-actions">
          <button type="button" onClick={props.onClose}>
            Cancel
          </button>
          <button type="submit" class="danger" disabled={busy || echo === ''}>
            Erase player
          </button>
        </div>
      </form>
    </div>
  );
}
