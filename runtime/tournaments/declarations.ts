import { sql, type Transaction } from 'kysely';
import { z } from 'zod';
import type { Ctx } from '../contracts/context';
import type { Database } from '../contracts/tables';
import { jsonb } from '../platform/database';
import { isStorableText } from '../platform/text';
import { MAX_BALANCE } from '../economy/wallets';
import { cancelTournament, parseRankRange } from './tournaments';

/**
 * Tournaments as the game declares them, in the `tournaments` section of its
 * catalogue file (docs/rest-api.md, "Tournaments"). The slug is the declaration's
 * identity: the table row it becomes keeps its id across edits and restarts.
 */

const amount = z.number().int().min(1).max(MAX_BALANCE);
const rankRange = z.string().refine((k) => parseRankRange(k) !== null, 'must be a rank ("1") or an inclusive range of ranks ("2-3"), ranks 1-999999');

export const TournamentDeclaration = z
  .strictObject({
    slug: z.string().min(1).max(64).regex(/^[A-Za-z0-9_.-]+$/, 'must be 1-64 characters of A-Z a-z 0-9 _ . -'),
    name: z.string().min(1).max(128).refine(isStorableText, 'must be storable text'),
    /** The board it scores on; default `tournament:<slug>`. */
    leaderboard: z.string().min(1).max(255).refine(isStorableText, 'must be storable text').optional(),
    max_entries: z.number().int().min(1).nullable().default(null),
    entry_fee: z.strictObject({ currency: z.string(), amount }).nullable().default(null),
    rewards: z.record(rankRange, z.record(z.string(), amount)).default({}),
    start_at: z.iso.datetime({ offset: true }),
    end_at: z.iso.datetime({ offset: true }),
    metadata: z
      .record(z.string(), z.unknown())
      .refine((m) => JSON.stringify(m).length <= 16_384, 'must encode to at most 16384 bytes')
      .default({}),
  })
  .refine((t) => Date.parse(t.start_at) < Date.parse(t.end_at), { message: 'end_at must be later than start_at', path: ['end_at'] })
  .refine((t) => !overlapping(Object.keys(t.rewards)), { message: 'reward rank ranges must not overlap', path: ['rewards'] });
export type DeclaredTournament = z.output<typeof TournamentDeclaration>;

function overlapping(keys: string[]): boolean {
  const ranges = keys.map((k) => parseRankRange(k)!).sort((a, b) => a.from - b.from);
  return ranges.some((r, i) => i > 0 && r.from <= ranges[i - 1]!.to);
}

/** The currencies a declaration names (its fee and every reward), for the catalogue's cross-check. */
export function currenciesOf(t: DeclaredTournament): string[] {
  const named = new Set<string>();
  if (t.entry_fee) named.add(t.entry_fee.currency);
  for (const tier of Object.values(t.rewards)) for (const c of Object.keys(tier)) named.add(c);
  return [...named];
}

export interface TournamentSync {
  /** Rows inserted or changed. */
  tournaments: number;
  /** Open tournaments the file no longer declares: cancelled, their fees refunded. */
  cancelled: number;
}

/**
 * Brings the tournaments table in line with the declarations, inside the
 * catalogue's sync transaction. A tournament that has not ended takes the
 * declaration's current values (times included: the clock re-reads them);
 * one that ended keeps its record. One that is no longer declared and has
 * not ended is cancelled and its entrants refunded. Rows are never deleted:
 * entrants, standings and the ledger point at them.
 */
export async function syncTournaments(trx: Transaction<Database>, ids: Ctx['ids'], declared: readonly DeclaredTournament[], now: Date): Promise<TournamentSync> {
  const counts: TournamentSync = { tournaments: 0, cancelled: 0 };
  for (const t of declared) {
    const written = await trx
      .insertInto('tournaments')
      .values({
        id: ids.uuid(),
        slug: t.slug,
        name: t.name,
        leaderboard_id: t.leaderboard ?? `tournament:${t.slug}`,
        max_entries: t.max_entries,
        entry_fee: jsonb(t.entry_fee ?? {}),
        rewards: jsonb(t.rewards),
        status: 'pending',
        start_at: new Date(t.start_at),
        end_at: new Date(t.end_at),
        metadata: jsonb(t.metadata),
        inserted_at: now,
        updated_at: now,
      })
      .onConflict((oc) =>
        oc
          .column('slug')
          .doUpdateSet((eb) => ({
            name: eb.ref('excluded.name'),
            leaderboard_id: eb.ref('excluded.leaderboard_id'),
            max_entries: eb.ref('excluded.max_entries'),
            entry_fee: eb.ref('excluded.entry_fee'),
            rewards: eb.ref('excluded.rewards'),
            start_at: eb.ref('excluded.start_at'),
            end_at: eb.ref('excluded.end_at'),
            metadata: eb.ref('excluded.metadata'),
            updated_at: now,
          }))
          .where(
            sql<boolean>`tournaments.status in ('pending', 'active') and
              (tournaments.name, tournaments.leaderboard_id, tournaments.max_entries, tournaments.entry_fee, tournaments.rewards,
                tournaments.start_at, tournaments.end_at, tournaments.metadata)
              is distinct from (excluded.name, excluded.leaderboard_id, excluded.max_entries, excluded.entry_fee, excluded.rewards,
                excluded.start_at, excluded.end_at, excluded.metadata)`,
          ),
      )
      .returning('id')
      .execute();
    counts.tournaments += written.length;
  }
  let gone = trx.selectFrom('tournaments').select('id').where('status', 'in', ['pending', 'active']);
  if (declared.length > 0) gone = gone.where('slug', 'not in', declared.map((t) => t.slug));
  for (const { id } of await gone.execute()) if (await cancelTournament(trx, ids, id, now)) counts.cancelled++;
  return counts;
}
