import { sql } from 'kysely';
import type { Db } from '../platform/database';
import { registerErasable } from '../changes/erasure';
import type { IdSource } from '../platform/ids';
import type { Logger } from '../platform/log';
import type { EntryRow, NodeLeaderboards } from '../contracts/services';

registerErasable({ table: 'leaderboard_entries', column: 'player_id', mode: 'delete' });

/** Rows per statement, both ways: big enough to amortise a round trip, small enough to keep a statement short. */
const BATCH = 5000;

export interface FlushOutcome {
  written: number;
  /** Entries of players the table does not know (erased meanwhile, or an id a script made up): dropped from memory too. */
  dropped: number;
  failed: number;
}

/**
 * Writes every entry changed since the last flush, board by board, in
 * upserts of `BATCH` rows. The rows are taken from memory a batch at a
 * time, so the event loop is never held for a whole board. A batch that
 * fails is tried once more (an erasure committing under it makes the
 * foreign key refuse it once; the retry no longer sees the player) and
 * then given back to the next flush, which also gets everything this one
 * had not reached.
 */
export async function flushBoards(db: Db, boards: NodeLeaderboards, ids: IdSource, log: Logger): Promise<FlushOutcome> {
  const outcome: FlushOutcome = { written: 0, dropped: 0, failed: 0 };
  for (const board of [...boards.boards()]) {
    for (let from = 0; from !== -1; ) {
      const { rows: batch, next } = board.takeDirty(from, BATCH);
      from = next;
      if (batch.length === 0) continue;
      let stored: Set<string>;
      try {
        stored = await upsert(db, board.id, batch, ids).catch(() => upsert(db, board.id, batch, ids));
      } catch (err) {
        board.markDirty(batch.map((r) => r.playerId));
        outcome.failed += batch.length;
        log.error('leaderboard_flush_failed', { board_id: board.id, rows: batch.length, error: err instanceof Error ? err.message : String(err) });
        // The database is likely unreachable: the rest stays changed for the next flush.
        return outcome;
      }
      outcome.written += stored.size;
      for (const row of batch) {
        if (stored.has(row.playerId)) continue;
        board.remove(row.playerId);
        outcome.dropped++;
      }
    }
  }
  return outcome;
}

/** Upserts one batch; answers the players whose rows were written (a player the table lacks is skipped, not an error). */
async function upsert(db: Db, boardId: string, rows: EntryRow[], ids: IdSource): Promise<Set<string>> {
  // One JSON parameter for the batch: scores travel as decimal strings, so 64 bits arrive whole.
  const json = JSON.stringify(
    rows.map((r) => ({ id: ids.uuid(), player_id: r.playerId, score: r.score.toString(), sub_score: r.subScore.toString(), updated_at: new Date(r.updatedAt).toISOString() })),
  );
  const result = await sql<{ player_id: string }>`
    insert into leaderboard_entries (id, leaderboard_id, player_id, score, sub_score, updated_at)
    select v.id, ${boardId}, v.player_id, v.score, v.sub_score, v.updated_at
    from jsonb_to_recordset(${json}::jsonb) as v(id uuid, player_id uuid, score bigint, sub_score bigint, updated_at timestamptz)
    join players p on p.id = v.player_id
    on conflict (leaderboard_id, player_id)
    do update set score = excluded.score, sub_score = excluded.sub_score, updated_at = excluded.updated_at
    returning player_id`.execute(db);
  return new Set(result.rows.map((r) => r.player_id));
}

/** Fills the boards from the table (boot), in pages along the unique key. Answers the entries loaded. */
export async function reloadBoards(db: Db, boards: NodeLeaderboards): Promise<number> {
  let loaded = 0;
  let after: { board: string; player: string } | null = null;
  for (;;) {
    const page: { leaderboard_id: string; player_id: string; score: string; sub_score: string; updated_at: Date | string }[] = (
      await sql<{ leaderboard_id: string; player_id: string; score: string; sub_score: string; updated_at: Date | string }>`
        select leaderboard_id, player_id, score::text as score, sub_score::text as sub_score, updated_at
        from leaderboard_entries
        ${after ? sql`where (leaderboard_id, player_id) > (${after.board}, ${after.player}::uuid)` : sql``}
        order by leaderboard_id, player_id
        limit ${BATCH}`.execute(db)
    ).rows;
    for (const r of page) {
      boards.load(r.leaderboard_id, { playerId: r.player_id, score: BigInt(r.score), subScore: BigInt(r.sub_score), updatedAt: new Date(r.updated_at).getTime() });
    }
    loaded += page.length;
    if (page.length < BATCH) return loaded;
    const last = page[page.length - 1]!;
    after = { board: last.leaderboard_id, player: last.player_id };
  }
}
