import type { Ctx } from '../runtime/contracts/context';
import type { Logger } from '../runtime/platform/log';
import { CATALOGUE_FILE, CatalogueError, EMPTY_CATALOGUE, parseCatalogue, syncCatalogue, type Catalogue } from '../runtime/catalogue/catalogue';
import type { LoadedGame } from './game-directory';

/**
 * The game directory's economy catalogue on this node: read when the game
 * loads (a bad file refuses the boot with the message naming the entry),
 * synced into the tables once the schema is current, and read and synced
 * again whenever the file changes, through the same watcher as script hot
 * reload. A bad edit is logged and the last good catalogue stays in force.
 * A game without the file declares an empty catalogue.
 */
export class GameCatalogue {
  #current: Catalogue;
  #ctx: Pick<Ctx, 'db' | 'ids'> | null = null;
  /** Syncs run one after another, so a later edit never lands before an earlier one. */
  #queue: Promise<void> = Promise.resolve();
  readonly #synced: (() => void)[] = [];

  /** Throws `CatalogueError` for a file that cannot be used. */
  constructor(
    private readonly game: LoadedGame,
    private readonly log: Logger,
  ) {
    this.#current = this.#read();
    game.onFilesChanged((changed) => {
      if (changed.includes(CATALOGUE_FILE)) this.#reload();
    });
  }

  /** Syncs the catalogue read at boot, then keeps the tables in step with the file. */
  async start(ctx: Pick<Ctx, 'db' | 'ids'>): Promise<void> {
    this.#ctx = ctx;
    await this.#sync(ctx, this.#current);
  }

  #read(): Catalogue {
    const text = this.game.source.read(CATALOGUE_FILE);
    return text === null ? EMPTY_CATALOGUE : parseCatalogue(text);
  }

  async #sync(ctx: Pick<Ctx, 'db' | 'ids'>, catalogue: Catalogue): Promise<void> {
    const written = await syncCatalogue(ctx, catalogue);
    this.log.info('catalogue_synced', {
      file: CATALOGUE_FILE,
      declared: { currencies: catalogue.currencies.length, items: catalogue.items.length, listings: catalogue.listings.length, tournaments: catalogue.tournaments.length },
      written,
    });
    for (const listener of this.#synced) listener();
  }

  /** Runs after every sync (the tournament clock re-reads its schedule). */
  onSynced(listener: () => void): void {
    this.#synced.push(listener);
  }

  #reload(): void {
    const ctx = this.#ctx;
    let next: Catalogue;
    try {
      next = this.#read();
    } catch (err) {
      if (!(err instanceof CatalogueError)) throw err;
      this.log.warn('catalogue_reload_failed', { file: CATALOGUE_FILE, error: err.message });
      return;
    }
    this.#current = next;
    // Before the boot's sync, the edit is simply what that sync will write.
    if (!ctx) return;
    this.#queue = this.#queue.then(() => this.#sync(ctx, next)).catch((err) => this.log.error('catalogue_sync_failed', { file: CATALOGUE_FILE, error: err }));
  }
}
