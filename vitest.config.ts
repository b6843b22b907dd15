import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
    // A request that rewrites an entry it already sent, between folds, fails the run (see runtime/context).
    env: { IO_HARNESS_STRICT_PREFIX: '1' },
  },
});
