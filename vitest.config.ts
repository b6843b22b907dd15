import { configDefaults, defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The suites about the store that run on both backends: in the `sqlite` project (with
 * every other suite) on a SQLite file, and again in the `postgres` project on a database
 * of their own on the tests' PostgreSQL server (support/harness.ts, storeHarness). The
 * conformance suite and the PostgreSQL suites name their backends themselves and run once.
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
  'test/retention.test.ts',
  'test/sessions.test.ts',
  'test/session-turns.test.ts',
  'test/shared-supervisor.test.ts',
  'test/spawn.test.ts',
  'test/viewer.test.ts',
  'test/web.test.ts',
];

/**
 * The durability suite (`npm run test:durability`, vitest.durability.config.ts): the crash
 * fuzz, one file for each backend, and the several-hosts suite, each minutes of work at full
 * depth. They run there, not here, so the README's `npm test` stays short; `.ci/run` runs both.
 */
export const DURABILITY = [
  'test/crash-fuzz.test.ts',
  'test/crash-fuzz-postgres.test.ts',
  'test/postgres-hosts.test.ts',
];

/**
 * A sequencer that starts `longest` first (file names, longest first), so the rest of a
 * suite runs beside them rather than after: on a fresh clone vitest knows no durations and
 * starts the largest files first, and these are not the largest.
 */
export function longestFirst(longest: readonly string[]): typeof BaseSequencer {
  return class LongestFirst extends BaseSequencer {
    override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
      const sorted = await super.sort(files);
      const rank = (file: TestSpecification) => {
        const index = longest.findIndex((name) => file.moduleId.endsWith(`/${name}`));
        return index === -1 ? longest.length : index;
      };
      return sorted
        .map((file, order) => ({ file, order }))
        .sort((a, b) => rank(a.file) - rank(b.file) || a.order - b.order)
        .map(({ file }) => file);
    }
  };
}

/** What both suites share: the setup, the ceilings, two workers, forked processes. */
export const shared = {
  testTimeout: 120_000,
  hookTimeout: 60_000,
  pool: 'forks',
  fileParallelism: true,
  maxWorkers: 2,
  // A request that rewrites an entry it already sent, between folds, fails the run (see runtime/context).
  env: { IO_HARNESS_STRICT_PREFIX: '1' },
} as const;

export default defineConfig({
  test: {
    ...shared,
    globalSetup: ['test/support/global-setup.ts'],
    // The longest of this suite as timed here (the containment tests run every rung there is).
    sequence: { sequencer: longestFirst(['containment.test.ts', 'first-hour.test.ts', 'rungs.test.ts']) },
    projects: [
      {
        extends: true,
        test: {
          name: 'sqlite',
          // The guides' example tests run as they are written (examples/testing: a user's own test).
          include: ['test/**/*.test.ts', 'examples/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...DURABILITY],
        },
      },
      {
        extends: true,
        test: {
          name: 'postgres',
          include: ON_BOTH,
          env: { ...shared.env, IO_HARNESS_TEST_STORE: 'postgres' },
        },
      },
    ],
  },
});
