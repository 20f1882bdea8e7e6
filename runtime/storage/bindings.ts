import type { Ctx } from '../contracts/context';
import { CommitAbandoned, guardOf } from '../platform/commit-guard';
import type { AwaitedBinding, JsonValue } from '../lua/host-interface';
import { databaseFault, isForeignKeyViolation } from '../platform/database';
import { isUuid } from '../platform/ids';
import { fitsStoredValue, NAME_MAX, StoredName } from '../schemas/storage';
import { findObject, putObject, type ObjectAddress, type StoredRow } from './storage';

/**
 * `game.storage.*` for match and RPC scripts (`get`/`set` owner-less, `player_get`/`player_set` a player's). Scripts
 * are the server: they read and write any player's rows whatever the perms,
 * and they alone reach the owner-less namespace (`get`/`set`). A script write
 * keeps the perms of an existing row (only its owner sets them, over REST);
 * a row it creates is `owner`/`owner`. The REST bound applies: a value over
 * 262144 bytes encoded answers `{error = "value_too_large"}`.
 *
 * Answers are envelopes: `get` → `{ok = value}`, `set` → `{ok = row}` (without
 * `id` and `updated_at`), or `{error = reason}` with `not_found`,
 * `player_not_found`, `value_too_large`, `database_unavailable`; wrong
 * arguments answer `{error = "<usage>"}`.
 */

const GET = 'game.storage.get(collection, key)';
const SET = 'game.storage.set(collection, key, value)';
const PLAYER_GET = 'game.storage.player_get(player_id, collection, key)';
const PLAYER_SET = 'game.storage.player_set(player_id, collection, key, value)';
const NAMES = `collection and key must be strings of 1-${NAME_MAX} characters`;

function isName(v: JsonValue | undefined): v is string {
  return typeof v === 'string' && v !== '' && StoredName.safeParse(v).success;
}

/** The row as scripts see it: without `id`, `inserted_at`, `updated_at`, as every binding's result rows. */
function rowForLua(row: StoredRow): JsonValue {
  return {
    collection: row.collection,
    key: row.key,
    player_id: row.player_id,
    value: row.value as JsonValue,
    version: row.version,
    read_perm: row.read_perm,
    write_perm: row.write_perm,
  };
}

function failure(err: unknown): JsonValue {
  // Nobody reads the answer to an abandoned call; say what happened anyway.
  if (err instanceof CommitAbandoned) return { error: 'binding_timeout' };
  // The owner named by a script does not exist (the foreign key refused the row).
  if (isForeignKeyViolation(err)) return { error: 'player_not_found' };
  if (databaseFault(err)) return { error: 'database_unavailable' };
  throw err;
}

type Parsed = { address: ObjectAddress; value: JsonValue | undefined } | { answer: JsonValue };

/** `[player_id,] collection, key[, value]` → the address, or the envelope a bad argument answers. */
function parse(args: JsonValue[], owned: boolean, usage: string): Parsed {
  const [owner, rest] = owned ? [args[0], args.slice(1)] : [null, args];
  const [collection, key, value] = rest;
  if (owned && typeof owner !== 'string') return { answer: { error: `${usage}: player_id must be a string` } };
  if (!isName(collection) || !isName(key)) return { answer: { error: `${usage}: ${NAMES}` } };
  if (typeof owner === 'string' && !isUuid(owner.toLowerCase())) return { answer: { error: 'player_not_found' } };
  return { address: { owner: typeof owner === 'string' ? owner.toLowerCase() : null, collection, key }, value };
}

function reader(ctx: Pick<Ctx, 'db'>, owned: boolean, usage: string): AwaitedBinding {
  return async (args) => {
    const parsed = parse(args, owned, usage);
    if ('answer' in parsed) return parsed.answer;
    try {
      const row = await findObject(ctx.db, parsed.address);
      return row ? { ok: row.value as JsonValue } : { error: 'not_found' };
    } catch (err) {
      return failure(err);
    }
  };
}

function writer(ctx: Pick<Ctx, 'db' | 'ids' | 'clock'>, owned: boolean, usage: string): AwaitedBinding {
  return async (args, _caller, claim) => {
    const parsed = parse(args, owned, usage);
    if ('answer' in parsed) return parsed.answer;
    const value = parsed.value ?? {};
    if (!fitsStoredValue(value)) return { error: 'value_too_large' };
    try {
      return { ok: rowForLua(await putObject(ctx, parsed.address, value, undefined, guardOf(claim))) };
    } catch (err) {
      return failure(err);
    }
  };
}

export function storageBindings(ctx: Pick<Ctx, 'db' | 'ids' | 'clock'>): Record<string, AwaitedBinding> {
  return {
    get: reader(ctx, false, GET),
    set: writer(ctx, false, SET),
    player_get: reader(ctx, true, PLAYER_GET),
    player_set: writer(ctx, true, PLAYER_SET),
  };
}
