/**
 * Background work that runs every `intervalMs` once started: passes never
 * overlap (a pass still running when the timer fires is joined, not doubled),
 * the timer never keeps the process alive, and `stop` waits for the pass in
 * flight so shutdown does not pull the database from under it.
 */
export class IntervalJob<T> {
  #timer: ReturnType<typeof setInterval> | null = null;
  #running: Promise<T> | null = null;

  constructor(private readonly pass: () => Promise<T>) {}

  start(intervalMs: number): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.run(), intervalMs);
    this.#timer.unref?.();
  }

  /** One pass now; a call while a pass runs joins it. */
  run(): Promise<T> {
    this.#running ??= this.pass().finally(() => (this.#running = null));
    return this.#running;
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#running?.catch(() => {});
  }
}
