import type { OpenDatabase } from '../../host/infra/database';
import type { RawSettings } from '../../runtime/contracts/settings';
import { inProcessApp, type InProcessApp } from './app';
import { freshDatabase } from './database';

/**
 * In-process apps over one database that differ only in their settings, so
 * a player registered on one is a player of all (a configured store and an
 * unconfigured one, say), without a database per configuration.
 */
export class Deployments {
  readonly #apps: InProcessApp[] = [];

  private constructor(readonly database: OpenDatabase) {}

  static async open(): Promise<Deployments> {
    return new Deployments(await freshDatabase());
  }

  async start(raw: RawSettings = {}): Promise<InProcessApp> {
    const app = await inProcessApp(raw, { database: this.database });
    this.#apps.push(app);
    return app;
  }

  async close(): Promise<void> {
    for (const app of this.#apps) await app.close();
    await this.database.close();
  }
}
