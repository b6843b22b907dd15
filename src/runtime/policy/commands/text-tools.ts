/**
 * Text tools that can run commands: `awk` (`system`, pipes) and `sed` (the `e` command
 * and flag, and the files its script reads and writes).
 */
import { hasOption, optionValues, parseOptions } from '../options.js';
import { NO_PATHS, SED_OPTIONS } from '../path-programs/index.js';
import { type Effect, type Handler, has, leadingOptions, unreadable } from './effects.js';

/** awk: `system(...)`, pipes and `getline` from commands run shell code; literal ones are checked. */
export const awk: Handler = (args) => {
  const parsed = leadingOptions(args, {
    short: 'fvFeEilW',
    long: ['--file', '--assign', '--field-separator', '--source', '--exec', '--include', '--load'],
  });
  if (
    has(parsed, '-f', '--file', '-E', '--exec', '-i', '--include', '-l', '--load') ||
    parsed.options.some(([name, value]) => name === '-W' && /^(e|f)/.test(value ?? ''))
  ) {
    return [{ kind: 'arbitrary', why: 'an awk program read from a file' }];
  }
  if (has(parsed, '--sandbox', '-S')) return [];
  const sources = parsed.options.filter(([name]) => name === '-e' || name === '--source').map(([, value]) => value);
  const program = (sources.length > 0 ? sources : [parsed.rest[0]]).filter((text) => text !== undefined).join('\n');
  const effects: Effect[] = [];
  const calls = [...program.matchAll(/\bsystem\s*\(/g)].length;
  const literals = [...program.matchAll(/\bsystem\s*\(\s*"((?:[^"\\]|\\.)*)"\s*\)/g)].map((match) => match[1] ?? '');
  const pipes = program.replace(/\|\|/g, '').includes('|');
  if (calls > 0 || pipes || /@load\b/.test(program)) {
    effects.push({ kind: 'arbitrary', why: 'an awk program that runs commands (system, pipes)' });
  }
  for (const literal of literals) effects.push({ kind: 'line', line: unescapeAwk(literal) });
  for (const match of program.matchAll(/"((?:[^"\\]|\\.)*)"\s*\|(?!\|)/g)) {
    effects.push({ kind: 'line', line: unescapeAwk(match[1] ?? '') });
  }
  for (const match of program.matchAll(/(?<!\|)\|&?\s*"((?:[^"\\]|\\.)*)"/g)) {
    effects.push({ kind: 'line', line: unescapeAwk(match[1] ?? '') });
  }
  return effects;
};

function unescapeAwk(text: string): string {
  return text.replace(/\\(.)/g, (_, ch: string) => (ch === 'n' ? '\n' : ch === 't' ? '\t' : ch));
}

/** sed: the `e` command and the `e` flag run the pattern space; `w`/`W` write files. */
/**
 * sed: the files its script reads (`r`, `R`) and writes (`w`, `W`, the `w` flag of `s`)
 * are decided as paths; an `e` command's text is checked as a shell line; what runs the
 * pattern space (`e` alone, the `e` flag of `s`) or a script the check cannot read is
 * code the check cannot see, which a rule naming sed does not allow.
 */
export const sed: Handler = (args) => {
  const parsed = parseOptions('sed', args, SED_OPTIONS);
  if (!parsed.ok) return unreadable(parsed.reason);
  if (hasOption(parsed, 'f')) return [{ kind: 'arbitrary', why: 'a sed script read from a file' }];
  if (hasOption(parsed, '--sandbox')) return [];
  const scripts = optionValues(parsed, 'e');
  const script = (scripts.length > 0 ? scripts : parsed.operands.slice(0, 1)).join('\n');
  const found = sedScript(script);
  const effects: Effect[] = [];
  if (found.unknown !== null) effects.push({ kind: 'arbitrary', untrusted: true, why: found.unknown });
  for (const line of found.lines) effects.push({ kind: 'line', line });
  if (found.reads.length > 0 || found.writes.length > 0) {
    effects.push({ kind: 'paths', use: { ...NO_PATHS, reads: found.reads, writes: found.writes } });
  }
  return effects;
};

/** What a sed script does beyond editing text: files it reads and writes, lines it runs, or why the check cannot tell. */
interface SedScript {
  reads: string[];
  writes: string[];
  lines: string[];
  unknown: string | null;
}

const SED_SPECIAL_FILES = new Set(['/dev/stdout', '/dev/stderr', '/dev/stdin']);

/** Reads a sed script as GNU sed does, command by command; what it cannot follow is `unknown`. */
function sedScript(script: string): SedScript {
  const found: SedScript = { reads: [], writes: [], lines: [], unknown: null };
  let i = 0;
  const n = script.length;
  const cannot = (why: string): SedScript => ({ ...found, unknown: why });
  const skipSpace = (): void => {
    while (i < n && /[\s;]/.test(script[i] as string)) i++;
  };
  const delimited = (delimiter: string): boolean => {
    while (i < n && script[i] !== delimiter) {
      if (script[i] === '\\') i++;
      if (script[i] === '\n' && delimiter !== '\n') return false;
      i++;
    }
    if (i >= n) return false;
    i++;
    return true;
  };
  const address = (): boolean => {
    if (script[i] === '/' || script[i] === '\\') {
      if (script[i] === '\\') i++;
      const delimiter = script[i];
      i++;
      if (delimiter === undefined || !delimited(delimiter)) return false;
      while (i < n && /[IM]/.test(script[i] as string)) i++;
    } else {
      while (i < n && /[0-9$~+]/.test(script[i] as string)) i++;
    }
    return true;
  };
  /** The rest of the line (a file name, a command, a label), leading blanks skipped. */
  const restOfLine = (): string => {
    while (i < n && (script[i] === ' ' || script[i] === '\t')) i++;
    const end = script.indexOf('\n', i);
    const text = script.slice(i, end === -1 ? n : end);
    i = end === -1 ? n : end;
    return text;
  };
  const file = (list: string[]): void => {
    const name = restOfLine();
    if (name !== '' && !SED_SPECIAL_FILES.has(name)) list.push(name);
  };
  for (;;) {
    skipSpace();
    if (i >= n) return found;
    if (!address()) return cannot('a sed script the check cannot read');
    if (script[i] === ',') {
      i++;
      if (!address()) return cannot('a sed script the check cannot read');
    }
    while (i < n && /[\s!]/.test(script[i] as string)) i++;
    const command = script[i];
    i++;
    if (command === undefined) return found;
    if (command === 'r' || command === 'R') file(found.reads);
    else if (command === 'w' || command === 'W') file(found.writes);
    else if (command === 'e') {
      const line = restOfLine();
      if (line === '') return cannot('sed e runs the pattern space as a command');
      found.lines.push(line);
    } else if (command === '{' || command === '}') {
      // a block
    } else if (command === 's' || command === 'y') {
      const delimiter = script[i];
      i++;
      if (delimiter === undefined || delimiter === '\n' || delimiter === '\\') {
        return cannot('a sed script the check cannot read');
      }
      if (!delimited(delimiter) || !delimited(delimiter)) return cannot('a sed script the check cannot read');
      if (command === 's') {
        while (i < n && /[gpiImMe0-9w]/.test(script[i] as string)) {
          const flag = script[i];
          i++;
          if (flag === 'e') return cannot('the e flag of sed s runs the result as a command');
          if (flag === 'w') {
            file(found.writes);
            break;
          }
        }
      }
    } else if ('aictTbv:'.includes(command)) {
      restOfLine();
    } else if (!'=dDgGhHlnNpPqQxzFL#'.includes(command)) {
      return cannot(`the sed command ${JSON.stringify(command)} is not one the check reads`);
    } else {
      if (command === '#') restOfLine();
      if ('qQlL'.includes(command)) while (i < n && /[0-9 ]/.test(script[i] as string)) i++;
    }
  }
}
