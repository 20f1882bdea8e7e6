import { sql } from 'kysely';
import type { Db } from '../../runtime/platform/database';
import type { Logger } from '../../runtime/platform/log';
import { IntervalJob } from './interval-job';

/**
 * PostgreSQL's own rule for when a table's statistics are stale
 * (`autovacuum_analyze_threshold` and `autovacuum_analyze_scale_factor` at
 * their defaults): more rows changed since the last ANALYZE than 50 plus a
 * tenth of the table.
 */
const CHANGED_ROWS_BASE = 50;
const CHANGED_ROWS_SHARE = 0.1;
/** How often the tables are looked at (`autovacuum_naptime`'s default). */
const INTERVAL_MS = 60_000;
/**
 * The sample behind each ANALYZE (300 rows per unit: 3,000). The embedded
 * database runs on the node's main thread, and PostgreSQL's default of 100
 * held it for 125-145 ms on a table of 200,000 players; 10 takes 17 ms and
 * still tells the planner how big a table is and how its columns are spread.
 */
const STATISTICS_TARGET = 10;

/**
 * The embedded database's stand-in for autovacuum's ANALYZE (decision 0047).
 * PGlite runs one backend and no autovacuum worker, so without this its
 * planner never learns how big a table is and plans every join from default
 * guesses: a token lookup of 200 hashes walked all 10,000 players (20 ms
 * instead of 4.5). Every pass analyzes, one table at a time so other
 * statements interleave on the one connection, each table never analyzed
 * (`reltuples` below zero; the catalogue keeps that figure across restarts,
 * while PostgreSQL drops the change counters after a crash) or changed by
 * more than PostgreSQL's threshold since its last ANALYZE. The server has
 * autovacuum: no job there.
 */
export class PlannerStatistics {
  readonly #job = new IntervalJob(() => this.#pass());

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.#job.start(INTERVAL_MS);
  }

  /** One pass now (a call while a pass runs joins it): the tables it analyzed. */
  run(): Promise<string[]> {
    return this.#job.run();
  }

  stop(): Promise<void> {
    return this.#job.stop();
  }

  async #pass(): Promise<string[]> {
    const analyzed: string[] = [];
    try {
      const stale = await sql<{ relname: string }>`
        select c.relname from pg_class c
        join pg_namespace n on n.oid = c.relnamespace
        left join pg_stat_user_tables s on s.relid = c.oid
        where c.relkind = 'r' and n.nspname = current_schema()
          and (c.reltuples < 0 or coalesce(s.n_mod_since_analyze, 0) > ${CHANGED_ROWS_BASE} + ${CHANGED_ROWS_SHARE} * c.reltuples)
        order by c.relname`.execute(this.db);
      for (const { relname } of stale.rows) {
        await this.db.transaction().execute(async (trx) => {
          await sql.raw(`set local default_statistics_target = ${STATISTICS_TARGET}`).execute(trx);
          await sql`analyze ${sql.id(relname)}`.execute(trx);
        });
        analyzed.push(relname);
      }
      if (analyzed.length > 0) this.log.debug('planner_statistics_updated', { tables: analyzed });
    } catch (err) {
      // A database that is away is the watch's to report; the next pass tries again.
      this.log.warn('planner_statistics_failed', { error: err instanceof Error ? err.message : String(err), analyzed: analyzed.length });
    }
    return analyzed;
  }
}
