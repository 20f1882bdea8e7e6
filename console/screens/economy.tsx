import { count, shortId, time } from '../format';
import { Link, ListView, Screen } from '../ui';

/** The catalogue's item definitions and the store's listings. */
export function Economy(props: { tab: 'items' | 'listings' }) {
  return (
    <Screen title="Economy" subtitle="Item definitions from the game's catalogue, and store listings.">
      <nav class="tabs" aria-label="Economy">
        <Link to="/economy/items" class={props.tab === 'items' ? 'active' : undefined}>
          Items
        </Link>
        <Link to="/economy/listings" class={props.tab === 'listings' ? 'active' : undefined}>
          Listings
        </Link>
      </nav>
      {props.tab === 'items' ? (
        <ListView
          key="items"
          path="/api/v1/ops/economy/items"
          search="Slug or name"
          filters={[
            { key: 'category', label: 'Category', kind: 'text' },
            { key: 'rarity', label: 'Rarity', kind: 'text' },
          ]}
          rowKey={(i) => i.id}
          columns={[
            { label: 'Slug', sort: 'slug', cell: (i) => <code>{i.slug}</code> },
            { label: 'Name', sort: 'name', cell: (i) => i.name },
            { label: 'Category', sort: 'category', cell: (i) => i.category },
            { label: 'Rarity', sort: 'rarity', cell: (i) => i.rarity },
            { label: 'Id', sort: 'id', cell: (i) => <code title={i.id}>{shortId(i.id)}</code> },
            { label: 'Updated', sort: 'updated_at', cell: (i) => time(i.updated_at) },
          ]}
          empty="The catalogue defines no items."
        />
      ) : (
        <ListView
          key="listings"
          path="/api/v1/ops/economy/listings"
          filters={[
            { key: 'currency', label: 'Currency', kind: 'text' },
            { key: 'active', label: 'Active', kind: 'boolean' },
            { key: 'item_def_id', label: 'Item id', kind: 'id' },
          ]}
          rowKey={(l) => l.id}
          columns={[
            { label: 'Item', sort: 'item_def_id', cell: (l) => <code title={l.item_def_id}>{shortId(l.item_def_id)}</code> },
            { label: 'Price', sort: 'price', numeric: true, cell: (l) => count(l.price) },
            { label: 'Currency', sort: 'currency', cell: (l) => l.currency },
            { label: 'Active', sort: 'active', cell: (l) => (l.active ? <span class="tag ok">active</span> : <span class="muted">inactive</span>) },
            { label: 'From', sort: 'valid_from', cell: (l) => time(l.valid_from) },
            { label: 'Until', sort: 'valid_until', cell: (l) => time(l.valid_until) },
          ]}
          empty="The store has no listings."
        />
      )}
    </Screen>
  );
}
