/**
 * One id per test run, so the stores the tests make (under the temp directory, named by
 * it) can all be removed when the run ends, and no other run's are.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function setup(): () => void {
  const id = randomBytes(4).toString('hex');
  process.env.IO_HARNESS_TEST_RUN = id;
  return () => {
    const prefix = `io-harness-test-${id}-`;
    for (const name of readdirSync(tmpdir())) {
      if (name.startsWith(prefix)) rmSync(join(tmpdir(), name), { recursive: true, force: true });
    }
  };
}
