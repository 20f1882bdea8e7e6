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

export async function runFresh(bundle) {
  const target = path.join(root, 'dist', bundle);
  // The console's sources count too: `npm start` serves its bundle.
  const sources = ['handlers', 'runtime', 'host', 'migrations', 'console'].filter((d) => existsSync(path.join(root, d))).map((d) => newest(path.join(root, d)));
  if (!existsSync(target) || Math.max(...sources) > statSync(target).mtimeMs) {
    execFileSync(process.execPath, [path.join(root, 'esbuild.config.mjs')], { stdio: 'inherit', cwd: root });
  }
  await import(pathToFileURL(target).href);
}
