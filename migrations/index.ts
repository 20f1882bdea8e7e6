import type { Migration } from 'kysely';
import * as m0001 from './0001_accounts';
import * as m0002 from './0002_match_records';
import * as m0020 from './0020_social';

/**
 * Every migration, in order. Imported statically so the bundle carries them;
 * a file is never edited after it lands — add the next number instead.
 */
export const migrations: Record<string, Migration> = {
  '0001_accounts': m0001,
  '0002_match_records': m0002,
  '0020_social': m0020,
};
