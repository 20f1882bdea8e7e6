import { sql } from 'kysely';
import { z } from 'zod';
import type { Ctx } from '../contracts/context';
import { jsonb } from '../platform/database';
import { isStorableText } from '../platform/text';
import { MAX_BALANCE } from '../economy/wallets';
import { currenciesOf, syncTournaments, TournamentDeclaration, type TournamentSync } from '../tournaments/declarations';

/**
 * The game's economy catalogue (docs/decisions/0029-economy-catalogue.md):
 * `catalogue.json` in the game directory declares the currencies, the item
 * definitions and the store listings. The host reads it at boot (a bad file
 * refuses the boot, naming the entry) and again when it changes (a bad edit
 * is logged and the last good catalogue stays); each good read is synced
 * into the tables. Rows are never deleted, since wallets, the ledger and
 * inventories point at them: a currency or listing the file no longer
 * declares becomes inactive, an item definition stays as it was.
 */

export const CATALOGUE_FILE = 'catalogue.json';

const NAME = /^[A-Za-z0-9_.-]+$/;
const name = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .regex(NAME, `must be 1-${max} characters of A-Z a-z 0-9 _ . -`);
const label = (max: number) => z.string().min(1).max(max).refine(isStorableText, 'must be storable text');
const metadata = z
  .record(z.string(), z.unknown())
  .refine((m) => JSON.stringify(m).length <= 16_384, 'must encode to at most 16384 bytes')
  .default({});
const instant = z.iso.datetime({ offset: true }).nullable().default(null);

const Currency = z.strictObject({
  code: name(32),
  name: label(64).optional(),
  metadata,
});

export const RARITIES = ['common', 'uncommon', 'rare', 'epic', 'legendary'] as const;

const Item = z.strictObject({
  slug: name(64),
  name: label(128),
  category: label(64),
  rarity: z.enum(RARITIES).default('common'),
  stackable: z.boolean().default(true),
  metadata,
});

const Listing = z
  .strictObject({
    slug: name(64),
    /** The slug of an item of this catalogue. */
    item: z.string(),
    /** The code of a currency of this catalogue. */
    currency: z.string(),
    price: z.number().int().min(1).max(MAX_BALANCE),
    active: z.boolean().default(true),
    valid_from: instant,
    valid_until: instant,
    metadata,
  })
  .refine((l) => l.valid_from === null || l.valid_until === null || Date.parse(l.valid_from) < Date.parse(l.valid_until), {
    message: 'valid_until must be later than valid_from',
    path: ['valid_until'],
  });

const CatalogueFile = z.strictObject({
  currencies: z.array(Currency).default([]),
  items: z.array(Item).default([]),
  listings: z.array(Listing).default([]),
  tournaments: z.array(TournamentDeclaration).default([]),
});

export type Catalogue = z.output<typeof CatalogueFile>;

/** What the catalogue declares when the game has no catalogue file. */
export const EMPTY_CATALOGUE: Catalogue = { currencies: [], items: [], listings: [], tournaments: [] };

/** A catalogue that cannot be used; the message names the file and the entry. */
export class CatalogueError extends Error {
  override name = 'CatalogueError';
}

type Section = 'currencies' | 'items' | 'listings' | 'tournaments';
const KEY: Record<Section, 'code' | 'slug'> = { currencies: 'code', items: 'slug', listings: 'slug', tournaments: 'slug' };

/** How a message names an entry: its section, index and, when it has one, its code or slug. */
function entryName(doc: unknown, section: Section, index: number): string {
  const entry = (doc as Record<string, unknown[] | undefined>)?.[section]?.[index] as Record<string, unknown> | undefined;
  const key = entry?.[KEY[section]];
  return typeof key === 'string' ? `${section}[${index}] "${key}"` : `${section}[${index}]`;
}

/** Parses and checks a catalogue file's text; throws `CatalogueError` naming the first bad entry. */
export function parseCatalogue(text: string, file = CATALOGUE_FILE): Catalogue {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new CatalogueError(`${file}: not valid JSON (${(err as Error).message})`);
  }
  const parsed = CatalogueFile.safeParse(doc);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const [section, index, ...rest] = issue.path;
    const where =
      typeof section === 'string' && section in KEY && typeof index === 'number'
        ? `${entryName(doc, section as Section, index)}${rest.length > 0 ? `.${rest.join('.')}` : ''}`
        : issue.path.join('.') || '(root)';
    throw new CatalogueError(`${file}: ${where}: ${issue.message}`);
  }
  const catalogue = parsed.data;
  for (const section of ['currencies', 'items', 'listings', 'tournaments'] as const) {
    const seen = new Set<string>();
    catalogue[section].forEach((entry, i) => {
      const key = (entry as Record<string, unknown>)[KEY[section]] as string;
      if (seen.has(key)) throw new CatalogueError(`${file}: ${entryName(doc, section, i)}: declared twice`);
      seen.add(key);
    });
  }
  const currencies = new Set(catalogue.currencies.map((c) => c.code));
  const items = new Set(catalogue.items.map((i) => i.slug));
  catalogue.listings.forEach((l, i) => {
    if (!items.has(l.item)) throw new CatalogueError(`${file}: ${entryName(doc, 'listings', i)}: item "${l.item}" is not declared under items`);
    if (!currencies.has(l.currency)) throw new CatalogueError(`${file}: ${entryName(doc, 'listings', i)}: currency "${l.currency}" is not declared under currencies`);
  });
  catalogue.tournaments.forEach((t, i) => {
    for (const code of currenciesOf(t)) {
      if (!currencies.has(code)) throw new CatalogueError(`${file}: ${entryName(doc, 'tournaments', i)}: currency "${code}" is not declared under currencies`);
    }
  });
  return catalogue;
}

/** Rows one statement writes at most (PostgreSQL takes up to 65535 parameters). */
const CHUNK = 500;

function chunks<T>(rows: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < rows.length; i += CHUNK) out.push(rows.slice(i, i + CHUNK));
  return out;
}

/** Rows the sync inserted or changed, per table. */
export interface SyncCounts extends TournamentSync {
  currencies: number;
  items: number;
  listings: number;
  deactivated: number;
}

/**
 * Brings the tables in line with a checked catalogue, in one transaction.
 * Nodes sharing a database sync one at a time (a transaction-scoped advisory
 * lock), so two nodes booting together cannot interleave. Rows whose values
 * did not change are left alone, timestamps included.
 */
export async function syncCatalogue(ctx: Pick<Ctx, 'db' | 'ids'>, catalogue: Catalogue): Promise<SyncCounts> {
  return ctx.db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(hashtext('svc.economy.catalogue'))`.execute(trx);
    const now = new Date();
    const counts: SyncCounts = { currencies: 0, items: 0, listings: 0, deactivated: 0, tournaments: 0, cancelled: 0 };

    for (const part of chunks(catalogue.currencies)) {
      const written = await trx
        .insertInto('currencies')
        .values(part.map((c) => ({ code: c.code, name: c.name ?? c.code, active: true, metadata: jsonb(c.metadata), inserted_at: now, updated_at: now })))
        .onConflict((oc) =>
          oc
            .column('code')
            .doUpdateSet((eb) => ({ name: eb.ref('excluded.name'), active: true, metadata: eb.ref('excluded.metadata'), updated_at: now }))
            .where(sql<boolean>`(currencies.name, currencies.active, currencies.metadata) is distinct from (excluded.name, true, excluded.metadata)`),
        )
        .returning('code')
        .execute();
      counts.currencies += written.length;
    }

    for (const part of chunks(catalogue.items)) {
      const written = await trx
        .insertInto('item_defs')
        .values(
          part.map((i) => ({
            id: ctx.ids.uuid(),
            slug: i.slug,
            name: i.name,
            category: i.category,
            rarity: i.rarity,
            stackable: i.stackable,
            metadata: jsonb(i.metadata),
            inserted_at: now,
            updated_at: now,
          })),
        )
        .onConflict((oc) =>
          oc
            .column('slug')
            .doUpdateSet((eb) => ({
              name: eb.ref('excluded.name'),
              category: eb.ref('excluded.category'),
              rarity: eb.ref('excluded.rarity'),
              stackable: eb.ref('excluded.stackable'),
              metadata: eb.ref('excluded.metadata'),
              updated_at: now,
            }))
            .where(
              sql<boolean>`(item_defs.name, item_defs.category, item_defs.rarity, item_defs.stackable, item_defs.metadata)
                is distinct from (excluded.name, excluded.category, excluded.rarity, excluded.stackable, excluded.metadata)`,
            ),
        )
        .returning('id')
        .execute();
      counts.items += written.length;
    }

    const itemIds = new Map<string, string>();
    const slugs = catalogue.listings.map((l) => l.item);
    for (const part of chunks([...new Set(slugs)])) {
      for (const r of await trx.selectFrom('item_defs').select(['id', 'slug']).where('slug', 'in', part).execute()) itemIds.set(r.slug, r.id);
    }

    for (const part of chunks(catalogue.listings)) {
      const written = await trx
        .insertInto('store_listings')
        .values(
          part.map((l) => ({
            id: ctx.ids.uuid(),
            slug: l.slug,
            item_def_id: itemIds.get(l.item)!,
            currency: l.currency,
            price: l.price,
            active: l.active,
            valid_from: l.valid_from,
            valid_until: l.valid_until,
            metadata: jsonb(l.metadata),
          })),
        )
        .onConflict((oc) =>
          oc
            .column('slug')
            .doUpdateSet((eb) => ({
              item_def_id: eb.ref('excluded.item_def_id'),
              currency: eb.ref('excluded.currency'),
              price: eb.ref('excluded.price'),
              active: eb.ref('excluded.active'),
              valid_from: eb.ref('excluded.valid_from'),
              valid_until: eb.ref('excluded.valid_until'),
              metadata: eb.ref('excluded.metadata'),
            }))
            .where(
              sql<boolean>`(store_listings.item_def_id, store_listings.currency, store_listings.price, store_listings.active,
                  store_listings.valid_from, store_listings.valid_until, store_listings.metadata)
                is distinct from (excluded.item_def_id, excluded.currency, excluded.price, excluded.active,
                  excluded.valid_from, excluded.valid_until, excluded.metadata)`,
            ),
        )
        .returning('id')
        .execute();
      counts.listings += written.length;
    }

    // What the file no longer declares stops being sold or credited; its rows stay for the wallets, ledger and inventories.
    const listingSlugs = catalogue.listings.map((l) => l.slug);
    let dropListings = trx.updateTable('store_listings').set({ active: false }).where('active', '=', true);
    if (listingSlugs.length > 0) dropListings = dropListings.where('slug', 'not in', listingSlugs);
    counts.deactivated += Number((await dropListings.executeTakeFirst()).numUpdatedRows);
    const codes = catalogue.currencies.map((c) => c.code);
    let dropCurrencies = trx.updateTable('currencies').set({ active: false, updated_at: now }).where('active', '=', true);
    if (codes.length > 0) dropCurrencies = dropCurrencies.where('code', 'not in', codes);
    counts.deactivated += Number((await dropCurrencies.executeTakeFirst()).numUpdatedRows);
    // Last: entry fees and rewards name the currencies synced above.
    Object.assign(counts, await syncTournaments(trx, ctx.ids, catalogue.tournaments, now));
    return counts;
  });
}
