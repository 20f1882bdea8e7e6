import type { Migration } from 'kysely';
import * as m0001 from './0001_accounts';
import * as m0002 from './0002_match_records';
import * as m0020 from './0020_social';
import * as m0021 from './0021_economy';
import * as m0022 from './0022_receipts';
import * as m0023 from './0023_saves_storage';
import * as m0024 from './0024_leaderboards';
import * as m0025 from './0025_votes';
import * as m0026 from './0026_tournaments';
import * as m0027 from './0027_receipt_redemption';
import * as m0028 from './0028_worlds';
import * as m0029 from './0029_match_records_players';

/**
 * Every migration, in order. Imported statically so the bundle carries them;
 * a file is never edited after it lands — add the next number instead.
 *
 * Numbering: `NNNN_<domain>.ts`, applied in ascending order of the name. The
 * next file takes the highest number here plus one (0021 after 0020); the gap
 * from 0002 to 0020 is history (social was numbered ahead of domains that
 * never took the numbers between) and is never filled, because a number below
 * one a deployment already applied makes kysely refuse to migrate (it checks the order).
 */
export const migrations: Record<string, Migration> = {
  '0001_accounts': m0001,
  '0002_match_records': m0002,
  '0020_social': m0020,
  '0021_economy': m0021,
  '0022_receipts': m0022,
  '0023_saves_storage': m0023,
  '0024_leaderboards': m0024,
  '0025_votes': m0025,
  '0026_tournaments': m0026,
  '0027_receipt_redemption': m0027,
  '0028_worlds': m0028,
  '0029_match_records_players': m0029,
};
