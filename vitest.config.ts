import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The suites about the store that run on both backends: in the `sqlite` project (with
 * every other suite) on a SQLite file, and again in the `postgres` project on a database
 * of their own on the tests' PostgreSQL server (support/harness.ts, storeHarness). The
 * crash fuzz (one file for each backend), the conformance suite and the PostgreSQL suites
 * name their backends themselves and run once.
 */
const ON_BOTH = [
  'test/answer.test.ts',
  'test/caps.test.ts',
  'test/leases.test.ts',
  'test/ledger.test.ts',
  'test/mailbox.test.ts',
  'test/memory.test.ts',
  'test/people.test.ts',
  'test/rewind.test.ts',
  'test/sessions.test.ts',
  'test/session-turns.test.ts',
  'test/spawn.test.ts',
];

/**
 * The longest files, which say what they do as they go: started first, so the rest of the
 * suite runs beside them rather than after (on a fresh clone vitest knows no durations and
 * would start the largest files first, and these are small).
 */
const LONGEST = ['crash-fuzz-postgres.test.ts', 'crash-fuzz.test.ts', 'postgres-hosts.test.ts'];

class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (file: TestSpecification) => {
      const index = LONGEST.findIndex((name) => file.moduleId.endsWith(`/${name}`));
      return index === -1 ? LONGEST.length : index;
    };
    return sorted
      .map((file, order) => ({ file, order }))
      .sort((a, b) => rank(a.file) - rank(b.file) || a.order - b.order)
      .map(({ file }) => file);
  }
}

export default defineConfig({
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
    sequence: { sequencer: LongestFirst },
    // A request that rewrites an entry it already sent, between folds, fails the run (see runtime/context).
    env: { IO_HARNESS_STRICT_PREFIX: '1' },
    projects: [
      { extends: true, test: { name: 'sqlite', include: ['test/**/*.test.ts'] } },
      {
        extends: true,
        test: {
          name: 'postgres',
          include: ON_BOTH,
          env: { IO_HARNESS_STRICT_PREFIX: '1', IO_HARNESS_TEST_STORE: 'postgres' },
        },
      },
    ],
  },
});
