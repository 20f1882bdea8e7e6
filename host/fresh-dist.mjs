// Runs a bundle of dist/, building dist/ first when a source is newer than the bundle
// (`npm start` runs dist/host.mjs this way, `npm run ops` dist/ops.mjs).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

function newest(dir) {
  let t = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    t = Math.max(t, entry.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

/**
 * Builds dist/ when `bundle` is missing, or a source, the build script or the
 * package files are newer than the last complete build (dist/.built, which
 * the build writes after every bundle).
 */
export function buildIfStale(bundle) {
  const target = path.join(root, 'dist', bundle);
  const stamp = path.join(root, 'dist', '.built');
  // The browser apps' and the typed client's sources count too: the node serves their bundles.
  const sources = ['handlers', 'runtime', 'host', 'migrations', 'console', 'play', 'client']
    .filter((d) => existsSync(path.join(root, d)))
    .map((d) => newest(path.join(root, d)));
  for (const file of ['esbuild.config.mjs', 'package.json', 'package-lock.json']) {
    if (existsSync(path.join(root, file))) sources.push(statSync(path.join(root, file)).mtimeMs);
  }
  if (!existsSync(target) || !existsSync(stamp) || Math.max(...sources) > statSync(stamp).mtimeMs) {
    execFileSync(process.execPath, [path.join(root, 'esbuild.config.mjs')], { stdio: 'inherit', cwd: root });
  }
  return target;
}

export async function runFresh(bundle) {
  await import(pathToFileURL(buildIfStale(bundle)).href);
}
