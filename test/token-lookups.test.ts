import type { KyselyPlugin, PluginTransformQueryArgs, PluginTransformResultArgs, QueryResult, RootOperationNode, UnknownRow } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenLookups } from '../host/infra/token-lookups';
import { findAccessTokens, hashToken, newToken } from '../runtime/accounts/tokens';
import { sql } from 'kysely';
import { uuidv7Source } from '../runtime/platform/ids';
import { freshDatabase } from './support/database';
import { insertPlayersWithTokens } from './support/provision';

/**
 * Counts the statements a Db runs and the most it ever had in flight at once;
 * each answer is held back `holdMs`, as a busy database holds it.
 */
class StatementCounter implements KyselyPlugin {
  constructor(private readonly holdMs = 0) {}
  started = 0;
  inFlight = 0;
  mostInFlight = 0;
  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    this.started++;
    this.mostInFlight = Math.max(this.mostInFlight, ++this.inFlight);
    return args.node;
  }
  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    if (this.holdMs > 0) await new Promise((r) => setTimeout(r, this.holdMs));
    this.inFlight--;
    return args.result;
  }
}

let database: Awaited<ReturnType<typeof freshDatabase>>;
const ids = uuidv7Source(() => Date.now());
const valid = new Map<string, string>();

beforeAll(async () => {
  database = await freshDatabase();
  for (const { id, token } of await insertPlayersWithTokens(database.db, ids, 300, 'lookup')) valid.set(token, id);
});
afterAll(async () => {
  await database.close();
});

describe('TokenLookups', () => {
  it('answers a storm of cold tokens with a few reads, never more in flight than allowed, each waiter its own answer', async () => {
    const unknown = Array.from({ length: 300 }, () => newToken());
    const asked = [...valid.keys(), ...unknown].sort(() => Math.random() - 0.5);
    const hashes = await Promise.all(asked.map((t) => hashToken(t)));
    for (const reads of [1, 3]) {
      const counter = new StatementCounter(20);
      const lookups = new TokenLookups(database.db.withPlugin(counter), reads);
      // 30 waves of 20 on successive turns of the event loop, as sockets
      // arrive, all while the first reads are still running.
      const pending: Promise<readonly [string, Awaited<ReturnType<TokenLookups['lookup']>>]>[] = [];
      for (let i = 0; i < asked.length; i++) {
        if (i % 20 === 0) await new Promise((r) => setImmediate(r));
        pending.push(lookups.lookup(hashes[i]!, Date.now()).then((found) => [asked[i]!, found] as const));
      }
      for (const [token, found] of await Promise.all(pending)) expect(found?.principal.playerId ?? null).toBe(valid.get(token) ?? null);
      expect(counter.mostInFlight).toBe(reads);
      // The first `reads` waves go alone; the rest wait and share statements of up to 200 hashes.
      expect(counter.started).toBeLessThanOrEqual(reads + Math.ceil(asked.length / 200) + reads);
    }
  });

  it('reads a lone miss at once, and the same hash asked twice in one turn once', async () => {
    const counter = new StatementCounter();
    const lookups = new TokenLookups(database.db.withPlugin(counter), 1);
    const [token, playerId] = [...valid.entries()][0]!;
    const hash = await hashToken(token);
    const [a, b] = await Promise.all([lookups.lookup(hash, Date.now()), lookups.lookup(hash, Date.now())]);
    expect(a?.principal.playerId).toBe(playerId);
    expect(b?.principal.playerId).toBe(playerId);
    expect(counter.started).toBe(1);
  });

  // The embedded database reads batches through prepared statements; the server has no prepared reads and takes the statement above.
  it.skipIf(!!process.env.DATABASE_URL)('answers through prepared reads as the one statement does, in both forms: live, unknown, expired, banned and refresh tokens', async () => {
    const read = database.readPrepared!;
    expect(read).toBeDefined();
    const entries = [...valid.entries()];
    const [[live, livePlayer], [expired], [banned, bannedPlayer], [refresh]] = entries.slice(-4) as [[string, string], [string, string], [string, string], [string, string]];
    await database.db.updateTable('player_tokens').set({ expires_at: new Date(Date.now() - 1000) }).where('token', '=', await hashToken(expired!)).execute();
    await database.db.updateTable('players').set({ banned_at: new Date() }).where('id', '=', bannedPlayer!).execute();
    await database.db.updateTable('player_tokens').set({ context: 'refresh' }).where('token', '=', await hashToken(refresh!)).execute();
    const odd = await Promise.all([live!, expired!, banned!, refresh!, newToken()].map((t) => hashToken(t)));
    const plain = await Promise.all(entries.slice(0, 30).map(([t]) => hashToken(t)));
    const lookups = new TokenLookups(database.db, 1, read);
    // Asked in one turn: five hashes go one execution each, thirty-five as one array.
    for (const hashes of [odd, [...odd, ...plain]]) {
      const expected = await findAccessTokens(database.db, hashes, Date.now());
      expect(expected.get(odd[0]!)?.principal.playerId).toBe(livePlayer);
      expect(expected.size).toBe(hashes.length - 4);
      const now = Date.now();
      expect(await Promise.all(hashes.map((h) => lookups.lookup(h, now)))).toEqual(hashes.map((h) => expected.get(h) ?? null));
    }
    // A later batch runs the statements prepared by the first.
    expect((await lookups.lookup(odd[0]!, Date.now()))?.principal.playerId).toBe(livePlayer);

    // Whatever removed the prepared statement (here every one of the session's), the call that fails says so and the next prepares it afresh.
    await sql`deallocate all`.execute(database.db);
    await expect(lookups.lookup(odd[0]!, Date.now())).rejects.toThrow(/prepared statement/);
    expect((await lookups.lookup(odd[0]!, Date.now()))?.principal.playerId).toBe(livePlayer);
  });
});
