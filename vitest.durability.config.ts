import { defineConfig } from 'vitest/config';
import { DURABILITY, longestFirst, shared } from './vitest.config.js';

/**
 * The durability suite, `npm run test:durability`: the crash fuzz on SQLite and on
 * PostgreSQL, and several hosts driving one tree on PostgreSQL, at full depth. The fuzz's
 * kill count is IO_HARNESS_FUZZ_KILLS (50 a backend unless set; test/support/crash-fuzz.ts).
 * The PostgreSQL fuzz is the longest, so it starts first; the SQLite fuzz beside it, and
 * the several hosts after whichever ends first.
 */
export default defineConfig({
  test: {
    ...shared,
    globalSetup: ['test/support/durability-setup.ts'],
    include: DURABILITY,
    sequence: {
      sequencer: longestFirst(['crash-fuzz-postgres.test.ts', 'crash-fuzz.test.ts', 'postgres-hosts.test.ts']),
    },
  },
});
