import { sql, type Kysely } from 'kysely';

// "Which match records name this player" (`players @> '["<id>"]'`) is asked by
// the console's player page, the export, the erasure and the vote routes; without
// an index each of them scans every record. jsonb_path_ops: only containment is asked.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX match_records_players ON match_records USING gin (players jsonb_path_ops)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX match_records_players`.execute(db);
}
