import type { ComponentChildren } from 'preact';
import { api, given, type Row } from '../api';
import { useLoad } from '../load';
import { setQuery, useLocation } from '../router';
import { Failure, Figure, Screen, useDraft } from '../ui';

export type ConsoleScreen = Row<'/api/v1/ops/console/screens'>;

/**
 * A screen an extension's manifest declares: the console asks for its
 * fields (kept in the address), calls its GET action and shows the answer —
 * flat values as figures, lists of objects as tables, anything else as JSON.
 */
export function ExtensionScreen(props: { screen: ConsoleScreen | null; loading: boolean }) {
  const { query } = useLocation();
  const screen = props.screen;
  if (!screen) {
    return <Screen title="Extension screen">{props.loading ? <p class="muted">Loading…</p> : <p class="notice">No installed extension declares this screen.</p>}</Screen>;
  }
  const values = Object.fromEntries(screen.fields.map((f) => [f, query.get(f) ?? '']));
  const ready = screen.fields.every((f) => values[f] !== '');
  return (
    <Screen title={screen.title} subtitle={`From the ${screen.extension} extension (action ${screen.action}).`}>
      {screen.fields.length ? <Fields fields={screen.fields} values={values} /> : null}
      {ready ? <Result screen={screen} values={values} /> : <p class="muted">Fill in {screen.fields.join(', ')} to see this screen.</p>}
    </Screen>
  );
}

function Fields(props: { fields: string[]; values: Record<string, string> }) {
  const [draft, setDraft] = useDraft(props.values);
  return (
    <form
      class="controls"
      onSubmit={(e) => {
        e.preventDefault();
        setQuery(Object.fromEntries(props.fields.map((f) => [f, draft[f]?.trim() || null])));
      }}
    >
      {props.fields.map((f) => (
        <label class="inline">
          {f}
          <input name={f} value={draft[f] ?? ''} onInput={(e) => setDraft({ ...draft, [f]: (e.target as HTMLInputElement).value })} />
        </label>
      ))}
      <button type="submit">Show</button>
    </form>
  );
}

function Result(props: { screen: ConsoleScreen; values: Record<string, string> }) {
  const { extension, action } = props.screen;
  const query = given(props.values);
  // An extension's actions are not in the client's document, so this one call is untyped.
  const loaded = useLoad(JSON.stringify([extension, action, query]), (): Promise<unknown> => api.call('GET', '/api/v1/ops/ext/{extension}/{action}', { path: { extension, action }, query }));
  if (loaded.error) return <Failure error={loaded.error} />;
  if (loaded.data === null) return <p class="muted">Loading…</p>;
  return <Value value={loaded.data} />;
}

const flat = (v: unknown) => v === null || ['string', 'number', 'boolean'].includes(typeof v);
const rowsOf = (v: unknown): Record<string, unknown>[] | null =>
  Array.isArray(v) && v.length > 0 && v.every((r) => r !== null && typeof r === 'object' && !Array.isArray(r)) ? (v as Record<string, unknown>[]) : null;

function Value({ value }: { value: unknown }): ComponentChildren {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return <pre class="json">{JSON.stringify(value, null, 2)}</pre>;
  const entries = Object.entries(value as Record<string, unknown>);
  const figures = entries.filter(([, v]) => flat(v));
  const rest = entries.filter(([, v]) => !flat(v));
  return (
    <div data-testid="extension-result">
      {figures.length ? (
        <div class="figures">
          {figures.map(([k, v]) => (
            <Figure label={k} value={String(v)} />
          ))}
        </div>
      ) : null}
      {rest.map(([k, v]) => {
        const rows = rowsOf(v);
        if (!rows) {
          return (
            <>
              <h2>{k}</h2>
              <pre class="json">{JSON.stringify(v, null, 2)}</pre>
            </>
          );
        }
        const columns = [...new Set(rows.flatMap((r) => Object.keys(r)))];
        return (
          <>
            <h2>{k}</h2>
            <div class="table-wrap">
              <table>
                <thead>
                  <tr>
                    {columns.map((c) => (
                      <th>{c}</th>
                    ))}
                  </tr>
                </thead>
                <tbody>
                  {rows.map((r) => (
                    <tr>
                      {columns.map((c) => (
                        <td data-label={c}>{flat(r[c]) ? String(r[c] ?? '–') : JSON.stringify(r[c])}</td>
                      ))}
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </>
        );
      })}
    </div>
  );
}
