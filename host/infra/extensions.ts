import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Extension, ExtensionHost } from '../../runtime/extensions/extension';
import { manifestProblems } from '../../runtime/extensions/extension';
import { InstalledExtensions, NO_EXTENSIONS } from '../../runtime/extensions/installed';
import { SettingsError } from '../../runtime/contracts/settings';
import type { LiveState } from '../../runtime/contracts/live';
import { eventPush } from '../../runtime/extensions/events';

/**
 * Loads the `extensions` setting's modules (paths relative to the working
 * directory) at boot. A module that cannot be imported, a bad manifest, a
 * name used twice or a failing `setup` stops the boot naming the path: a node
 * running without an extension the operator installed would skip its erase
 * hook and its guarded actions, the silent opposite of failing closed.
 */
export async function loadExtensions(
  modulePaths: readonly string[],
  host: Omit<ExtensionHost, 'pushEvent'> & { live: Pick<LiveState, 'push'> },
  cwd = process.cwd(),
): Promise<InstalledExtensions> {
  if (modulePaths.length === 0) return NO_EXTENSIONS;
  const loaded: Extension[] = [];
  for (const [i, modulePath] of modulePaths.entries()) {
    const key = `extensions.${i}`;
    let module: { default?: unknown };
    try {
      module = (await import(pathToFileURL(path.resolve(cwd, modulePath)).href)) as { default?: unknown };
    } catch (err) {
      throw new SettingsError(key, `cannot load ${modulePath}: ${(err as Error).message}`);
    }
    const problems = manifestProblems(module.default);
    if (problems.length > 0) throw new SettingsError(key, `${modulePath} is not a valid extension: ${problems.join('; ')}`);
    const ext = module.default as Extension;
    if (loaded.some((e) => e.name === ext.name)) throw new SettingsError(key, `${modulePath}: extension ${ext.name} is installed twice`);
    loaded.push(ext);
  }
  for (const [i, ext] of loaded.entries()) {
    try {
      await ext.setup?.({ db: host.db, clock: host.clock, log: host.log.child({ extension: ext.name }), pushEvent: eventPush(ext.name, host.live) });
    } catch (err) {
      throw new SettingsError(`extensions.${i}`, `${modulePaths[i]}: setup of ${ext.name} failed: ${(err as Error).message}`);
    }
  }
  return new InstalledExtensions(loaded);
}
