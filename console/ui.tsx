import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ServiceError } from '../client';
import { api, given, type Answer, type Failed, type ListPath, type Row } from './api';
import { count } from './format';
import { useLoad } from './load';
import { href, setQuery, useLocation } from './router';

/** The shared pieces of every screen: headings, errors, figures, and the one list view every ops list uses. */

export function Screen(props: { title: string; subtitle?: ComponentChildren; actions?: ComponentChildren; children: ComponentChildren }) {
  return (
    <section class="screen" aria-labelledby="screen-title">
      <header class="screen-head">
        <div>
          <h1 id="screen-title">{props.title}</h1>
          {props.subtitle ? <p class="muted">{props.subtitle}</p> : null}
        </div>
        {props.actions ? <div class="screen-actions">{props.actions}</div> : null}
      </header>
      {props.children}
    </section>
  );
}

export function Failure({ error }: { error: Failed | null }) {
  if (!error) return null;
  return (
    <p class="notice error" role="alert">
      <strong>{error instanceof ServiceError ? error.code : error.kind}</strong> {error.message}
    </p>
  );
}

export function Figure(props: { label: string; value: ComponentChildren; hint?: string; testId?: string }) {
  return (
    <div class="figure" data-testid={props.testId}>
      <span class="figure-label">{props.label}</span>
      <span class="figure-value">{props.value}</span>
      {props.hint ? <span class="figure-hint">{props.hint}</span> : null}
    </div>
  );
}

export function Link(props: { to: string; children: ComponentChildren; class?: string }) {
  return (
    <a {...href(props.to)} class={props.class}>
      {props.children}
    </a>
  );
}

export interface Column<Row> {
  label: string;
  /** The list's sort field this column orders by, if it can. */
  sort?: string;
  cell: (row: Row) => ComponentChildren;
  numeric?: boolean;
}

export interface Filter {
  key: string;
  label: string;
  kind: 'text' | 'boolean' | 'id';
  placeholder?: string;
}

export interface ListProps<P extends ListPath> {
  /** The ops route, as the OpenAPI document names it; its rows type the columns. */
  path: P;
  /** The route's own path parameters (a board's id). */
  params?: Record<string, string>;
  columns: Column<Row<P>>[];
  filters?: Filter[];
  /** Placeholder of the `q` box; absent, the list takes no search. */
  search?: string;
  /** Query values fixed by the screen rather than the address. */
  fixed?: Record<string, string>;
  rowKey: (row: Row<P>) => string;
  /** Figures the list's envelope carries beyond the page (the matchmaker's queue). */
  header?: (answer: Answer<P>) => ComponentChildren;
  empty?: string;
  everyMs?: number;
}

const LIMITS = ['10', '25', '50', '100', '200'];

/**
 * A list as the ops plane serves it: search, filters, sort and paging all
 * live in the address, so every view of a list is a link.
 */
export function ListView<P extends ListPath>(props: ListProps<P>) {
  const { query } = useLocation();
  const read = (key: string) => query.get(key) ?? '';
  const values: Record<string, string> = {
    q: props.search ? read('q') : '',
    sort: read('sort'),
    order: read('order'),
    offset: read('offset'),
    limit: read('limit') || '25',
    ...Object.fromEntries((props.filters ?? []).map((f) => [f.key, read(f.key)])),
    ...props.fixed,
  };
  const asked = given(values);
  const key = JSON.stringify([props.path, props.params ?? {}, asked]);
  const loaded = useLoad(key, () => api.call('GET', props.path, { query: asked, ...(props.params ? { path: props.params } : {}) }) as Promise<Answer<P>>, props.everyMs ? { everyMs: props.everyMs } : {});
  // Every list route answers this envelope (ListPath says so); TypeScript cannot see it through the generic.
  const page = loaded.data as (Answer<P> & { data: Row<P>[]; page: { limit: number; offset: number; total: number } }) | null;
  const offset = page?.page.offset ?? 0;
  const limit = page?.page.limit ?? Number(values.limit);
  const total = page?.page.total ?? 0;

  const toggleSort = (field: string) => {
    const order = values.sort === field && values.order !== 'desc' ? 'desc' : 'asc';
    setQuery({ sort: field, order, offset: null });
  };

  return (
    <div class="list">
      {props.search || props.filters?.length ? (
        <ListControls search={props.search} filters={props.filters ?? []} values={values} />
      ) : null}
      <Failure error={loaded.error} />
      {page && props.header ? props.header(page) : null}
      <div class="table-wrap">
        <table aria-busy={loaded.loading}>
          <thead>
            <tr>
              {props.columns.map((c) => (
                <th class={c.numeric ? 'num' : undefined} aria-sort={c.sort && values.sort === c.sort ? (values.order === 'desc' ? 'descending' : 'ascending') : undefined}>
                  {c.sort ? (
                    <button type="button" class="sort" onClick={() => toggleSort(c.sort!)}>
                      {c.label}
                      <span class="sort-mark">{values.sort === c.sort ? (values.order === 'desc' ? ' ▼' : ' ▲') : ''}</span>
                    </button>
                  ) : (
                    c.label
                  )}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {page?.data.map((row) => (
              <tr key={props.rowKey(row)}>
                {props.columns.map((c) => (
                  <td class={c.numeric ? 'num' : undefined} data-label={c.label}>
                    {c.cell(row)}
                  </td>
                ))}
              </tr>
            ))}
            {page && page.data.length === 0 ? (
              <tr>
                <td colSpan={props.columns.length} class="empty">
                  {props.empty ?? 'Nothing here.'}
                </td>
              </tr>
            ) : null}
          </tbody>
        </table>
      </div>
      <nav class="pager" aria-label="Pages">
        <span class="muted" data-testid="page-summary">
          {!page ? (loaded.error ? '' : 'Loading…') : total === 0 ? 'No rows' : `${count(offset + 1)}–${count(Math.min(offset + limit, total))} of ${count(total)}`}
        </span>
        <label class="inline">
          Rows
          <select value={String(limit)} onChange={(e) => setQuery({ limit: (e.target as HTMLSelectElement).value, offset: null })}>
            {LIMITS.map((l) => (
              <option value={l}>{l}</option>
            ))}
          </select>
        </label>
        <button type="button" disabled={offset === 0} onClick={() => setQuery({ offset: String(Math.max(0, offset - limit)) || null })}>
          Previous
        </button>
        <button type="button" disabled={offset + limit >= total} onClick={() => setQuery({ offset: String(offset + limit) })}>
          Next
        </button>
      </nav>
    </div>
  );
}

/**
 * A form's edits before they are applied to the address: they start from the
 * address's values and follow them when those change (back, forward, a link),
 * but not on the first render. Preact runs effects after paint, so a reset
 * there could wipe what was typed in the meantime: a fast typist, or a test
 * driving the browser, then applied an empty form.
 */
export function useDraft(values: Record<string, string>): [Record<string, string>, (draft: Record<string, string>) => void] {
  const [draft, setDraft] = useState(values);
  const signature = JSON.stringify(values);
  const seen = useRef(signature);
  useEffect(() => {
    if (seen.current === signature) return;
    seen.current = signature;
    setDraft(values);
  }, [signature]);
  return [draft, setDraft];
}

function ListControls(props: { search: string | undefined; filters: Filter[]; values: Record<string, string> }) {
  const [draft, setDraft] = useDraft(props.values);
  const apply = (e: Event) => {
    e.preventDefault();
    const changes: Record<string, string | null> = { offset: null };
    if (props.search) changes.q = draft.q?.trim() || null;
    for (const f of props.filters) changes[f.key] = draft[f.key]?.trim() || null;
    setQuery(changes);
  };
  const set = (key: string) => (e: Event) => setDraft({ ...draft, [key]: (e.target as HTMLInputElement).value });
  return (
    <form class="controls" onSubmit={apply} role="search">
      {props.search ? (
        <label class="grow">
          <span class="sr-only">Search</span>
          <input type="search" name="q" placeholder={props.search} value={draft.q ?? ''} onInput={set('q')} />
        </label>
      ) : null}
      {props.filters.map((f) =>
        f.kind === 'boolean' ? (
          <label class="inline">
            {f.label}
            <select name={f.key} value={draft[f.key] ?? ''} onChange={set(f.key)}>
              <option value="">any</option>
              <option value="true">yes</option>
              <option value="false">no</option>
            </select>
          </label>
        ) : (
          <label class="inline">
            {f.label}
            <input name={f.key} value={draft[f.key] ?? ''} placeholder={f.placeholder ?? (f.kind === 'id' ? 'uuid' : '')} onInput={set(f.key)} size={f.kind === 'id' ? 36 : 14} />
          </label>
        ),
      )}
      <button type="submit">Apply</button>
    </form>
  );
}
