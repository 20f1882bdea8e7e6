import type { ColumnType, Generated } from 'kysely';

/**
 * The one kysely `Database` type. Each domain adds its tables here, next to
 * the migration that creates them.
 */
type Timestamp = ColumnType<Date, Date | string, Date | string>;
type CreatedAt = ColumnType<Date, Date | string | undefined, never>;
type Json<T = Record<string, unknown>> = ColumnType<T, unknown, unknown>;

export interface PlayersTable {
  id: string;
  username: string;
  display_name: string | null;
  avatar_url: string | null;
  hashed_password: string | null;
  metadata: Json;
  banned_at: Timestamp | null;
  inserted_at: CreatedAt;
  updated_at: Timestamp;
}

export interface PlayerIdentitiesTable {
  id: string;
  player_id: string;
  provider: string;
  provider_uid: string;
  provider_email: string | null;
  provider_display_name: string | null;
  provider_metadata: Json;
  inserted_at: CreatedAt;
  updated_at: Timestamp;
}

export interface PlayerTokensTable {
  id: string;
  user_id: string;
  /** SHA-256 of the bearer string, hex; the string itself is never stored. */
  token: string;
  context: 'access' | 'refresh';
  family_id: string | null;
  used_at: Timestamp | null;
  expires_at: Timestamp;
  inserted_at: CreatedAt;
}

export interface PlayerStatsTable {
  player_id: string;
  games_played: Generated<number>;
  wins: Generated<number>;
  losses: Generated<number>;
  rating: Generated<number>;
  rating_deviation: Generated<number>;
  metadata: Json;
  updated_at: Timestamp;
}

export interface OpsAuditEntriesTable {
  id: string;
  actor_id: string;
  actor_display: string;
  actor_source: string;
  actor_attested: Generated<boolean>;
  action: string;
  target_type: string | null;
  target_id: string | null;
  outcome: 'ok' | 'partial' | 'error';
  succeeded_count: Generated<number>;
  failed_count: Generated<number>;
  details: Json;
  occurred_at: Timestamp;
}

export interface MatchRecordsTable {
  id: string;
  mode: string | null;
  status: string;
  /** Bare player ids; never returned by the public API. */
  players: Json<string[]>;
  result: Json;
  metadata: Json;
  started_at: Timestamp | null;
  finished_at: Timestamp | null;
  inserted_at: CreatedAt;
}

/** Ours: what a restarted node needs to bring a persistent world back (its zones are in zone_snapshots). */
export interface PersistentWorldsTable {
  id: string;
  mode: string;
  /** bigint: the driver reads it as text. */
  seed: ColumnType<string, number | string, number | string>;
  inserted_at: CreatedAt;
}

export interface ZoneSnapshotsTable {
  id: string;
  world_id: string;
  zone_x: number;
  zone_y: number;
  /** Entities keyed by id; player ids in it stay bare after erasure. */
  entities: Json;
  zone_state: Json<unknown> | null;
  entity_timers: Json | null;
  spawner_state: Json | null;
  tick: ColumnType<string, number | string | undefined, number | string>;
  snapshot_at: Timestamp;
}

export interface FriendshipsTable {
  id: string;
  /** The requester (or, on a `blocked` row, the blocker). */
  player_id: string;
  friend_id: string;
  status: 'pending' | 'accepted' | 'blocked';
  inserted_at: CreatedAt;
  updated_at: Timestamp;
}

export interface GroupsTable {
  id: string;
  name: string;
  description: string | null;
  max_members: number;
  open: boolean;
  /** Severed (null) when the creator is erased; the group stays. */
  creator_id: string | null;
  metadata: Json;
  inserted_at: CreatedAt;
  updated_at: Timestamp;
}

export interface GroupMembersTable {
  id: string;
  group_id: string;
  player_id: string;
  role: 'owner' | 'admin' | 'moderator' | 'member';
  joined_at: Timestamp;
}

export interface GroupRequestsTable {
  id: string;
  group_id: string;
  player_id: string;
  /** `request`: the player asked to join; `invite`: an admin invited the player. */
  kind: 'request' | 'invite';
  invited_by: string | null;
  inserted_at: CreatedAt;
}

export interface ChatMessagesTable {
  id: string;
  channel_type: string;
  channel_id: string;
  sender_id: string;
  /** Direct messages only. */
  recipient_id: string | null;
  content: string;
  metadata: Json;
  sent_at: Timestamp;
}

export interface NotificationsTable {
  id: string;
  player_id: string;
  type: string;
  subject: string;
  content: Json;
  read: Generated<boolean>;
  sent_at: Timestamp;
}

export interface IapTransactionsTable {
  id: string;
  /** Severed (null) when the player is erased; the receipt stays claimed. */
  player_id: string | null;
  provider: 'apple' | 'google';
  /** Apple's `transactionId` or Google's `orderId`. */
  transaction_id: string;
  original_transaction_id: string | null;
  product_id: string | null;
  inserted_at: CreatedAt;
  /** Set once, when a script redeemed the receipt for currency (migration 0027); null until then. */
  redeemed_at: Timestamp | null;
  /** The ledger reason of that redemption. */
  redeemed_reason: string | null;
}

export interface CurrenciesTable {
  /** The catalogue's code, e.g. `gold`; wallets and listings reference it. */
  code: string;
  name: string;
  /** False once the catalogue no longer declares it: balances stay readable, nothing new is credited or sold in it. */
  active: boolean;
  metadata: Json;
  inserted_at: CreatedAt;
  updated_at: Timestamp;
}

export interface WalletsTable {
  id: string;
  player_id: string;
  currency: string;
  /** Never negative (a CHECK backs the services). */
  balance: number;
  inserted_at: CreatedAt;
  updated_at: Timestamp;
}

/** The ledger: one row per balance change. */
export interface TransactionsTable {
  id: string;
  wallet_id: string;
  /** Negative for debits. */
  amount: number;
  balance_after: number;
  reason: string;
  reference_type: string | null;
  reference_id: string | null;
  metadata: Json;
  inserted_at: CreatedAt;
}

export interface ItemDefsTable {
  id: string;
  slug: string;
  name: string;
  category: string;
  rarity: 'common' | 'uncommon' | 'rare' | 'epic' | 'legendary';
  stackable: boolean;
  metadata: Json;
  inserted_at: CreatedAt;
  updated_at: Timestamp;
}

export interface StoreListingsTable {
  id: string;
  /** The catalogue's name for the listing (ours), which keeps its id stable across edits. */
  slug: string;
  item_def_id: string;
  currency: string;
  price: number;
  active: boolean;
  valid_from: Timestamp | null;
  valid_until: Timestamp | null;
  metadata: Json;
}

export interface PlayerItemsTable {
  id: string;
  item_def_id: string;
  player_id: string;
  /** Always positive: a stack consumed to nothing is deleted. */
  quantity: number;
  metadata: Json;
  acquired_at: Timestamp;
  updated_at: Timestamp;
}

export interface CloudSavesTable {
  id: string;
  player_id: string;
  slot: string;
  data: Json<unknown>;
  /** 1 at creation, +1 per write; a write naming another version is refused. */
  version: number;
  updated_at: Timestamp;
}

export interface StorageTable {
  id: string;
  collection: string;
  key: string;
  /** Null for the owner-less namespace only game scripts reach. */
  player_id: string | null;
  value: Json<unknown>;
  version: number;
  read_perm: StoragePerm;
  write_perm: StoragePerm;
  updated_at: Timestamp;
}

export type StoragePerm = 'public' | 'owner';

export interface LeaderboardEntriesTable {
  id: string;
  leaderboard_id: string;
  player_id: string;
  /** 64-bit: select it as text (the drivers read int8 as a JavaScript number), write a decimal string. */
  score: ColumnType<number, string, string>;
  sub_score: ColumnType<number, string | undefined, string>;
  metadata: Json;
  updated_at: Timestamp;
}

export interface Database {
  players: PlayersTable;
  player_identities: PlayerIdentitiesTable;
  player_tokens: PlayerTokensTable;
  player_stats: PlayerStatsTable;
  ops_audit_entries: OpsAuditEntriesTable;
  match_records: MatchRecordsTable;
  persistent_worlds: PersistentWorldsTable;
  zone_snapshots: ZoneSnapshotsTable;
  friendships: FriendshipsTable;
  groups: GroupsTable;
  group_members: GroupMembersTable;
  group_requests: GroupRequestsTable;
  chat_messages: ChatMessagesTable;
  notifications: NotificationsTable;
  currencies: CurrenciesTable;
  wallets: WalletsTable;
  transactions: TransactionsTable;
  item_defs: ItemDefsTable;
  store_listings: StoreListingsTable;
  player_items: PlayerItemsTable;
  iap_transactions: IapTransactionsTable;
  votes: VotesTable;
  leaderboard_entries: LeaderboardEntriesTable;
  cloud_saves: CloudSavesTable;
  storage: StorageTable;
  tournaments: TournamentsTable;
  tournament_entrants: TournamentEntrantsTable;
  tournament_standings: TournamentStandingsTable;
}

/** A 64-bit integer column: node-postgres reads `bigint` as a decimal string. */
type BigIntColumn = ColumnType<string, string | bigint | number, string | bigint | number>;

export interface TournamentsTable {
  id: string;
  slug: string;
  name: string;
  leaderboard_id: string;
  max_entries: number | null;
  entry_fee: Json;
  rewards: Json;
  status: 'pending' | 'active' | 'finished' | 'cancelled';
  start_at: Timestamp;
  end_at: Timestamp;
  metadata: Json;
  finished_at: Timestamp | null;
  inserted_at: CreatedAt;
  updated_at: Timestamp;
}

export interface TournamentEntrantsTable {
  tournament_id: string;
  player_id: string;
  fee_currency: string | null;
  fee_amount: number;
  joined_at: Timestamp;
}

export interface TournamentStandingsTable {
  tournament_id: string;
  rank: number;
  player_id: string;
  score: BigIntColumn;
  sub_score: BigIntColumn;
  reward: Json;
}

/** A closed vote; `match_id` is a match's or a world's id (no foreign key). */
export interface VotesTable {
  id: string;
  match_id: string;
  template: string;
  method: string;
  options: Json<{ id: string; label: string }[]>;
  /** Voter id → option id, or a list of them (approval, ranked). */
  votes_cast: Json<Record<string, string | string[]>>;
  result: Json;
  distribution: Json<Record<string, number>>;
  turnout: number;
  eligible_count: number;
  window_ms: number;
  visibility: 'live' | 'hidden';
  status: 'resolved' | 'vetoed' | 'cancelled';
  opened_at: Timestamp | null;
  closed_at: Timestamp | null;
  inserted_at: CreatedAt;
}
