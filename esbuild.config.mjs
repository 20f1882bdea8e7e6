// Builds the artefacts: the Node host, its script worker and the host-neutral handler library.
import { build } from 'esbuild';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const common = { bundle: true, format: 'esm', target: 'es2022', sourcemap: true, logLevel: 'warning' };

/**
 * A browser app served by the Node host under /<name> (host/http/static-site.ts):
 * a content-hashed script and stylesheet in dist/<name>/, and <name>/index.html
 * with their addresses filled in. Nothing inline, so the site's
 * Content-Security-Policy can allow 'self' alone.
 */
async function siteBundle(name, entry, options = {}) {
  const out = path.join('dist', name);
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const result = await build({
    ...common,
    entryPoints: [entry],
    outdir: out,
    entryNames: '[name]-[hash]',
    assetNames: '[name]-[hash]',
    platform: 'browser',
    minify: true,
    sourcemap: 'linked',
    metafile: true,
    ...options,
  });
  const outputs = Object.keys(result.metafile.outputs).map((file) => path.basename(file));
  const script = outputs.find((f) => f.endsWith('.js'));
  const style = outputs.find((f) => f.endsWith('.css'));
  if (!script || !style) throw new Error(`the ${name} build produced no script or stylesheet`);
  const page = readFileSync(path.join(name, 'index.html'), 'utf8').replace('{{script}}', `/${name}/${script}`).replace('{{style}}', `/${name}/${style}`);
  if (page.includes('{{')) throw new Error(`${name}/index.html names an asset the build does not make`);
  writeFileSync(path.join(out, 'index.html'), page);
}

await Promise.all([
  build({
    ...common,
    entryPoints: ['host/main.ts'],
    outfile: 'dist/host.mjs',
    platform: 'node',
    // Native or WASM-carrying packages stay external and load from node_modules.
    packages: 'external',
  }),
  // Script workers (host/realtime/lanes/pool.ts loads it from beside dist/host.mjs).
  build({
    ...common,
    entryPoints: ['host/realtime/lanes/worker.ts'],
    outfile: 'dist/match-worker.mjs',
    platform: 'node',
    packages: 'external',
  }),
  // The operator command line (`npm run ops`; host/ops/main.ts).
  build({
    ...common,
    entryPoints: ['host/ops/main.ts'],
    outfile: 'dist/ops.mjs',
    platform: 'node',
    packages: 'external',
  }),
  build({
    ...common,
    entryPoints: ['handlers/index.ts'],
    outfile: 'dist/handlers.mjs',
    platform: 'neutral',
    mainFields: ['module', 'main'],
    conditions: ['worker', 'browser'],
  }),
  // The operator console (console/): hashed assets and an index.html naming them, in dist/console/.
  siteBundle('console', 'console/main.tsx', {
    jsx: 'automatic',
    jsxImportSource: 'preact',
    // The core version the console is built for; it warns when /ops/features names another.
    define: { __CORE_VERSION__: JSON.stringify(JSON.parse(readFileSync('package.json', 'utf8')).version) },
  }),
  // The typed game client (client/index.ts): browsers and Node, no `node:` imports.
  build({
    ...common,
    entryPoints: ['client/index.ts'],
    outfile: 'dist/client.mjs',
    platform: 'neutral',
    mainFields: ['module', 'main'],
  }),
  // The /play demo page (play/): hashed assets and its index.html, in dist/play/.
  siteBundle('play', 'play/main.ts'),
]);

// Written last, so it exists only when every bundle above was: what host/fresh-dist.mjs
// compares the sources with.
writeFileSync(path.join('dist', '.built'), `${new Date().toISOString()}\n`);
