import { databaseFault, type DatabaseFault } from '../../runtime/platform/database';
import type { Logger } from '../../runtime/platform/log';

export interface DatabaseWatchOptions {
  /** One bounded round trip on a connection of its own (OpenDatabase.probe). */
  probe: (deadlineMs: number) => Promise<void>;
  log: Logger;
  /** Probe period while the database answers. */
  upIntervalMs?: number;
  /** Probe period while it does not: recovery is noticed this fast. */
  downIntervalMs?: number;
  deadlineMs?: number;
}

/**
 * The node's last known view of its database, kept by a small periodic probe
 * so the readiness route answers at once from state instead of waiting on a
 * query that may hang. Period plus deadline stay under one second, so an
 * outage of any kind (refused, reset, silent) shows within 1 s; a lost pool
 * connection or a failing request asks for a probe at once rather than
 * flipping the state itself, so one killed backend does not flap readiness.
 */
export class DatabaseWatch {
  #fault: DatabaseFault | null = 'database_unavailable';
  #downSince: number | null = null;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #stopped = false;
  #first: Promise<void>;
  #resolveFirst!: () => void;
  readonly #up: number;
  readonly #down: number;
  readonly #deadline: number;

  constructor(private readonly options: DatabaseWatchOptions) {
    this.#up = options.upIntervalMs ?? 400;
    this.#down = options.downIntervalMs ?? 250;
    this.#deadline = options.deadlineMs ?? 500;
    this.#first = new Promise((resolve) => (this.#resolveFirst = resolve));
  }

  /** Null while the last probe succeeded; never waits. */
  fault(): DatabaseFault | null {
    return this.#fault;
  }

  /** Settles once the first probe has (either way), so boot can report a known state. */
  settled(): Promise<void> {
    return this.#first;
  }

  start(): void {
    this.#schedule(0);
  }

  /** Something saw a connection fail: check now instead of at the next period. */
  suspect(): void {
    if (this.#stopped || this.#running) return;
    this.#schedule(0);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running;
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#running = this.#check().finally(() => {
        this.#running = null;
        this.#schedule(this.#fault ? this.#down : this.#up);
      });
    }, delayMs);
    this.#timer.unref();
  }

  async #check(): Promise<void> {
    let fault: DatabaseFault | null = null;
    let error: unknown;
    try {
      await this.options.probe(this.#deadline);
    } catch (err) {
      error = err;
      fault = databaseFault(err) ?? 'database_unavailable';
    }
    if (this.#stopped) return;
    const was = this.#fault;
    this.#fault = fault;
    const now = Date.now();
    if (fault && !was) {
      this.#downSince = now;
      this.options.log.warn('database_unreachable', { reason: fault, error: error instanceof Error ? error.message : String(error) });
    } else if (!fault && was && this.#downSince !== null) {
      this.options.log.info('database_recovered', { down_ms: now - this.#downSince });
      this.#downSince = null;
    } else if (fault && this.#downSince === null) {
      // Unreachable from the first probe on (boot with the server down).
      this.#downSince = now;
      this.options.log.warn('database_unreachable', { reason: fault, error: error instanceof Error ? error.message : String(error) });
    }
    this.#resolveFirst();
  }
}
