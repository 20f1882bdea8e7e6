import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import { isoSeconds } from '../platform/database';
import { matchRecordView } from '../matches/matches';
import { notificationView } from '../social/notifications';
import { TOURNAMENT_VIEW_COLUMNS, tournamentView, type TournamentRow } from '../tournaments/tournaments';
import type { MatchRecord } from '../schemas/matches';
import type { NotificationView } from '../schemas/notifications';
import type { StoreListingView } from '../schemas/economy';
import type { ItemDefinition, ListRules, OpsChatMessage, OpsTournament } from '../schemas/ops';
import { sqlPage, type ListPage, type ListRequest } from './lists';

/**
 * The ops reads that are rows of one table each: finished matches, item
 * definitions, store listings, tournaments, notifications and persisted chat
 * messages. Each list's rules are the reference's table for it; each lookup
 * answers the list's own projection.
 */

type Db = Pick<Ctx, 'db'>;

function notFound(what: string): ApiError {
  return new ApiError('ops.not_found', `No such ${what}.`);
}

// ---- matches: the public record, no roster ------------------------------------

export const MATCH_LIST: ListRules = {
  sorts: ['id', 'mode', 'status', 'started_at', 'finished_at', 'inserted_at'],
  unique: 'id',
  default: { sort: 'id', order: 'asc' },
  filters: { mode: 'text', status: 'text' },
  q: ['mode'],
};

const MATCH_COLUMNS = ['id', 'mode', 'status', 'result', 'started_at', 'finished_at', 'inserted_at'] as const;

export async function listMatches(ctx: Db, request: ListRequest): Promise<ListPage<MatchRecord>> {
  const page = await sqlPage(ctx.db.selectFrom('match_records').select(MATCH_COLUMNS), MATCH_LIST, request);
  return { ...page, data: page.data.map(matchRecordView) };
}

export async function getMatch(ctx: Db, id: string): Promise<MatchRecord> {
  const row = await ctx.db.selectFrom('match_records').select(MATCH_COLUMNS).where('id', '=', id).executeTakeFirst();
  if (!row) throw notFound('match');
  return matchRecordView(row);
}

// ---- economy: item definitions and store listings --------------------------------

export const ITEM_LIST: ListRules = {
  sorts: ['id', 'slug', 'name', 'category', 'rarity', 'inserted_at', 'updated_at'],
  unique: 'id',
  default: { sort: 'id', order: 'asc' },
  filters: { category: 'text', rarity: 'text' },
  q: ['slug', 'name'],
};

const ITEM_COLUMNS = ['id', 'slug', 'name', 'category', 'rarity', 'inserted_at', 'updated_at'] as const;

function itemView(row: { id: string; slug: string; name: string; category: string; rarity: string; inserted_at: Date; updated_at: Date }): ItemDefinition {
  return { ...row, inserted_at: isoSeconds(row.inserted_at)!, updated_at: isoSeconds(row.updated_at)! };
}

export async function listItems(ctx: Db, request: ListRequest): Promise<ListPage<ItemDefinition>> {
  const page = await sqlPage(ctx.db.selectFrom('item_defs').select(ITEM_COLUMNS), ITEM_LIST, request);
  return { ...page, data: page.data.map(itemView) };
}

export async function getItem(ctx: Db, id: string): Promise<ItemDefinition> {
  const row = await ctx.db.selectFrom('item_defs').select(ITEM_COLUMNS).where('id', '=', id).executeTakeFirst();
  if (!row) throw notFound('item definition');
  return itemView(row);
}

export const LISTING_LIST: ListRules = {
  sorts: ['id', 'item_def_id', 'currency', 'price', 'active', 'valid_from', 'valid_until'],
  unique: 'id',
  default: { sort: 'id', order: 'desc' },
  filters: { item_def_id: 'id', currency: 'text', active: 'boolean' },
};

const LISTING_COLUMNS = ['id', 'item_def_id', 'currency', 'price', 'active', 'valid_from', 'valid_until', 'metadata'] as const;

function listingView(row: { id: string; item_def_id: string; currency: string; price: number; active: boolean; valid_from: Date | null; valid_until: Date | null; metadata: Record<string, unknown> }): StoreListingView {
  return { ...row, price: Number(row.price), valid_from: isoSeconds(row.valid_from), valid_until: isoSeconds(row.valid_until), metadata: row.metadata ?? {} };
}

export async function listListings(ctx: Db, request: ListRequest): Promise<ListPage<StoreListingView>> {
  const page = await sqlPage(ctx.db.selectFrom('store_listings').select(LISTING_COLUMNS), LISTING_LIST, request);
  return { ...page, data: page.data.map(listingView) };
}

export async function getListing(ctx: Db, id: string): Promise<StoreListingView> {
  const row = await ctx.db.selectFrom('store_listings').select(LISTING_COLUMNS).where('id', '=', id).executeTakeFirst();
  if (!row) throw notFound('store listing');
  return listingView(row);
}

// ---- tournaments: metadata withheld, `live` added ------------------------------

export const TOURNAMENT_LIST: ListRules = {
  sorts: ['id', 'name', 'leaderboard_id', 'status', 'start_at', 'end_at', 'inserted_at'],
  unique: 'id',
  default: { sort: 'id', order: 'asc' },
  filters: { status: 'text', leaderboard_id: 'text' },
  q: ['name'],
};

const TOURNAMENT_COLUMNS = TOURNAMENT_VIEW_COLUMNS;

/**
 * `live`: the node's tournament clock is carrying it, i.e. it is active and
 * its end is still ahead (the clock finishes it then). Every node's clock
 * picks active tournaments up again at boot, so a restart does not leave one
 * orphaned the way a lost process would.
 */
function tournamentRow(row: Pick<TournamentRow, (typeof TOURNAMENT_COLUMNS)[number]>, now: number): OpsTournament {
  // The public view, with the metadata withheld as the ops table says.
  const { metadata: _withheld, ...view } = tournamentView(row);
  return { ...view, live: row.status === 'active' && new Date(row.end_at).getTime() > now };
}

export async function listTournaments(ctx: Pick<Ctx, 'db' | 'clock'>, request: ListRequest): Promise<ListPage<OpsTournament>> {
  const page = await sqlPage(ctx.db.selectFrom('tournaments').select(TOURNAMENT_COLUMNS), TOURNAMENT_LIST, request);
  const now = ctx.clock.now();
  return { ...page, data: page.data.map((row) => tournamentRow(row, now)) };
}

export async function getTournament(ctx: Pick<Ctx, 'db' | 'clock'>, id: string): Promise<OpsTournament> {
  const row = await ctx.db.selectFrom('tournaments').select(TOURNAMENT_COLUMNS).where('id', '=', id).executeTakeFirst();
  if (!row) throw notFound('tournament');
  return tournamentRow(row, ctx.clock.now());
}

// ---- notifications ---------------------------------------------------------------

export const NOTIFICATION_LIST: ListRules = {
  sorts: ['id', 'player_id', 'type', 'subject', 'read', 'sent_at'],
  unique: 'id',
  default: { sort: 'sent_at', order: 'desc' },
  filters: { player_id: 'id', type: 'text', read: 'boolean' },
  q: ['subject'],
};

export async function listNotifications(ctx: Db, request: ListRequest): Promise<ListPage<NotificationView>> {
  const page = await sqlPage(ctx.db.selectFrom('notifications').selectAll(), NOTIFICATION_LIST, request);
  return { ...page, data: page.data.map(notificationView) };
}

// ---- persisted chat messages of one channel -----------------------------------------

export const MESSAGE_LIST: ListRules = {
  sorts: ['id', 'channel_type', 'sender_id', 'sent_at'],
  unique: 'id',
  default: { sort: 'sent_at', order: 'desc' },
  filters: { sender_id: 'id', channel_type: 'text' },
  q: ['content'],
};

/** A channel's stored history, whether or not it runs on this node; `metadata` is withheld. */
export async function listChannelMessages(ctx: Db, channelId: string, request: ListRequest): Promise<ListPage<OpsChatMessage>> {
  const query = ctx.db.selectFrom('chat_messages').select(['id', 'channel_type', 'channel_id', 'sender_id', 'content', 'sent_at']).where('channel_id', '=', channelId);
  const page = await sqlPage(query, MESSAGE_LIST, request);
  return { ...page, data: page.data.map((row) => ({ ...row, sent_at: isoSeconds(row.sent_at)! })) };
}
