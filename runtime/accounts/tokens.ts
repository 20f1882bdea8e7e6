import { sql, type RawBuilder, type SqlBool, type Transaction } from 'kysely';
import type { Ctx, Principal, TokenResolver } from '../contracts/context';
import { bytesToBase64Url, randomBytes, sha256Hex } from '../platform/crypto';
import type { Db } from '../platform/database';
import { ApiError } from '../contracts/errors';
import type { Database } from '../contracts/tables';
import { afterCommit } from '../changes/effects';
import type { TokenPair } from '../schemas/accounts';

/**
 * Player bearer tokens. Each token is 32 random bytes,
 * base64url; the database holds only its SHA-256, so a leaked table grants no
 * session. An access token and the refresh token issued with it share a
 * `family_id`: the lineage a refresh rotates within and a reuse burns.
 */

/** What a valid access token resolves to, with its expiry so a cache never outlives it. */
export interface ResolvedAccess {
  principal: Principal;
  expiresAt: number;
}

const TOKEN_BYTES = 32;
/** Longer strings are not ours; refusing them early keeps junk from being hashed or cached. */
export const MAX_TOKEN_LENGTH = 256;

type Executor = Db | Transaction<Database>;

export function newToken(): string {
  return bytesToBase64Url(randomBytes(TOKEN_BYTES));
}

export function hashToken(token: string): Promise<string> {
  return sha256Hex(token);
}

/** Issues an access + refresh pair; a new family unless one is being rotated. */
export async function issueTokenPair(
  trx: Executor,
  ctx: Pick<Ctx, 'ids' | 'clock' | 'settings'>,
  playerId: string,
  familyId: string = ctx.ids.uuid(),
): Promise<TokenPair> {
  const access = newToken();
  const refresh = newToken();
  const now = ctx.clock.now();
  await trx
    .insertInto('player_tokens')
    .values([
      {
        id: ctx.ids.uuid(),
        user_id: playerId,
        token: await hashToken(access),
        context: 'access',
        family_id: familyId,
        expires_at: new Date(now + ctx.settings.access_token_ttl * 1000),
      },
      {
        id: ctx.ids.uuid(),
        user_id: playerId,
        token: await hashToken(refresh),
        context: 'refresh',
        family_id: familyId,
        expires_at: new Date(now + ctx.settings.refresh_token_ttl * 1000),
      },
    ])
    .execute();
  return { access_token: access, refresh_token: refresh };
}

/**
 * The uncached lookup behind `ctx.auth.resolve`: an unexpired access token of
 * a player who exists and is not banned.
 */
export async function findAccessToken(db: Db, tokenHash: string, now: number): Promise<ResolvedAccess | null> {
  return (await findAccessTokens(db, [tokenHash], now)).get(tokenHash) ?? null;
}

/**
 * `findAccessToken` for many hashes in one statement: after a deploy every
 * player reconnects at once, and one indexed `in (...)` read answers a
 * hundred of them for about the price of one.
 */
export async function findAccessTokens(db: Db, tokenHashes: readonly string[], now: number): Promise<Map<string, ResolvedAccess>> {
  const found = new Map<string, ResolvedAccess>();
  if (tokenHashes.length === 0) return found;
  // One array parameter, not one parameter per hash: the statement's text is the same for every
  // batch and the planner sees one value; on the embedded database a batch of 200 reads in
  // 12 µs a token instead of 31.
  const rows = await liveAccessTokens(db, sql<SqlBool>`t.token = any(${tokenHashes}::text[])`, now).execute();
  for (const row of rows) found.set(row.token, resolvedAccess(row));
  return found;
}

/** The access tokens matching `token` that are unexpired at `now` and belong to a player who exists and is not banned. */
function liveAccessTokens(db: Db, token: RawBuilder<SqlBool>, now: number) {
  return db
    .selectFrom('player_tokens as t')
    .innerJoin('players as p', 'p.id', 't.user_id')
    .select(['t.id', 't.token', 't.user_id', 't.expires_at'])
    .where(token)
    .where('t.context', '=', 'access')
    .where('t.expires_at', '>', new Date(now))
    .where('p.banned_at', 'is', null);
}

function resolvedAccess(row: { id: string; user_id: string; expires_at: Date | string }): ResolvedAccess {
  const expiresAt = new Date(row.expires_at).getTime();
  return { principal: { playerId: row.user_id, tokenId: row.id, expiresAt }, expiresAt };
}

/**
 * `findAccessTokens`'s read as statement texts and their parameters, for a
 * database that keeps statements prepared (the embedded one,
 * host/infra/prepared-reads.ts): `one` reads a hash, `many` an array of them.
 * Both texts come from the query above, so no form disagrees on what a live
 * token is.
 */
export interface AccessTokenStatements {
  one: { text: string; parameters(tokenHash: string, now: number): unknown[] };
  many: { text: string; parameters(tokenHashes: readonly string[], now: number): unknown[] };
  /** A row either statement returned, as the token it found and what it resolves to. */
  resolve(row: Record<string, unknown>): [tokenHash: string, access: ResolvedAccess];
}

export function accessTokenStatements(db: Db): AccessTokenStatements {
  const one = statementOf(db, (hash) => sql<SqlBool>`t.token = ${hash}`);
  const many = statementOf(db, (hash) => sql<SqlBool>`t.token = any(${[hash]}::text[])`);
  return {
    one: { text: one.text, parameters: (tokenHash, now) => one.parameters(tokenHash, now) },
    many: { text: many.text, parameters: (tokenHashes, now) => many.parameters(tokenHashes, now) },
    resolve(row) {
      const r = row as { id: string; token: string; user_id: string; expires_at: Date | string };
      return [r.token, resolvedAccess(r)];
    },
  };
}

/** The compiled query with its token and clock parameters found by value, to be filled in per call. */
function statementOf(db: Db, token: (hash: string) => RawBuilder<SqlBool>) {
  const HASH = '\u0000hash';
  const NOW = -1;
  const compiled = liveAccessTokens(db, token(HASH), NOW).compile();
  const at = (match: (p: unknown) => boolean) => {
    const found = compiled.parameters.flatMap((p, i) => (match(p) ? [i] : []));
    if (found.length !== 1) throw new Error('access token statement: expected one token and one clock parameter');
    return found[0]!;
  };
  const tokenAt = at((p) => p === HASH || (Array.isArray(p) && p[0] === HASH));
  const nowAt = at((p) => p instanceof Date && p.getTime() === NOW);
  return {
    text: compiled.sql,
    parameters(tokens: unknown, now: number): unknown[] {
      const out = [...compiled.parameters];
      out[tokenAt] = tokens;
      out[nowAt] = new Date(now);
      return out;
    },
  };
}

/** A live socket's session as the outage check reads it: its player, its access token and that token's expiry. */
export interface HeldSession {
  playerId: string;
  tokenId: string;
  /** Null when the resolver did not say. */
  expiresAt: number | null;
}

/**
 * The token ids of `sessions` that were ended since they connected: the
 * token was revoked (its row is gone), or the player was banned or erased.
 * One statement for all of them. A token past its own expiry may have been
 * swept, and a socket outlives its token, so for those only the player counts.
 */
export async function endedSessions(db: Db, sessions: readonly HeldSession[], now: number): Promise<Set<string>> {
  const ended = new Set<string>();
  if (sessions.length === 0) return ended;
  const players = [...new Set(sessions.map((s) => s.playerId))];
  const tokens = sessions.map((s) => s.tokenId);
  const rows = await db
    .selectFrom('players')
    .select(['id', sql<string>`'p'`.as('kind')])
    .where('id', 'in', players)
    .where('banned_at', 'is', null)
    .unionAll(db.selectFrom('player_tokens').select(['id', sql<string>`'t'`.as('kind')]).where('id', 'in', tokens))
    .execute();
  const live = new Set(rows.map((r) => `${r.kind}:${r.id}`));
  for (const s of sessions) {
    const tokenKept = live.has(`t:${s.tokenId}`) || (s.expiresAt !== null && s.expiresAt <= now);
    if (!live.has(`p:${s.playerId}`) || !tokenKept) ended.add(s.tokenId);
  }
  return ended;
}

/**
 * Single-use rotation: burns the presented refresh token and issues a new
 * pair in its family. Presenting a token that was already rotated revokes the
 * whole family (every access and refresh token in it) and answers 401, as
 * does anything unknown, expired or belonging to a banned player.
 */
export async function rotateRefreshToken(ctx: Ctx, refreshToken: string): Promise<TokenPair> {
  if (refreshToken.length === 0 || refreshToken.length > MAX_TOKEN_LENGTH) throw new ApiError('unauthenticated');
  const tokenHash = await hashToken(refreshToken);
  const now = ctx.clock.now();
  const outcome = await ctx.db.transaction().execute(async (trx) => {
    const row = await trx
      .selectFrom('player_tokens')
      .select(['id', 'user_id', 'family_id', 'used_at', 'expires_at'])
      .where('token', '=', tokenHash)
      .where('context', '=', 'refresh')
      .forUpdate()
      .executeTakeFirst();
    if (!row) return { kind: 'unknown' as const };
    if (row.used_at !== null) {
      const revoked = await revokeFamily(trx, row.family_id, row.id);
      return { kind: 'reused' as const, playerId: row.user_id, revoked };
    }
    if (new Date(row.expires_at).getTime() <= now) return { kind: 'unknown' as const };
    const player = await trx.selectFrom('players').select('banned_at').where('id', '=', row.user_id).executeTakeFirst();
    if (!player || player.banned_at !== null) return { kind: 'unknown' as const };
    await trx.updateTable('player_tokens').set({ used_at: new Date(now) }).where('id', '=', row.id).execute();
    const familyId = row.family_id ?? ctx.ids.uuid();
    return { kind: 'rotated' as const, pair: await issueTokenPair(trx, ctx, row.user_id, familyId) };
  });
  if (outcome.kind === 'rotated') return outcome.pair;
  if (outcome.kind === 'reused') {
    // After commit: a cache fill racing the revocation then re-reads the
    // database, and the sockets opened with the family's access tokens
    // close, so a burned family keeps no live session.
    await afterCommit(ctx, { kind: 'tokens_revoked', playerIds: [outcome.playerId], tokenIds: outcome.revoked });
    ctx.log.warn('refresh_token_reused', { player_id: outcome.playerId });
  }
  throw new ApiError('unauthenticated', 'The refresh token is invalid, expired or already used.');
}

/**
 * Logout: revokes the family of `refreshToken` and the
 * access token `accessToken`, whichever are given and known. It reports
 * nothing; the caller answers the same whatever was found.
 */
export async function revokeSession(ctx: Ctx, refreshToken: string | null, accessToken: string | null): Promise<void> {
  const refreshHash = refreshToken && refreshToken.length <= MAX_TOKEN_LENGTH ? await hashToken(refreshToken) : null;
  const accessHash = accessToken && accessToken.length <= MAX_TOKEN_LENGTH ? await hashToken(accessToken) : null;
  if (!refreshHash && !accessHash) return;
  const revoked: string[] = [];
  const players = await ctx.db.transaction().execute(async (trx) => {
    const affected = new Set<string>();
    if (refreshHash) {
      const row = await trx
        .selectFrom('player_tokens')
        .select(['id', 'user_id', 'family_id'])
        .where('token', '=', refreshHash)
        .where('context', '=', 'refresh')
        .executeTakeFirst();
      if (row) {
        revoked.push(...(await revokeFamily(trx, row.family_id, row.id)));
        affected.add(row.user_id);
      }
    }
    if (accessHash) {
      const gone = await trx
        .deleteFrom('player_tokens')
        .where('token', '=', accessHash)
        .where('context', '=', 'access')
        .returning(['id', 'user_id'])
        .executeTakeFirst();
      if (gone) {
        affected.add(gone.user_id);
        revoked.push(gone.id);
      }
    }
    return affected;
  });
  // A socket authenticated with a revoked access token closes with 1000, a normal closure.
  await afterCommit(ctx, { kind: 'tokens_revoked', playerIds: [...players], tokenIds: revoked, accessToken });
}

/**
 * Revokes every token of a player, all families (guest upgrade). The caller
 * evicts the player's cached tokens after its transaction commits.
 */
export async function revokePlayerTokens(trx: Transaction<Database>, playerId: string): Promise<void> {
  await trx.deleteFrom('player_tokens').where('user_id', '=', playerId).execute();
}

/** Deletes a refresh token's whole family (a token minted without one goes alone); answers the ids of the tokens that died. */
async function revokeFamily(trx: Transaction<Database>, familyId: string | null, tokenId: string): Promise<string[]> {
  const rows = await trx
    .deleteFrom('player_tokens')
    .where(familyId === null ? 'id' : 'family_id', '=', familyId ?? tokenId)
    .returning('id')
    .execute();
  return rows.map((r) => r.id);
}

/**
 * `ctx.auth` for a host that keeps no cache (an embedding host whose
 * isolates come and go): every resolve reads the database, so there is
 * nothing to evict.
 */
export function uncachedTokenResolver(db: Db, now: () => number): TokenResolver {
  return {
    async resolve(accessToken, beforeLookup) {
      if (accessToken.length === 0 || accessToken.length > MAX_TOKEN_LENGTH) return null;
      beforeLookup?.();
      return (await findAccessToken(db, await hashToken(accessToken), now()))?.principal ?? null;
    },
    async evictToken() {},
    evictPlayer() {},
  };
}

/**
 * Deletes tokens past their expiry, `batch` rows per statement, so the token
 * table stays the size of the live sessions. A rotated refresh token is kept
 * until it expires (reuse detection needs it); after that it is dead anyway.
 */
export async function deleteExpiredTokens(db: Db, now: number, batch = 1000): Promise<number> {
  let total = 0;
  for (;;) {
    const rows = await db
      .deleteFrom('player_tokens')
      .where('id', 'in', (eb) => eb.selectFrom('player_tokens').select('id').where('expires_at', '<=', new Date(now)).limit(batch))
      .returning('id')
      .execute();
    total += rows.length;
    if (rows.length < batch) return total;
  }
}
