import type { Selectable } from 'kysely';
import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { StoreListingsTable } from '../contracts/schema';
import { databaseFault, isoSeconds, type Db } from '../platform/database';
import { isUuid } from '../platform/ids';
import type { StoreListingView, StoreQuery } from '../schemas/economy';
import { addItem, type PlayerItem } from './inventory';
import { applyChange, CommitAbandoned, noPlayer, openWallet, type CommitGuard } from './wallets';

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
      const listing = await trx.selectFrom('store_listings').selectAll().where('id', '=', listingId).executeTakeFirst();
      if (!listing) throw new ApiError('economy.listing_not_found', 'No such listing.');
      refuseUnsellable(listing, ctx.clock.now());
      const wallet = await openWallet(trx, ctx.ids, playerId, listing.currency);
      await applyChange(trx, ctx.ids, wallet, { amount: -listing.price, reason: 'purchase', referenceType: 'store_listing', referenceId: listing.id });
      const item = await addItem(trx, ctx.ids, { playerId, itemDefId: listing.item_def_id, quantity: 1 });
      guard.beforeCommit?.();
      return item;
    });
  } catch (err) {
    if (err instanceof ApiError || err instanceof CommitAbandoned || databaseFault(err)) throw err;
    ctx.log.error('purchase_failed', { player_id: playerId, listing_id: listingId, error: err });
    throw new ApiError('economy.purchase_failed', 'The purchase failed; nothing was charged.');
  }
}
