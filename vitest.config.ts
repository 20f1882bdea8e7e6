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
    // Three forks, each taking files one after another: most of a test's
    // time is spent waiting on sockets, timers, child processes and the
    // database, so on a 2-core machine one fork took about 430 s, two about
    // 225 s and three about 180 s (four: 178 s, with more contention for the
    // tests that time things). Each file has its own server, database and ports.
    maxWorkers: 3,
  },
});
