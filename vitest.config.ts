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
  },
});
