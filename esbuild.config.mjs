// Builds the artefacts: the Node host, its script worker and the host-neutral handler library.
import { build } from 'esbuild';

const common = { bundle: true, format: 'esm', target: 'es2022', sourcemap: true, logLevel: 'warning' };

await Promise.all([
  build({
    ...common,
    entryPoints: ['host/main.ts'],
    outfile: 'dist/host.mjs',
    platform: 'node',
    // Native or WASM-carrying packages stay external and load from node_modules.
    packages: 'external',
  }),
  // Script workers (host/realtime/match/pool.ts loads it from beside dist/host.mjs).
  build({
    ...common,
    entryPoints: ['host/realtime/match/worker.ts'],
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
]);
