import { z } from 'zod';
import { isUuid } from '../platform/ids';
import type { Database } from '../contracts/tables';
import { IsoTime, JsonObject, Uuid } from './common';
import { Tournament } from './tournaments';
import { coded, ruled } from './rules';

/**
 * The operator plane's messages: the list query every ops list takes, the
 * list and lookup envelopes, and the rows. A list's query is read by
 * runtime/ops/lists.ts under the route's rules; the schema here declares it
 * for the API document and accepts any text, so the one reader decides.
 */

export type Order = 'asc' | 'desc';
/** `id`: a UUID column; anything else is 400 `ops.invalid_filter`. `text`: equality. `boolean`: `true` or `false` only. */
export type FilterKind = 'id' | 'text' | 'boolean';

/** A list's rules as data, declared by its route and read by runtime/ops/lists.ts. */
export interface ListRules<F extends string = string> {
  /** Fields a caller may sort on. */
  sorts: readonly F[];
  /** The unique field every order ends on, so a page boundary never splits ties differently twice. */
  unique: F;
  /** The order when the caller names no sort. */
  default: { sort: F; order: Order };
  filters?: Partial<Record<F, FilterKind>>;
  /** Fields `q` searches, case-insensitively, as a substring; none: the list takes no `q`. */
  q?: readonly F[];
}

export const LIMIT_DEFAULT = 50;
export const LIMIT_MAX = 200;
export const PAGE_MAX = 10_000;
/** No window reaches past this row, however the caller asks. */
export const DEPTH_MAX = 100_000;
/** A text filter or search longer than this names nothing stored; it is dropped. */
export const FILTER_MAX_CHARS = 255;

/** Guests one purge call erases, unless it asks for another number within the bound. */
export const PURGE_LIMIT_DEFAULT = 500;
export const PURGE_LIMIT_MAX = 5000;

/** Match records on the console's player page: the newest few, as the page lists them. */
export const RECENT_MATCHES = 10;

const text = (description: string) => z.string().optional().meta({ description });

/** The shared list parameters, plus the route's own filters and search. */
export function listQuery(rules: ListRules) {
  const shape: Record<string, z.ZodType<string | undefined>> = {
    limit: text(`rows per page, ${1}-${LIMIT_MAX} (default ${LIMIT_DEFAULT}); a malformed number means the default`),
    page: text(`1-based page, at most ${PAGE_MAX}; wins over offset`),
    offset: text(`rows to skip, 0-${DEPTH_MAX}, snapped down to a multiple of limit; no window reaches past row ${DEPTH_MAX}`),
    sort: text(`one of: ${rules.sorts.join(', ')} (default ${rules.default.sort}); anything else is 400 ops.invalid_sort with details.field. Ties end on ${rules.unique}`),
    order: text(`asc or desc, any case (default ${rules.default.order} without a sort, asc with one); anything else is 400 ops.invalid_sort with details.order`),
  };
  if (rules.q && rules.q.length > 0) {
    shape.q = text(`case-insensitive substring of ${rules.q.join(' or ')}; % and _ match only themselves; empty or over ${FILTER_MAX_CHARS} characters is ignored`);
  }
  for (const [name, kind] of Object.entries(rules.filters ?? {})) {
    shape[name] = text(
      kind === 'id'
        ? 'exact id; a value that is not a UUID is 400 ops.invalid_filter'
        : kind === 'boolean'
          ? '`true` or `false`; any other value is ignored'
          : `exact value; empty or over ${FILTER_MAX_CHARS} characters is ignored`,
    );
  }
  return z.object(shape);
}

/** A lookup's id: not a UUID is 400 `ops.invalid_id` (a well-formed id that names nothing is 404 `ops.not_found`). */
export const OpsIdPath = z.object({
  id: z
    .string()
    .transform((s) => s.toLowerCase())
    .refine((s) => isUuid(s), coded('ops.invalid_id', 'The id is not a UUID.'))
    .meta({ format: 'uuid' }),
});

export const PageInfo = z.object({
  limit: z.number().int(),
  offset: z.number().int().meta({ description: 'the offset actually used, after snapping' }),
  total: z.number().int().meta({ description: 'rows matching the filters, over every page' }),
});

/** `{data: [row...], page: {limit, offset, total}}`. */
export function listOf<R extends z.ZodType>(row: R) {
  return z.object({ data: z.array(row), page: PageInfo });
}

/** `{data: row}`. */
export function oneOf<R extends z.ZodType>(row: R) {
  return z.object({ data: row });
}

const figure = (description: string) => z.number().nullable().meta({ description });

/** One node's health (runtime/ops/stats.ts); the process figures are null on a host that does not measure them. */
export const OpsStats = z.object({
  node: z.string().meta({ description: '<hostname>:<pid> of the answering process' }),
  online_players: z.number().int().nullable().meta({ description: 'players with a live socket on any node of the fleet (this node alone without Redis); null when presence is not running' }),
  uptime_ms: figure('process uptime'),
  event_loop_lag_p50_ms: figure('event-loop delay over the last 10 s window, median'),
  event_loop_lag_p99_ms: figure('event-loop delay, 99th percentile'),
  event_loop_lag_max_ms: figure('event-loop delay, worst'),
  event_loop_utilization: figure('share of the window the event loop was busy, 0 to 1'),
  memory_rss: figure('resident set size, bytes'),
  memory_heap_used: figure('JavaScript heap in use, bytes'),
  memory_heap_total: figure('JavaScript heap reserved, bytes'),
  memory_external: figure('memory of native objects bound to JavaScript, bytes (array buffers included)'),
  memory_array_buffers: figure('array buffers and shared array buffers, bytes'),
  active_handles: figure('handles and requests keeping the event loop alive (sockets, timers, files)'),
  script_workers: figure('worker threads running game scripts'),
  live_matches: figure('matches running on this node'),
  live_worlds: figure('worlds running on this node'),
  sockets: figure('open WebSocket connections, authenticated or not'),
  tick_lateness_p99_ms: figure('match tick lateness since the node started, 99th percentile'),
  matchmaker_waiting: z.number().int().nullable().meta({ description: 'tickets waiting across modes, from the last published sample' }),
});
export type OpsStats = z.output<typeof OpsStats>;

const Capability = z.object({ name: z.string(), enabled: z.boolean() });
const Component = z.object({ name: z.string(), version: z.string(), capabilities: z.array(Capability) });
export const Features = z.object({ core: Component, extensions: z.array(Component) });
export type Features = z.output<typeof Features>;

/** An audit row (decision 0037): who, through which credential, did what to what, with what outcome. */
export const AuditEntry = z.object({
  id: Uuid,
  actor_id: z.string(),
  actor_display: z.string(),
  actor_source: z.string(),
  actor_attested: z.boolean(),
  action: z.string(),
  target_type: z.string().nullable(),
  target_id: z.string().nullable(),
  outcome: z.enum(['ok', 'partial', 'error']),
  succeeded_count: z.number().int(),
  failed_count: z.number().int(),
  details: JsonObject,
  occurred_at: IsoTime,
});
export type AuditEntry = z.output<typeof AuditEntry>;

/** An item definition (the catalogue's), as operators list it. */
export const ItemDefinition = z.object({
  id: Uuid,
  slug: z.string(),
  name: z.string(),
  category: z.string(),
  rarity: z.string(),
  inserted_at: IsoTime,
  updated_at: IsoTime,
});
export type ItemDefinition = z.output<typeof ItemDefinition>;

/** A tournament without its metadata, with `live`: the node's clock is carrying it (active, end ahead). */
export const OpsTournament = Tournament.omit({ metadata: true }).extend({ live: z.boolean() });
export type OpsTournament = z.output<typeof OpsTournament>;

/** A stored chat message; its metadata is withheld. */
export const OpsChatMessage = z.object({
  id: Uuid,
  channel_type: z.string(),
  channel_id: z.string(),
  sender_id: Uuid,
  content: z.string(),
  sent_at: IsoTime,
});
export type OpsChatMessage = z.output<typeof OpsChatMessage>;

/** A chat channel running on this node, with its distinct players joined. */
export const ChatChannel = z.object({ channel_id: z.string(), members: z.number().int() });
export type ChatChannel = z.output<typeof ChatChannel>;

/** A chat channel's path id: any channel id the service could have stored history under. */
export const ChannelPath = z.object({ id: z.string().min(1).max(256).meta({ description: 'a chat channel id, e.g. global:lobby' }) });

/** A leaderboard as operators see it: live in this node's memory, stored in the table, or both. */
export const OpsBoard = z.object({
  board_id: z.string(),
  entries: z.number().int(),
  top_score: z.number().nullable().meta({ description: 'the best score under the board’s order; null when empty' }),
  updated_at: IsoTime.nullable(),
  live: z.boolean().meta({ description: 'held in this node’s memory' }),
});
export type OpsBoard = z.output<typeof OpsBoard>;

/** A stored entry with its place on the whole board. */
export const OpsBoardEntry = z.object({
  id: Uuid,
  leaderboard_id: z.string(),
  player_id: Uuid,
  score: z.number(),
  sub_score: z.number(),
  rank: z.number().int().meta({ description: 'position on the whole board, in the board’s order, not on this page' }),
  updated_at: IsoTime,
});
export type OpsBoardEntry = z.output<typeof OpsBoardEntry>;

export const BoardPath = z.object({ id: z.string().min(1).max(255).meta({ description: 'a board id' }) });

export const MatchmakerMode = z.object({
  mode: z.string(),
  waiting: z.number().int(),
  oldest_wait_ms: z.number().int(),
  average_wait_ms: z.number().int(),
});
export type MatchmakerMode = z.output<typeof MatchmakerMode>;

export const MatchmakerQueue = z.object({
  waiting: z.number().int(),
  modes: z.number().int(),
  sampled_at: z.number().int().nullable().meta({ description: 'epoch ms of the sample; null before the first' }),
  age_ms: z.number().int().nullable(),
});

/** The matchmaker list: the per-mode rows, and the whole queue beside them. */
export const MatchmakerList = listOf(MatchmakerMode).extend({ queue: MatchmakerQueue });

/** How an exported column is given out; the rows' schema and the export's reader both follow it. */
export type ColumnKind = 'id' | 'text' | 'int' | 'bool' | 'time' | 'json';

/**
 * The export's allowlist, table by table in the artefact's order: each column
 * (or output name) it gives out, and how. A column added later (or a secret:
 * password hashes, token hashes, guest verifiers) stays out until it is listed
 * here; runtime/ops/export.ts says which rows are the player's.
 */
export const EXPORT_COLUMNS = {
  players: { id: 'id', username: 'text', display_name: 'text', avatar_url: 'text', metadata: 'json', banned_at: 'time', inserted_at: 'time', updated_at: 'time' },
  player_identities: { id: 'id', provider: 'text', provider_uid: 'text', provider_email: 'text', provider_display_name: 'text', inserted_at: 'time', updated_at: 'time' },
  player_tokens: { id: 'id', context: 'text', family_id: 'id', used_at: 'time', expires_at: 'time', inserted_at: 'time' },
  player_stats: { games_played: 'int', wins: 'int', losses: 'int', rating: 'int', rating_deviation: 'int', metadata: 'json', updated_at: 'time' },
  friendships: { id: 'id', player_id: 'id', friend_id: 'id', status: 'text', inserted_at: 'time', updated_at: 'time' },
  groups: { id: 'id', name: 'text', description: 'text', max_members: 'int', open: 'bool', creator_id: 'id', metadata: 'json', inserted_at: 'time', updated_at: 'time' },
  group_members: { id: 'id', group_id: 'id', role: 'text', joined_at: 'time' },
  group_requests: { id: 'id', group_id: 'id', player_id: 'id', kind: 'text', invited_by: 'id', inserted_at: 'time' },
  chat_messages: { id: 'id', channel_type: 'text', channel_id: 'text', sender_id: 'id', recipient_id: 'id', content: 'text', metadata: 'json', sent_at: 'time' },
  notifications: { id: 'id', type: 'text', subject: 'text', content: 'json', read: 'bool', sent_at: 'time' },
  wallets: { id: 'id', currency: 'text', balance: 'int', inserted_at: 'time', updated_at: 'time' },
  transactions: { id: 'id', wallet_id: 'id', amount: 'int', balance_after: 'int', reason: 'text', reference_type: 'text', reference_id: 'text', metadata: 'json', inserted_at: 'time' },
  player_items: { id: 'id', item_def_id: 'id', quantity: 'int', metadata: 'json', acquired_at: 'time', updated_at: 'time' },
  iap_transactions: { id: 'id', provider: 'text', transaction_id: 'text', original_transaction_id: 'text', product_id: 'text', inserted_at: 'time', redeemed_at: 'time', redeemed_reason: 'text' },
  cloud_saves: { id: 'id', slot: 'text', data: 'json', version: 'int', updated_at: 'time' },
  storage: { id: 'id', collection: 'text', key: 'text', value: 'json', version: 'int', read_perm: 'text', write_perm: 'text', updated_at: 'time' },
  leaderboard_entries: { id: 'id', leaderboard_id: 'text', score: 'int', sub_score: 'int', metadata: 'json', updated_at: 'time' },
  tournament_entrants: { tournament_id: 'id', fee_currency: 'text', fee_amount: 'int', joined_at: 'time' },
  tournament_standings: { tournament_id: 'id', rank: 'int', score: 'int', sub_score: 'int', reward: 'json' },
  match_records: { id: 'id', mode: 'text', status: 'text', result: 'json', started_at: 'time', finished_at: 'time', inserted_at: 'time' },
  votes: { id: 'id', match_id: 'text', template: 'text', method: 'text', status: 'text', choice: 'json', opened_at: 'time', closed_at: 'time' },
} as const satisfies { readonly [T in keyof Database]?: Readonly<Record<string, ColumnKind>> };

const COLUMN_SCHEMAS: Record<ColumnKind, z.ZodType> = {
  id: z.string().nullable(),
  text: z.string().nullable(),
  int: z.number().nullable(),
  bool: z.boolean().nullable(),
  time: IsoTime.nullable(),
  json: z.unknown(),
};

/** A table's rows hold its allowlisted columns and nothing else: with response checks on, a column that slipped in is a 500. */
function exportRows(columns: Readonly<Record<string, ColumnKind>>) {
  return z.array(z.strictObject(Object.fromEntries(Object.entries(columns).map(([name, kind]) => [name, COLUMN_SCHEMAS[kind]]))));
}

/** Everything held about one player (runtime/ops/export.ts), keyed by table. */
export const PlayerExport = z.object({
  player_id: Uuid,
  exported_at: IsoTime,
  tables: z.strictObject(Object.fromEntries(Object.entries(EXPORT_COLUMNS).map(([table, columns]) => [table, exportRows(columns)]))),
  extensions: z.record(z.string(), z.unknown()).meta({ description: 'per installed extension (by name), its exported data, or `{skipped: true, reason: "no_export_hook"}` for one without an export hook; empty when none is installed' }),
});
export type PlayerExport = z.output<typeof PlayerExport>;

/** What the console's player page draws (runtime/ops/summary.ts): counts and short lists, far less than the export. */
export const PlayerSummary = z.object({
  player_id: Uuid,
  providers: z.array(z.string()).meta({ description: 'linked identity providers by name (never their ids), in link order' }),
  friends: z.number().int().meta({ description: 'accepted friendships, either direction' }),
  groups: z.number().int().meta({ description: 'groups the player is a member of' }),
  stats: z.object({ games_played: z.number().int(), wins: z.number().int() }).nullable().meta({ description: 'null before the first finished match' }),
  wallets: z.array(z.object({ currency: z.string(), balance: z.number().int() })),
  items: z.array(z.object({ item_def_id: Uuid, quantity: z.number().int(), acquired_at: IsoTime })),
  saves: z.array(z.object({ slot: z.string(), version: z.number().int(), updated_at: IsoTime })),
  storage: z.object({ objects: z.number().int(), collections: z.number().int() }),
  recent_matches: z
    .array(z.object({ id: Uuid, mode: z.string().nullable(), status: z.string(), finished_at: IsoTime.nullable() }))
    .meta({ description: `the ${RECENT_MATCHES} newest match records naming the player, newest first (no roster)` }),
});
export type PlayerSummary = z.output<typeof PlayerSummary>;

/** The operator's confirmation: the player's username, echoed. Absent or not a string is 400 `ops.confirmation_required`. */
export const OperatorEraseConfirmation = z.object({
  username: ruled(z.string({ error: "Echo the player's username in `username` to confirm the erasure." }).meta({ description: "the erased player's username, exactly" }), {
    code: 'ops.confirmation_required',
  }),
});
export type OperatorEraseConfirmation = z.output<typeof OperatorEraseConfirmation>;

export const OperatorErased = z.object({ player_id: Uuid, erased: z.literal(true) });
export type OperatorErased = z.output<typeof OperatorErased>;

const count = (description: string) => z.number().int().meta({ description });

export const GuestPurgeRequest = z.object({
  inactive_for_seconds: ruled(
    z
      .number({ error: 'inactive_for_seconds must be a whole number of seconds, 0 or more.' })
      .int({ error: 'inactive_for_seconds must be a whole number of seconds, 0 or more.' })
      .min(0, { error: 'inactive_for_seconds must be a whole number of seconds, 0 or more.' })
      .meta({ description: 'erase unclaimed guests whose guest identity was not touched for this long; 0 selects every unclaimed guest. Absent or invalid is 400 ops.invalid_cutoff' }),
    { code: 'ops.invalid_cutoff' },
  ),
  dry_run: z.boolean().optional().meta({ description: 'count only; deletes nothing (default false)' }),
  confirm_count: z.number().int().min(0).optional().meta({ description: 'required unless dry_run: the number of guests the cutoff selects now (a dry run’s `matched`); another number is 409 ops.purge_count_mismatch' }),
  limit: z.number().int().optional().meta({ description: `guests erased by this call, 1-${PURGE_LIMIT_MAX} (default ${PURGE_LIMIT_DEFAULT}); out of range is clamped` }),
});
export type GuestPurgeRequest = z.output<typeof GuestPurgeRequest>;

export const GuestPurgeResult = z.object({
  matched: count('unclaimed guests the cutoff selected when the call began'),
  deleted: count('guests erased by this call'),
  skipped: count('guests that were claimed (or seen) between selection and erasure'),
  failed: count('guests whose erasure did not commit; a later call selects them again'),
  remaining: count('guests the cutoff still selects after this call; loop while `deleted` is above zero'),
  dry_run: z.boolean(),
});
export type GuestPurgeResult = z.output<typeof GuestPurgeResult>;
