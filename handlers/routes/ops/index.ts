import { listAudit, AUDIT_LIST } from '../../../runtime/ops/audit';
import { features } from '../../../runtime/ops/features';
import { listRequest, type ListQuery } from '../../../runtime/ops/lists';
import { BOARD_LIST, CHANNEL_LIST, ENTRY_LIST, listBoardEntries, listBoards, listChannels, listMatchmaker, MATCHMAKER_LIST } from '../../../runtime/ops/live';
import { getOpsPlayer, listPlayers, PLAYER_LIST } from '../../../runtime/ops/players';
import {
  getItem,
  getListing,
  getMatch,
  getTournament,
  ITEM_LIST,
  LISTING_LIST,
  listChannelMessages,
  listItems,
  listListings,
  listMatches,
  listNotifications,
  listTournaments,
  MATCH_LIST,
  MESSAGE_LIST,
  NOTIFICATION_LIST,
  TOURNAMENT_LIST,
} from '../../../runtime/ops/records';
import { nodeStats } from '../../../runtime/ops/stats';
import { StoreListing } from '../../../runtime/schemas/economy';
import { MatchRecord } from '../../../runtime/schemas/matches';
import { Notification } from '../../../runtime/schemas/notifications';
import {
  AuditEntry,
  BoardPath,
  ChannelPath,
  ChatChannel,
  Features,
  ItemDefinition,
  listQuery,
  MatchmakerList,
  oneOf,
  OpsBoard,
  OpsBoardEntry,
  OpsChatMessage,
  OpsStats,
  OpsTournament,
} from '../../../runtime/schemas/ops';
import { Player } from '../../../runtime/schemas/players';
import { route, type Route } from '../../contract';
import { opsList, opsLookup } from './lists';

/**
 * The operator plane (`/api/v1/ops/*`): each route declares its one
 * capability class, and the pipeline admits only an operator credential that
 * holds it (handlers/pipeline/caller.ts). Reads are never audited.
 */
export const opsRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/ops/stats',
    summary: "This node's health: process, event loop, memory, live matches, sockets, tick lateness, matchmaker depth",
    tag: 'ops',
    auth: 'operator',
    capability: 'read',
    rate: 'api',
    response: oneOf(OpsStats),
    errors: [],
    handle: async ({ ctx }) => ({ data: nodeStats(ctx) }),
  }),
  route({
    method: 'GET',
    path: '/api/v1/ops/features',
    summary: 'The core name, version and capabilities of this node, and each extension’s',
    tag: 'ops',
    auth: 'operator',
    capability: 'read',
    rate: 'api',
    response: oneOf(Features),
    errors: [],
    handle: async ({ ctx }) => ({ data: features(ctx) }),
  }),
  opsList({
    path: '/api/v1/ops/players',
    summary: 'Players (the public projection); `guest=true` lists unclaimed guests, `false` everyone else',
    tag: 'ops',
    rules: PLAYER_LIST,
    row: Player,
    list: (ctx, request) => listPlayers(ctx, request),
  }),
  opsLookup({
    path: '/api/v1/ops/players/:id',
    summary: 'One player, as the list shows it',
    tag: 'ops',
    row: Player,
    get: (ctx, id) => getOpsPlayer(ctx, id),
  }),
  opsList({ path: '/api/v1/ops/matches', summary: 'Finished match records (no roster)', tag: 'ops', rules: MATCH_LIST, row: MatchRecord, list: listMatches }),
  opsLookup({ path: '/api/v1/ops/matches/:id', summary: 'One match record', tag: 'ops', row: MatchRecord, get: getMatch }),
  opsList({
    path: '/api/v1/ops/leaderboards',
    summary: 'Every board this node holds (`live`) or the table stores, largest first',
    tag: 'ops',
    rules: BOARD_LIST,
    row: OpsBoard,
    list: listBoards,
  }),
  opsList({
    path: '/api/v1/ops/leaderboards/:id/entries',
    summary: 'A board’s stored entries with whole-board ranks, highest score first (a score not yet flushed shows on the public top list first)',
    tag: 'ops',
    params: BoardPath,
    rules: ENTRY_LIST,
    row: OpsBoardEntry,
    list: (ctx, request, params) => listBoardEntries(ctx, params.id!, request),
  }),
  route({
    method: 'GET',
    path: '/api/v1/ops/matchmaker',
    summary: 'Queue depth and waits per mode from the matchmaker’s last published sample (no tickets, no players), deepest first',
    tag: 'ops',
    auth: 'operator',
    capability: 'read',
    rate: 'api',
    query: listQuery(MATCHMAKER_LIST),
    response: MatchmakerList,
    errors: ['ops.invalid_sort'],
    handle: async ({ ctx, query }) => listMatchmaker(ctx, listRequest(MATCHMAKER_LIST, query as ListQuery)),
  }),
  opsList({ path: '/api/v1/ops/economy/items', summary: 'Item definitions of the catalogue', tag: 'ops', rules: ITEM_LIST, row: ItemDefinition, list: listItems }),
  opsLookup({ path: '/api/v1/ops/economy/items/:id', summary: 'One item definition', tag: 'ops', row: ItemDefinition, get: getItem }),
  opsList({ path: '/api/v1/ops/economy/listings', summary: 'Store listings, active or not, newest first', tag: 'ops', rules: LISTING_LIST, row: StoreListing, list: listListings }),
  opsLookup({ path: '/api/v1/ops/economy/listings/:id', summary: 'One store listing', tag: 'ops', row: StoreListing, get: getListing }),
  opsList({
    path: '/api/v1/ops/chat/channels',
    summary: 'Chat channels running on this node (at most 1000 enumerated) with their players joined, busiest first',
    tag: 'ops',
    rules: CHANNEL_LIST,
    row: ChatChannel,
    list: async (ctx, request) => listChannels(ctx, request),
  }),
  opsList({
    path: '/api/v1/ops/chat/channels/:id/messages',
    summary: 'A channel’s stored messages, newest first, whether or not it runs on this node (metadata withheld)',
    tag: 'ops',
    params: ChannelPath,
    rules: MESSAGE_LIST,
    row: OpsChatMessage,
    list: (ctx, request, params) => listChannelMessages(ctx, params.id!, request),
  }),
  opsList({ path: '/api/v1/ops/tournaments', summary: 'Tournaments of every status (metadata withheld)', tag: 'ops', rules: TOURNAMENT_LIST, row: OpsTournament, list: listTournaments }),
  opsLookup({ path: '/api/v1/ops/tournaments/:id', summary: 'One tournament', tag: 'ops', row: OpsTournament, get: getTournament }),
  opsList({ path: '/api/v1/ops/notifications', summary: 'Stored notifications of every player, newest first', tag: 'ops', rules: NOTIFICATION_LIST, row: Notification, list: listNotifications }),
  opsList({
    path: '/api/v1/ops/audit',
    summary: 'The audit trail of operator mutations, newest first',
    tag: 'ops',
    rules: AUDIT_LIST,
    row: AuditEntry,
    list: (ctx, request) => listAudit(ctx, request),
  }),
];
