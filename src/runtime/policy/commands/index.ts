/**
 * Checks a command as the program it really runs. The argv is decided as written, and
 * so is every command a wrapper runs (`env`, `timeout`, `nice`, `xargs`, `sh -c`, a
 * package script...), recursively; the first deny wins. A program that runs code the
 * check cannot see (an interpreter, a build tool, `find -exec`, an awk program calling
 * `system`) is taken for exactly that: it is allowed only by a rule that names it, and
 * otherwise asks, whatever a broader rule says.
 *
 * What runs a string as shell code (`sh -c`, a package.json script, `awk`'s
 * `system("...")`) is parsed with the project's own parser (shell.ts) and checked
 * stage by stage; a string that cannot be parsed is refused.
 */
import type { Policy } from '../policy.js';
import { checkCommand, checkLineInto } from './check.js';
import { NO_HOLES } from './effects.js';
import { type CommandCheck, Tally } from './tally.js';

export { ARBITRARY_CODE } from './exec-rules.js';
export { type GitCommandLine, parseGitCommandLine } from './git.js';
export { WALK_LIMIT } from './paths.js';
export type { CommandCheck } from './tally.js';
export { dropWithheldAssignments } from './withheld.js';

/**
 * Checks one argv as the program it really runs: the argv itself, then every command it
 * wraps (recursively). `sudo`/`doas` are refused outright (`exec.privilege`).
 *
 * @example
 * checkArgv(['env', 'X=1', 'curl', 'example.com'], policy, root);
 * // { ok: false, rule: 'deny-exec curl*', layer: 'project', ... }
 */
export function checkArgv(argv: readonly string[], policy: Policy, root: string): CommandCheck {
  const tally = new Tally();
  if (argv.length === 0) tally.refuse('exec.empty', '', 'an empty argv runs nothing');
  else checkCommand(argv, { policy, root, cwds: [root], depth: 0 }, tally, NO_HOLES);
  return tally.result();
}

/**
 * Checks a whole command line before anything of it runs: every stage with
 * {@link checkArgv} (an `X=1 cmd` prefix read like `env X=1 cmd`), every redirect target
 * as a write (`>`, `>>`, `2>`, `>&file`) or a read (`<`). `/dev/null` and fd duplications
 * (`2>&1`) are not files. A line the parser refuses is refused with rule
 * `shell.unsupported`; a `cd` moves where later relative paths resolve.
 */
export function checkShell(line: string, policy: Policy, root: string): CommandCheck {
  const tally = new Tally();
  checkLineInto(line, { policy, root, cwds: [root], depth: 0 }, tally, true);
  return tally.result();
}
