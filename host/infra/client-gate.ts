import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ClientGate } from '../../runtime/contracts/services';
import { SettingsError } from '../../runtime/contracts/settings';

/**
 * Loads the `client_gate` module (a path, relative to the working directory)
 * once at boot. A configured gate that cannot be imported, or whose default
 * export is not a function, stops the boot: running without the check the
 * operator asked for would be the silent opposite of failing closed.
 */
export async function loadClientGate(modulePath: string | undefined, cwd = process.cwd()): Promise<ClientGate | null> {
  if (!modulePath) return null;
  const file = path.resolve(cwd, modulePath);
  let loaded: { default?: unknown };
  try {
    loaded = (await import(pathToFileURL(file).href)) as { default?: unknown };
  } catch (err) {
    throw new SettingsError('client_gate', `cannot load ${modulePath}: ${(err as Error).message}`);
  }
  if (typeof loaded.default !== 'function') {
    throw new SettingsError('client_gate', `${modulePath} has no default-exported function`);
  }
  return loaded.default as ClientGate;
}
