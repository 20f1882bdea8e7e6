import { useState } from 'preact/hooks';
import { ApiFailure, ops } from '../api';
import { count, shortId, time } from '../format';
import { useLoad } from '../load';
import { navigate, useLocation } from '../router';
import { Failure, Figure, Link, ListView, Screen } from '../ui';

interface Player {
  id: string;
  username: string;
  display_name: string | null;
  avatar_url: string | null;
  metadata: Record<string, unknown>;
  inserted_at: string | null;
  updated_at: string | null;
}

type Row = Record<string, unknown>;
interface PlayerExport {
  player_id: string;
  exported_at: string;
  tables: Record<string, Row[]>;
  extensions: Record<string, unknown>;
}

export function PlayerList() {
  const erased = useLocation().query.get('erased');
  return (
    <Screen title="Players" subtitle="Search by username or display name; guests are unclaimed guest accounts.">
      {erased ? (
        <p class="notice ok" role="status">
          Erased <strong>{erased}</strong>.
        </p>
      ) : null}
      <ListView<Player>
        path="/players"
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

const rows = (exp: PlayerExport | null, table: string): Row[] => exp?.tables[table] ?? [];

/** One player: profile and a summary of everything held about them (read from the export), with export and erase. */
export function PlayerPage(props: { id: string; canErase: boolean }) {
  const player = useLoad(`player:${props.id}`, () => ops<{ data: Player }>(`/players/${encodeURIComponent(props.id)}`));
  const held = useLoad(`export:${props.id}`, () => ops<{ data: PlayerExport }>(`/players/${encodeURIComponent(props.id)}/export`));
  const [erasing, setErasing] = useState(false);
  const p = player.data?.data ?? null;
  const exp = held.data?.data ?? null;

  const download = () => {
    if (!exp) return;
    const blob = new Blob([JSON.stringify(exp, null, 2)], { type: 'application/json' });
    const url = URL.createObjectURL(blob);
    const a = document.createElement('a');
    a.href = url;
    a.download = `player-${props.id}.json`;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  };

  const identities = rows(exp, 'player_identities');
  const wallets = rows(exp, 'wallets');
  const items = rows(exp, 'player_items');
  const saves = rows(exp, 'cloud_saves');
  const storage = rows(exp, 'storage');
  const friends = rows(exp, 'friendships').filter((f) => f.status === 'accepted');
  const matches = [...rows(exp, 'match_records')].sort((a, b) => String(b.inserted_at).localeCompare(String(a.inserted_at))).slice(0, 10);
  const stats = rows(exp, 'player_stats')[0];

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
          <button type="button" onClick={download} disabled={!exp}>
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
      <Failure error={player.error ?? held.error} />
      {p ? (
        <div class="figures">
          <Figure label="Username" value={p.username} testId="player-username" />
          <Figure label="Joined" value={time(p.inserted_at)} />
          <Figure label="Providers" value={identities.length ? identities.map((i) => String(i.provider)).join(', ') : 'none'} testId="player-providers" />
          <Figure label="Friends" value={count(friends.length)} />
          <Figure label="Groups" value={count(rows(exp, 'group_members').length)} />
          <Figure label="Saves" value={count(saves.length)} hint={`${count(storage.length)} storage objects`} />
          <Figure label="Games" value={stats ? `${count(stats.games_played as number)} (${count(stats.wins as number)} won)` : '–'} />
        </div>
      ) : null}
      {exp ? (
        <div class="columns">
          <Panel title="Wallets">
            <SmallTable rows={wallets} empty="No wallet." columns={[['Currency', (r) => String(r.currency)], ['Balance', (r) => count(r.balance as number)]]} />
          </Panel>
          <Panel title="Inventory">
            <SmallTable rows={items} empty="No items." columns={[['Item', (r) => <code>{shortId(r.item_def_id as string)}</code>], ['Quantity', (r) => count(r.quantity as number)], ['Acquired', (r) => time(r.acquired_at as string)]]} />
          </Panel>
          <Panel title="Saves and storage">
            <SmallTable rows={saves} empty="No cloud saves." columns={[['Slot', (r) => String(r.slot)], ['Version', (r) => count(r.version as number)], ['Updated', (r) => time(r.updated_at as string)]]} />
            <p class="muted">
              {count(storage.length)} storage objects in {count(new Set(storage.map((s) => s.collection)).size)} collections.
            </p>
          </Panel>
          <Panel title="Recent matches">
            <SmallTable rows={matches} empty="No matches played." columns={[['Mode', (r) => String(r.mode)], ['Status', (r) => String(r.status)], ['Finished', (r) => time(r.finished_at as string)]]} />
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

function SmallTable(props: { rows: Row[]; empty: string; columns: [string, (r: Row) => preact.ComponentChildren][] }) {
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
  const [error, setError] = useState<ApiFailure | null>(null);
  const [busy, setBusy] = useState(false);
  const erase = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await ops(`/players/${encodeURIComponent(props.player.id)}/erase`, { method: 'POST', body: { username: echo } });
      navigate(`/players?erased=${encodeURIComponent(props.player.username)}`);
    } catch (err) {
      setError(err as ApiFailure);
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
