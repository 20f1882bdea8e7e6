import type { Transaction } from 'kysely';
import type { Ctx } from '../contracts/context';
import { isUniqueViolation, jsonb } from '../platform/database';
import { registerErasable } from '../changes/erasure';
import { ApiError, rateLimited } from '../contracts/errors';
import type { Database } from '../contracts/tables';
import type { NewAccount, PasswordLogin, SignIn, TokenPair } from '../schemas/accounts';
import { issueTokenPair } from './tokens';

/** Password accounts: register and login. */

registerErasable(
  { table: 'player_identities', column: 'player_id', mode: 'delete' },
  { table: 'player_tokens', column: 'user_id', mode: 'delete' },
  { table: 'player_stats', column: 'player_id', mode: 'delete' },
);

export interface NewPlayer {
  username: string;
  displayName: string;
  /** Null for guests and provider-only accounts. */
  hashedPassword: string | null;
}

/**
 * The one way a player row comes to exist (register, provider first sign-in,
 * guest create): the player and its stats row, inside the caller's
 * transaction. A taken username surfaces as the unique violation.
 */
export async function insertPlayer(trx: Transaction<Database>, ctx: Pick<Ctx, 'ids' | 'clock'>, player: NewPlayer): Promise<string> {
  const playerId = ctx.ids.uuid();
  const now = new Date(ctx.clock.now());
  await trx
    .insertInto('players')
    .values({
      id: playerId,
      username: player.username,
      display_name: player.displayName,
      hashed_password: player.hashedPassword,
      metadata: jsonb({}),
      updated_at: now,
    })
    .execute();
  await trx.insertInto('player_stats').values({ player_id: playerId, metadata: jsonb({}), updated_at: now }).execute();
  return playerId;
}

/**
 * Creates a password account with its stats row and first token pair in one
 * transaction. The caller has run the client gate, checked the registration
 * posture and applied the account rules, in that order, so a refused request
 * never costs a hash.
 */
export async function registerWithPassword(ctx: Ctx, account: NewAccount): Promise<SignIn> {
  const hashed = await ctx.passwords.hash(account.password);
  try {
    return await ctx.db.transaction().execute(async (trx) => {
      const playerId = await insertPlayer(trx, ctx, {
        username: account.username,
        displayName: account.display_name ?? account.username,
        hashedPassword: hashed,
      });
      const pair = await issueOrFail(ctx, () => issueTokenPair(trx, ctx, playerId));
      return { player_id: playerId, ...pair, username: account.username };
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new ApiError('auth.username_taken', 'That username is taken.', { field: 'username' });
    throw err;
  }
}

/**
 * Password login. Every refusal (unknown username, wrong password, an account
 * without a password, a banned account) is the same 401 after the same one
 * key derivation, so neither status nor timing tells which it was.
 */
export async function loginWithPassword(ctx: Ctx, { username, password }: PasswordLogin): Promise<SignIn> {
  // Refused before the derivation, whether or not the account exists, so the
  // limit neither reveals accounts nor lets a locked account be probed.
  const failures = ctx.limits.check('login_failures', username);
  if (!failures.ok) throw rateLimited(failures.retryAfterMs);
  let player: { id: string; username: string; hashed_password: string | null; banned_at: Date | null } | undefined;
  const matches = await ctx.passwords.verify(password, async () => {
    player = await ctx.db
      .selectFrom('players')
      .select(['id', 'username', 'hashed_password', 'banned_at'])
      .where('username', '=', username)
      .executeTakeFirst();
    return player?.hashed_password ?? null;
  });
  if (!player || !matches || player.banned_at !== null) {
    ctx.limits.take('login_failures', username);
    throw new ApiError('auth.invalid_credentials', 'Wrong username or password.');
  }
  const { id, username: name } = player;
  const pair = await issueOrFail(ctx, () => issueTokenPair(ctx.db, ctx, id));
  return { player_id: id, ...pair, username: name };
}

/** Token issuance failures answer `auth.token_issue_failed` on every sign-in route. */
export async function issueOrFail(ctx: Ctx, issue: () => Promise<TokenPair>): Promise<TokenPair> {
  try {
    return await issue();
  } catch (err) {
    ctx.log.error('token_issue_failed', { error: err instanceof Error ? err.message : String(err) });
    throw new ApiError('auth.token_issue_failed', 'Could not issue tokens; try again.');
  }
}
