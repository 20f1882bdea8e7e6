import { sql, type RawBuilder, type Transaction } from 'kysely';
import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { Database } from '../contracts/tables';
import { isoSeconds } from '../platform/database';
import { ExtensionExportFailed } from '../extensions/installed';
import { EXPORT_COLUMNS, type ColumnKind, type PlayerExport } from '../schemas/ops';

/**
 * `GET /ops/players/:id/export`: everything the service holds about one
 * player, table by table. Each table names the columns it gives out, so a
 * column added later (or a secret: password hashes, token hashes, guest
 * verifiers) stays out until someone lists it here. Sessions are their
 * `player_tokens` rows without the token hash: that they existed, their kind,
 * family and lifetime.
 */

export interface ExportTable {
  table: keyof typeof EXPORT_COLUMNS;
  /** The allowlist: column (or output name) → kind, as the declared schema has it. */
  columns: Readonly<Record<string, ColumnKind>>;
  /** Output names computed from the player id instead of read from a column. */
  computed?: Record<string, (playerId: string) => RawBuilder<unknown>>;
  /** Which rows are the player's. */
  where: (playerId: string) => RawBuilder<boolean>;
  /** A unique column, so the artefact reads the same twice. */
  order: string;
}

const owned =
  (...columns: string[]) =>
  (playerId: string) =>
    sql<boolean>`(${sql.join(
      columns.map((c) => sql`${sql.ref(c)} = ${playerId}`),
      sql` or `,
    )})`;

export const EXPORT_TABLES: readonly ExportTable[] = [
  {
    table: 'players',
    columns: EXPORT_COLUMNS.players,
    where: owned('id'),
    order: 'id',
  },
  {
    // provider_metadata is left out whole: for a guest it is the device verifier and its salt.
    table: 'player_identities',
    columns: EXPORT_COLUMNS.player_identities,
    where: owned('player_id'),
    order: 'id',
  },
  {
    table: 'player_tokens',
    columns: EXPORT_COLUMNS.player_tokens,
    where: owned('user_id'),
    order: 'id',
  },
  {
    table: 'player_stats',
    columns: EXPORT_COLUMNS.player_stats,
    where: owned('player_id'),
    order: 'player_id',
  },
  {
    table: 'friendships',
    columns: EXPORT_COLUMNS.friendships,
    where: owned('player_id', 'friend_id'),
    order: 'id',
  },
  {
    table: 'groups',
    columns: EXPORT_COLUMNS.groups,
    where: owned('creator_id'),
    order: 'id',
  },
  {
    table: 'group_members',
    columns: EXPORT_COLUMNS.group_members,
    where: owned('player_id'),
    order: 'id',
  },
  {
    table: 'group_requests',
    columns: EXPORT_COLUMNS.group_requests,
    where: owned('player_id', 'invited_by'),
    order: 'id',
  },
  {
    table: 'chat_messages',
    columns: EXPORT_COLUMNS.chat_messages,
    where: owned('sender_id', 'recipient_id'),
    order: 'id',
  },
  {
    table: 'notifications',
    columns: EXPORT_COLUMNS.notifications,
    where: owned('player_id'),
    order: 'id',
  },
  {
    table: 'wallets',
    columns: EXPORT_COLUMNS.wallets,
    where: owned('player_id'),
    order: 'id',
  },
  {
    table: 'transactions',
    columns: EXPORT_COLUMNS.transactions,
    where: (playerId) => sql<boolean>`wallet_id in (select id from wallets where player_id = ${playerId})`,
    order: 'id',
  },
  {
    table: 'player_items',
    columns: EXPORT_COLUMNS.player_items,
    where: owned('player_id'),
    order: 'id',
  },
  {
    table: 'iap_transactions',
    columns: EXPORT_COLUMNS.iap_transactions,
    where: owned('player_id'),
    order: 'id',
  },
  {
    table: 'cloud_saves',
    columns: EXPORT_COLUMNS.cloud_saves,
    where: owned('player_id'),
    order: 'id',
  },
  {
    table: 'storage',
    columns: EXPORT_COLUMNS.storage,
    where: owned('player_id'),
    order: 'id',
  },
  {
    table: 'leaderboard_entries',
    columns: EXPORT_COLUMNS.leaderboard_entries,
    where: owned('player_id'),
    order: 'id',
  },
  {
    table: 'tournament_entrants',
    columns: EXPORT_COLUMNS.tournament_entrants,
    where: owned('player_id'),
    order: 'tournament_id',
  },
  {
    table: 'tournament_standings',
    columns: EXPORT_COLUMNS.tournament_standings,
    where: owned('player_id'),
    order: 'tournament_id',
  },
  {
    // The roster names other players, so only the player's own match list goes out.
    table: 'match_records',
    columns: EXPORT_COLUMNS.match_records,
    where: (playerId) => sql<boolean>`players @> jsonb_build_array(${playerId}::text)`,
    order: 'id',
  },
  {
    // Only the player's own ballot, not how everyone else voted.
    table: 'votes',
    columns: EXPORT_COLUMNS.votes,
    computed: { choice: (playerId) => sql`votes_cast -> ${playerId}::text` },
    where: (playerId) => sql<boolean>`votes_cast ? ${playerId}::text`,
    order: 'id',
  },
];

export type ExportRow = Record<string, unknown>;

/** Tags a failure with the table whose read raised it, for the log line. */
class TableReadFailed extends Error {
  constructor(
    readonly table: string,
    override readonly cause: unknown,
  ) {
    super(`reading ${table} failed`);
  }
}

/**
 * Reads every table in one read-only, repeatable-read transaction, so the
 * artefact is one consistent picture even while the player plays. Any failed
 * read answers 500 `ops.export_incomplete` and nothing else: a partial export
 * would look complete to whoever receives it.
 */
export async function exportPlayer(ctx: Pick<Ctx, 'db' | 'clock' | 'log' | 'extensions'>, playerId: string, actorId: string): Promise<PlayerExport> {
  let read: { tables: Record<string, ExportRow[]>; extensions: Record<string, unknown> } | null;
  try {
    read = await ctx.db
      .transaction()
      .setIsolationLevel('repeatable read')
      .execute(async (trx) => {
        const out: Record<string, ExportRow[]> = {};
        for (const t of EXPORT_TABLES) {
          const rows = await readTable(trx, t, playerId);
          // No `players` row, nobody to export; that table is listed first, so a missing player costs one read.
          if (t.table === 'players' && rows.length === 0) return null;
          out[t.table] = rows;
        }
        // In the same snapshot, so an extension's part agrees with the tables.
        const extensions = (await ctx.extensions?.exportAll(trx, playerId)) ?? {};
        return { tables: out, extensions };
      });
  } catch (err) {
    const table = err instanceof TableReadFailed ? err.table : null;
    const extension = err instanceof ExtensionExportFailed ? err.extension : null;
    const cause = err instanceof TableReadFailed || err instanceof ExtensionExportFailed ? err.cause : err;
    ctx.log.error('ops_export_failed', { player_id: playerId, actor_id: actorId, table, extension, error: cause instanceof Error ? cause.message : String(cause) });
    throw new ApiError(
      'ops.export_incomplete',
      'The export could not read everything held about the player; nothing was returned.',
      table ? { table } : extension ? { extension } : {},
    );
  }
  if (!read) throw new ApiError('ops.not_found', 'No such player.');
  ctx.log.info('ops_player_exported', { player_id: playerId, actor_id: actorId });
  return { player_id: playerId, exported_at: isoSeconds(new Date(ctx.clock.now()))!, tables: read.tables, extensions: read.extensions };
}

async function readTable(trx: Transaction<Database>, t: ExportTable, playerId: string): Promise<ExportRow[]> {
  const selected = Object.keys(t.columns).map((name) => {
    const computed = t.computed?.[name];
    return computed ? sql`${computed(playerId)} as ${sql.ref(name)}` : sql.ref(name);
  });
  try {
    const { rows } = await sql<ExportRow>`select ${sql.join(selected)} from ${sql.table(t.table)} where ${t.where(playerId)} order by ${sql.ref(t.order)}`.execute(trx);
    return rows.map((row) => shape(t, row));
  } catch (err) {
    throw new TableReadFailed(t.table, err);
  }
}

function shape(t: ExportTable, row: ExportRow): ExportRow {
  const out: ExportRow = {};
  for (const [name, kind] of Object.entries(t.columns)) {
    const value = row[name];
    out[name] = value === null || value === undefined ? null : convert(kind, value);
  }
  return out;
}

function convert(kind: ColumnKind, value: unknown): unknown {
  switch (kind) {
    case 'time':
      return isoSeconds(value as Date | string);
    case 'int':
      return Number(value);
    case 'bool':
      return Boolean(value);
    case 'id':
    case 'text':
      return String(value);
    case 'json':
      return value;
  }
}
