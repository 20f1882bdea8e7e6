import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // A worker runs its files one after another in one module graph instead
    // of re-importing the host (kysely, PGlite, fengari, every schema) per
    // file: about 15 % off the suite. Files share no state but caches keyed
    // by value; each builds its own server and database.
    isolate: false,
    // Two forks, each taking files one after another: most of a test's time
    // is spent waiting on sockets, timers and the database, so two files at
    // once roughly halve the suite on a 2-core machine (about 430 s to 220 s
    // measured). Each file still has its own server, database and ports.
    maxWorkers: 2,
  },
});
