/**
 * The checker's reading of a wrapper's options against the real program on this machine.
 * For each wrapper the checker unwraps, a generated set of argvs (valid options, long
 * options shortened, clustered short options, values attached and apart, `--`, unknown
 * and ambiguous options) is run for real with a harmless payload that records its
 * arguments, and checked: the payload ran exactly when the checker said it would, with
 * the arguments the checker said. An argv the checker refuses (it cannot tell) runs
 * nothing under the boundary, so it is only counted.
 */
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkArgv, checkShell, parseGitCommandLine } from '../dist/runtime/policy/commands/index.js';
import { Policy } from '../dist/runtime/policy/policy.js';

const base = realpathSync(mkdtempSync(join(tmpdir(), 'io-harness-options-')));
const root = join(base, 'ws');
const bin = join(base, 'bin');
mkdirSync(root);
mkdirSync(bin);
const log = join(base, 'log');
const payload = join(bin, 'payload');
writeFileSync(payload, `#!/bin/sh\nprintf '%s\\n' "RAN $*" >> ${log}\n`);
chmodSync(payload, 0o755);
writeFileSync(join(base, 'input'), 'a b\n');
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** Everything runs, so the decisions show which inner commands the checker found. */
const policy = Policy.empty().layer('t').allowExec('*').allowRead('**');

/** A small seeded generator: the same argvs every run. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Checker = 'runs' | 'nothing' | 'refused';

interface Verdict {
  checker: Checker;
  /** The payload's arguments as the checker read them (when it runs). */
  args: string | null;
}

function checkerVerdict(check: ReturnType<typeof checkArgv>): Verdict {
  if (!check.ok) return { checker: 'refused', args: null };
  const decision = check.decisions.find((entry) => entry.layer === 't' && entry.subject.startsWith(payload));
  if (!decision) return { checker: 'nothing', args: null };
  return {
    checker: 'runs',
    args: decision.subject
      .slice(payload.length)
      .trim()
      .replace(/ <args>$/, ''),
  };
}

function ranWith(): string[] {
  if (!existsSync(log)) return [];
  const lines = readFileSync(log, 'utf8').trim().split('\n');
  rmSync(log);
  return lines.map((line) => line.replace(/^RAN ?/, ''));
}

interface Case {
  argv: string[];
  verdict: Verdict;
  ran: string[];
}

function generate(
  pool: readonly string[][],
  seed: number,
  count: number,
  build: (options: string[]) => string[],
): string[][] {
  const next = random(seed);
  const argvs: string[][] = [];
  for (let n = 0; n < count; n++) {
    const options: string[] = [];
    const k = Math.floor(next() * 4);
    for (let i = 0; i < k; i++) options.push(...(pool[Math.floor(next() * pool.length)] as string[]));
    if (next() < 0.15) options.push('--');
    argvs.push(build(options));
  }
  // Each option alone too, so every one is tried at least once.
  for (const option of pool) argvs.push(build([...option]));
  return argvs;
}

const PAYLOAD_ARGS = [[], ['x'], ['-y', 'z=1'], ['--w']];

function withPayload(prefix: string[], options: string[], extra: string[] = [], seed = options.length): string[] {
  return [...prefix, ...options, ...extra, payload, ...(PAYLOAD_ARGS[seed % PAYLOAD_ARGS.length] as string[])];
}

function run(argv: string[], input?: string): void {
  spawnSync(argv[0] as string, argv.slice(1), {
    cwd: root,
    input: input ?? '',
    timeout: 10_000,
    stdio: ['pipe', 'ignore', 'ignore'],
  });
}

/** Compares checker and program; returns the cases that disagree (none expected). */
function differ(cases: Case[], argsKnown: boolean): Case[] {
  return cases.filter(({ verdict, ran }) => {
    if (verdict.checker === 'refused') return false;
    if (verdict.checker === 'nothing') return ran.length > 0;
    if (ran.length === 0) return true;
    return argsKnown && ran[0] !== verdict.args;
  });
}

/** Waits for a program that forks (setsid -f) to have written, or for `ms` when nothing is expected. */
function settle(expectRun: boolean): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let waited = 0; waited < (expectRun ? 3000 : 300); waited += 20) {
    // A whole line: the file exists as soon as the payload opens it, before its write.
    if (expectRun && existsSync(log) && readFileSync(log, 'utf8').endsWith('\n')) return;
    Atomics.wait(pause, 0, 0, 20);
  }
}

const WRAPPERS: {
  name: string;
  pool: string[][];
  extra?: string[];
  input?: string;
  argsKnown?: boolean;
  forks?: boolean;
}[] = [
  {
    name: 'env',
    pool: [
      ['-i'],
      ['-u', 'X'],
      ['-uX'],
      ['--unset=X'],
      ['--unset', 'X'],
      ['--un=X'],
      ['--u', 'X'],
      ['-C', '/tmp'],
      ['--chdir=/tmp'],
      ['--ch=/tmp'],
      ['-iC/tmp'],
      ['-v'],
      ['--debug'],
      ['--de'],
      ['--ig'],
      ['--ignore-environment'],
      ['--help'],
      ['--version'],
      ['--he'],
      ['-'],
      ['A=1'],
      ['B=2', 'C=3'],
      ['-S'],
      ['--split-string=x'],
      ['-x'],
      ['--bogus'],
      ['--default-signal'],
      ['--block-signal=INT'],
      ['--list-signal-handling'],
      ['-0'],
      ['-iu'],
    ],
  },
  {
    name: 'timeout',
    extra: ['5'],
    pool: [
      ['-k', '1'],
      ['-k1'],
      ['--kill-after=1'],
      ['--kill=1'],
      ['--k=1'],
      ['-s', 'TERM'],
      ['-sTERM'],
      ['--signal=TERM'],
      ['--sig', 'TERM'],
      ['-v'],
      ['--verbose'],
      ['--foreground'],
      ['--fore'],
      ['--preserve-status'],
      ['--pres'],
      ['-f'],
      ['-p'],
      ['--help'],
      ['--version'],
      ['--bogus'],
      ['-x'],
      ['-vk1'],
      ['-s'],
    ],
  },
  {
    name: 'nice',
    pool: [
      ['-n', '5'],
      ['-n5'],
      ['--adjustment=5'],
      ['--adj=5'],
      ['--adj', '5'],
      ['-5'],
      ['--5'],
      ['-+5'],
      ['-10'],
      ['--help'],
      ['--version'],
      ['-x'],
      ['--bogus'],
      ['-n'],
    ],
  },
  { name: 'nohup', pool: [['--help'], ['--version'], ['--he'], ['-x'], ['--bogus'], ['-'], ['--ver']] },
  {
    name: 'setsid',
    forks: true,
    pool: [
      ['-f'],
      ['-w'],
      ['-fw'],
      ['--fork'],
      ['--wait'],
      ['--wa'],
      ['--help'],
      ['--version'],
      ['-V'],
      ['-h'],
      ['-x'],
      ['--bogus'],
      ['-c'],
    ],
  },
  {
    name: 'stdbuf',
    pool: [
      ['-i0'],
      ['-o0'],
      ['-eL'],
      ['-o', 'L'],
      ['--output=L'],
      ['--out=L'],
      ['--in', '0'],
      ['-i'],
      ['--help'],
      ['--version'],
      ['-x'],
      ['--bogus'],
    ],
  },
  {
    name: '/usr/bin/time',
    pool: [
      ['-p'],
      ['-v'],
      ['-q'],
      ['-a'],
      ['-o', '/dev/null'],
      ['-o/dev/null'],
      ['--output=/dev/null'],
      ['--out=/dev/null'],
      ['-f', '%e'],
      ['--format=%e'],
      ['--help'],
      ['--version'],
      ['-V'],
      ['-x'],
      ['--bogus'],
      ['-ao/dev/null'],
    ],
  },
  {
    name: 'xargs',
    input: 'a b\n',
    argsKnown: false,
    pool: [
      ['-0'],
      ['-n', '1'],
      ['-n1'],
      ['--max-args=1'],
      ['--max-a=1'],
      ['-r'],
      ['--no-run-if-empty'],
      ['-t'],
      ['-I', '{}'],
      ['-I{}'],
      ['-i'],
      ['--replace'],
      ['--replace=QQ'],
      ['-L1'],
      ['-l'],
      ['-P', '2'],
      ['-d', ','],
      ['--delimiter=,'],
      ['--help'],
      ['--version'],
      ['-x'],
      ['--bogus'],
      ['-e'],
      ['-eEND'],
      ['--eof'],
      ['-E', 'END'],
      ['-a', join(base, 'input')],
      ['--arg-file', join(base, 'input')],
      ['--show-limits'],
      ['--process-slot-var=S'],
    ],
  },
];

describe('option parsing, differentially against the real programs', () => {
  for (const wrapper of WRAPPERS) {
    const present = wrapper.name.startsWith('/') ? existsSync(wrapper.name) : true;
    it.runIf(present)(`${wrapper.name}: the payload runs exactly when the checker says so`, () => {
      const argvs = generate(wrapper.pool, wrapper.name.length * 7919, 70, (options) =>
        withPayload([wrapper.name], options, wrapper.extra ?? [], options.length + options.join('').length),
      );
      const cases: Case[] = argvs.map((argv) => {
        const verdict = checkerVerdict(checkArgv(argv, policy, root));
        run(argv, wrapper.input);
        if (wrapper.forks) settle(verdict.checker === 'runs');
        return { argv, verdict, ran: ranWith() };
      });
      const mismatches = differ(cases, wrapper.argsKnown ?? true);
      expect(mismatches.map(({ argv, verdict, ran }) => ({ argv: argv.join(' '), verdict, ran }))).toEqual([]);
      // The checker decided most of them rather than refusing everything it was shown.
      const decided = cases.filter((entry) => entry.verdict.checker !== 'refused').length;
      expect(decided).toBeGreaterThan(cases.length / 3);
    });
  }

  for (const shell of ['dash', 'bash']) {
    it(`${shell} -c: the command string the checker parses is the one the shell runs`, () => {
      const pool = [
        ['-e'],
        ['-x'],
        ['-u'],
        ['-ec'],
        ['-ce'],
        ['-o', 'errexit'],
        ['+o', 'errexit'],
        ['-'],
        ['--'],
        ['-l'],
        ['--norc'],
        ['-O', 'extglob'],
        ['-s'],
        ['+e'],
        ['-cx'],
      ];
      const argvs = generate(pool, shell.length * 104729, 60, (options) => [
        shell,
        ...options,
        ...(options.some((option) => /^-[a-z]*c/.test(option)) ? [] : ['-c']),
        `${payload} x`,
        'arg0',
      ]);
      const cases: Case[] = argvs.map((argv) => {
        const verdict = checkerVerdict(checkArgv(argv, policy, root));
        run(argv);
        return { argv, verdict, ran: ranWith() };
      });
      const mismatches = differ(cases, true);
      expect(mismatches.map(({ argv, verdict, ran }) => ({ argv: argv.join(' '), verdict, ran }))).toEqual([]);
    });
  }

  it('find: -exec and -execdir run the command the checker found', () => {
    const before = [[], ['-H'], ['-L'], ['-P'], ['-O1'], ['-D', 'stat'], ['-HL']];
    const actions = [
      ['-exec', payload, '{}', ';'],
      ['-exec', payload, 'x', '{}', '+'],
      ['-execdir', payload, '{}', ';'],
      ['-execdir', payload, '-y', '{}', '+'],
      ['-exec', payload, '{}'],
      ['-print'],
    ];
    const cases: Case[] = [];
    for (const options of before) {
      for (const action of actions) {
        // Start points that exist: whether find's expression matches a file is data, not option parsing.
        for (const starts of [['.'], []]) {
          const argv = ['find', ...options, ...starts, '-maxdepth', '0', ...action];
          const verdict = checkerVerdict(checkArgv(argv, policy, root));
          run(argv);
          cases.push({ argv, verdict, ran: ranWith() });
        }
      }
    }
    // The arguments hold the found path, which the checker knows only as {}: whether it ran is compared.
    expect(differ(cases, false).map(({ argv, verdict, ran }) => ({ argv: argv.join(' '), verdict, ran }))).toEqual([]);
    expect(cases.filter((entry) => entry.verdict.checker === 'runs').length).toBeGreaterThan(10);
  });

  it("dash's command and exec builtins", () => {
    const pool = [['-p'], ['-v'], ['-V'], ['--'], ['-x'], ['-pv'], ['-a', 'name']];
    const lines: string[] = [];
    for (const builtin of ['command', 'exec']) {
      for (const options of [[], ...pool, ...pool.flatMap((a) => pool.map((b) => [...a, ...b]))]) {
        lines.push([builtin, ...options, payload, 'x'].join(' '));
      }
    }
    const cases: Case[] = lines.map((line) => {
      const verdict = checkerVerdict(checkShell(line, policy, root));
      run(['dash', '-c', line]);
      return { argv: [line], verdict, ran: ranWith() };
    });
    expect(differ(cases, true).map(({ argv, verdict, ran }) => ({ argv, verdict, ran }))).toEqual([]);
  });

  it('git: the subcommand the checker finds is the one git runs', () => {
    spawnSync('git', ['init', '-q', root]);
    const pool = [
      ['-C', '.'],
      ['-C.'],
      ['--no-pager'],
      ['-P'],
      ['--bare'],
      ['--git-dir=.git'],
      ['--git-dir', '.git'],
      ['--work-tree=.'],
      ['--work-tree', '.'],
      ['-c', 'x.y=1'],
      ['--config-env=x.y=HOME'],
      ['--config-env', 'x.y=HOME'],
      ['--literal-pathspecs'],
      ['--no-optional-locks'],
      ['--namespace=x'],
      ['--exec-path'],
      ['--html-path'],
      ['--list-cmds=main'],
      ['--bogus'],
      ['--git-d=x'],
      ['--no-pag'],
      ['-c'],
    ];
    const next = random(7);
    const cases: { argv: string[]; expected: string | null; actual: string | null }[] = [];
    for (let n = 0; n < 120; n++) {
      const options: string[] = [];
      const k = Math.floor(next() * 3);
      for (let i = 0; i < k; i++) options.push(...(pool[Math.floor(next() * pool.length)] as string[]));
      const sub = ['version', 'status', 'rev-parse', '--version', '-v'][Math.floor(next() * 5)] as string;
      const argv = [...options, sub];
      const parsed = parseGitCommandLine(argv);
      const expected = 'error' in parsed ? 'refused' : parsed.exits ? null : parsed.sub;
      const result = spawnSync('git', argv, {
        cwd: root,
        env: { PATH: process.env.PATH, HOME: base, GIT_TRACE: '1' },
        encoding: 'utf8',
        timeout: 10_000,
      });
      const builtin = /trace: built-in: git ([^\s]+)/.exec(result.stderr ?? '')?.[1] ?? null;
      // git can fail setting up the repository (--bare here) before it runs anything: no subcommand ran,
      // which the checker, reading only the command line, takes for the subcommand it names.
      const setupFailed =
        builtin === null && /fatal:/.test(result.stderr ?? '') && !/unknown option/.test(result.stderr ?? '');
      if (expected !== 'refused' && !setupFailed) cases.push({ argv, expected, actual: builtin });
    }
    expect(cases.filter((entry) => entry.expected !== entry.actual)).toEqual([]);
    expect(cases.length).toBeGreaterThan(40);
  });
});
