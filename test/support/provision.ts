import { hashToken, newToken } from '../../runtime/accounts/tokens';
import { jsonb, type Db } from '../../runtime/platform/database';
import type { IdSource } from '../../runtime/platform/ids';

/**
 * Players with a live access token each, written straight to the tables 500
 * rows a statement: for tests about what many players cost, not about how
 * they sign up (a password login per player would take the test's time).
 */
export async function insertPlayersWithTokens(db: Db, ids: IdSource, n: number, prefix: string): Promise<{ id: string; token: string }[]> {
  const made: { id: string; token: string }[] = [];
  const now = Date.now();
  for (let done = 0; done < n; done += 500) {
    const players = [];
    const tokens = [];
    for (let i = done; i < Math.min(n, done + 500); i++) {
      const id = ids.uuid();
      const token = newToken();
      made.push({ id, token });
      players.push({ id, username: `${prefix}_${i}_${id.slice(-8)}`, display_name: null, hashed_password: null, metadata: jsonb({}), updated_at: new Date(now) });
      tokens.push({ id: ids.uuid(), user_id: id, token: await hashToken(token), context: 'access' as const, family_id: null, expires_at: new Date(now + 3_600_000) });
    }
    await db.insertInto('players').values(players).execute();
    await db.insertInto('player_tokens').values(tokens).execute();
  }
  return made;
}
