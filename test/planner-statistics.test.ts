import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase } from './support/database';
import { insertPlayersWithTokens } from './support/provision';
import { startTestServer, type TestServer } from './support/server';

// PGlite has no autovacuum: the node's own job keeps the planner's figures
// (decision 0047). On the PostgreSQL server autovacuum does, and the node runs no job.
let s: TestServer;
let kind: 'embedded' | 'postgres';
beforeAll(async () => {
  const database = await freshDatabase();
  kind = database.kind;
  s = await startTestServer({}, { database });
});
afterAll(async () => {
  await s.close();
});

const addPlayersWithTokens = (n: number) => insertPlayersWithTokens(s.ctx.db, s.ctx.ids, n, 'stats');

/**
 * PostgreSQL hands a session's change counts to the statistics the pass reads
 * at most once a second, when the session goes idle: a statement after a
 * second's wait carries the inserts' counts over.
 */
async function countsPublished(): Promise<void> {
  await new Promise((r) => setTimeout(r, 1100));
  await sql`select 1`.execute(s.ctx.db);
}

const rowsKnown = async (table: string) =>
  Number((await sql<{ reltuples: number }>`select reltuples from pg_class where relname = ${table} and relnamespace = current_schema()::regnamespace`.execute(s.ctx.db)).rows[0]!.reltuples);

describe('planner statistics', () => {
  it('on the embedded database, analyzes the tables never analyzed or changed past the threshold, one pass at a time', async () => {
    if (kind === 'postgres') {
      expect(s.plannerStatistics).toBeNull();
      return;
    }
    await addPlayersWithTokens(2000);
    await countsPublished();
    // No figures yet: the planner guesses (a batch token lookup then walked every player, decision 0047).
    expect(await rowsKnown('players')).toBeLessThan(0);

    const first = await s.plannerStatistics!.run();
    expect(first).toEqual(expect.arrayContaining(['players', 'player_tokens']));
    expect(await rowsKnown('players')).toBe(2000);
    expect(await rowsKnown('player_tokens')).toBe(2000);

    // Nothing changed since: nothing to do.
    await countsPublished();
    expect(await s.plannerStatistics!.run()).toEqual([]);

    // 300 more players and tokens each pass 50 + a tenth of 2,000.
    await addPlayersWithTokens(300);
    await countsPublished();
    const third = await s.plannerStatistics!.run();
    expect(third).toEqual(expect.arrayContaining(['players', 'player_tokens']));
    expect(await rowsKnown('players')).toBe(2300);

    // 100 more do not (50 + 230 = 280 needed).
    await addPlayersWithTokens(100);
    await countsPublished();
    expect(await s.plannerStatistics!.run()).toEqual([]);
  });
});
