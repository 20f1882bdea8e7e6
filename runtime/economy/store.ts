import type { Selectable, Transaction } from 'kysely';
import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { Database, StoreListingsTable } from '../contracts/tables';
import { databaseFault, isoSeconds, type Db } from '../platform/database';
import { isUuid } from '../platform/ids';
import type { StoreListingView, StoreQuery } from '../schemas/economy';
import { addItem, type PlayerItem } from './inventory';
import { changeWrites, noPlayer, openWallet, type Wallet } from './wallets';
import { CommitAbandoned, type CommitGuard } from '../platform/commit-guard';

/**
 * The store: the catalogue's listings, and buying one. A purchase is one
 * transaction that locks the buyer's wallet in the listing's currency,
 * debits the price, writes the ledger row (`purchase`, referencing the
 * listing) and adds a new inventory row of quantity 1 (never merged into a
 * stack, whatever the item's `stackable` says), so purchases of one player
 * in one currency run one after the other and none can spend the same coin twice.
 */

type Listing = Selectable<StoreListingsTable>;

function listingView(l: Listing): StoreListingView {
  return {
    id: l.id,
    item_def_id: l.item_def_id,
    currency: l.currency,
    price: l.price,
    active: l.active,
    valid_from: isoSeconds(l.valid_from),
    valid_until: isoSeconds(l.valid_until),
    metadata: l.metadata,
  };
}

/** `GET /store`: the active listings, in catalogue order. The validity window is shown, for clients to display. */
export async function listStore(db: Db, q: StoreQuery): Promise<StoreListingView[]> {
  let query = db.selectFrom('store_listings').selectAll().where('active', '=', true);
  if (q.currency !== undefined) query = query.where('currency', '=', q.currency);
  return (await query.orderBy('id').execute()).map(listingView);
}

/**
 * A listing outside its validity window cannot be bought (the list still
 * shows it, with the window, so a client can count down to it).
 */
function refuseUnsellable(l: Listing, now: number): void {
  const window = (state: string) => new ApiError('economy.listing_inactive', 'The listing is not on sale.', { state, listing_id: l.id });
  if (!l.active) throw window('inactive');
  if (l.valid_from !== null && now < new Date(l.valid_from).getTime()) throw window('not_yet_valid');
  if (l.valid_until !== null && now >= new Date(l.valid_until).getTime()) throw window('expired');
}

/**
 * The listing and the buyer's wallet in its currency, locked, in one round
 * trip; a buyer without that wallet yet gets the listing alone (the caller
 * opens the wallet), and an unknown listing neither.
 */
async function listingAndLockedWallet(trx: Transaction<Database>, playerId: string, listingId: string): Promise<{ listing?: Listing; wallet?: Wallet }> {
  const row = await trx
    .selectFrom('store_listings as l')
    .innerJoin('wallets as w', (join) => join.onRef('w.currency', '=', 'l.currency').on('w.player_id', '=', playerId))
    .where('l.id', '=', listingId)
    .select([
      'l.id as l_id',
      'l.slug as l_slug',
      'l.item_def_id as l_item_def_id',
      'l.price as l_price',
      'l.active as l_active',
      'l.valid_from as l_valid_from',
      'l.valid_until as l_valid_until',
      'l.metadata as l_metadata',
    ])
    .selectAll('w')
    .forUpdate(['w'])
    .executeTakeFirst();
  if (row) {
    const { l_id, l_slug, l_item_def_id, l_price, l_active, l_valid_from, l_valid_until, l_metadata, ...wallet } = row;
    const listing: Listing = { id: l_id, slug: l_slug, item_def_id: l_item_def_id, currency: wallet.currency, price: l_price, active: l_active, valid_from: l_valid_from, valid_until: l_valid_until, metadata: l_metadata };
    return { listing, wallet };
  }
  const listing = await trx.selectFrom('store_listings').selectAll().where('id', '=', listingId).executeTakeFirst();
  return listing ? { listing } : {};
}

/**
 * `POST /store/purchase` and `game.economy.purchase`. Refusals: 404
 * `economy.listing_not_found`, 400 `economy.listing_inactive`, 402
 * `economy.insufficient_funds`; any other failure but a database outage is
 * 500 `economy.purchase_failed`, logged.
 */
export async function purchase(ctx: Pick<Ctx, 'db' | 'ids' | 'clock' | 'log'>, playerId: string, listingId: string, guard: CommitGuard = {}): Promise<PlayerItem> {
  if (!isUuid(listingId)) throw new ApiError('economy.listing_not_found', 'No such listing.');
  if (!isUuid(playerId)) throw noPlayer();
  try {
    return await ctx.db.transaction().execute(async (trx) => {
      let { listing, wallet } = await listingAndLockedWallet(trx, playerId, listingId);
      if (!listing) throw new ApiError('economy.listing_not_found', 'No such listing.');
      refuseUnsellable(listing, ctx.clock.now());
      wallet ??= await openWallet(trx, ctx.ids, playerId, listing.currency);
      const { statement } = changeWrites(trx, ctx.ids, wallet, { amount: -listing.price, reason: 'purchase', referenceType: 'store_listing', referenceId: listing.id });
      const item = await addItem(statement, ctx.ids, { playerId, itemDefId: listing.item_def_id, quantity: 1 });
      guard.beforeCommit?.();
      return item;
    });
  } catch (err) {
    if (err instanceof ApiError || err instanceof CommitAbandoned || databaseFault(err)) throw err;
    ctx.log.error('purchase_failed', { player_id: playerId, listing_id: listingId, error: err });
    throw new ApiError('economy.purchase_failed', 'The purchase failed; nothing was charged.');
  }
}
