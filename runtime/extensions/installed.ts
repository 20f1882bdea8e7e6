import type { Transaction } from 'kysely';
import type { Database } from '../contracts/tables';
import type { Extension } from '../contracts/extension';
import type { ExtensionSet } from '../contracts/services';

/** What an export holds for an extension without an export hook. */
export const EXPORT_SKIPPED = { skipped: true, reason: 'no_export_hook' } as const;

/** An erase hook refused or failed; the erasure rolls back. */
export class ExtensionEraseFailed extends Error {
  constructor(
    readonly extension: string,
    override readonly cause: unknown,
  ) {
    super(`extension ${extension} refused the erasure: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = 'ExtensionEraseFailed';
  }
}

/** An export hook failed; the export answers `ops.export_incomplete`. */
export class ExtensionExportFailed extends Error {
  constructor(
    readonly extension: string,
    override readonly cause: unknown,
  ) {
    super(`extension ${extension} failed its export: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = 'ExtensionExportFailed';
  }
}

/** The extensions this node runs, in the order the `extensions` setting lists them. */
export class InstalledExtensions implements ExtensionSet {
  constructor(readonly list: readonly Extension[]) {}

  /** Each extension's part of an export, read in the export's own snapshot. */
  async exportAll(trx: Transaction<Database>, playerId: string): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {};
    for (const ext of this.list) {
      if (!ext.export) {
        out[ext.name] = EXPORT_SKIPPED;
        continue;
      }
      try {
        const data = (await ext.export(playerId, { trx })) ?? null;
        // Checked here: a value that cannot be encoded must fail the export, not its answer.
        out[ext.name] = JSON.parse(JSON.stringify(data)) as unknown;
      } catch (err) {
        throw new ExtensionExportFailed(ext.name, err);
      }
    }
    return out;
  }

  /** Runs every erase hook inside the erasure's transaction; the first refusal aborts the rest and the erasure. */
  async eraseAll(trx: Transaction<Database>, playerId: string): Promise<void> {
    for (const ext of this.list) {
      if (!ext.erase) continue;
      try {
        await ext.erase(playerId, { trx });
      } catch (err) {
        throw new ExtensionEraseFailed(ext.name, err);
      }
    }
  }
}

export const NO_EXTENSIONS = new InstalledExtensions([]);
