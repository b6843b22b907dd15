/**
 * A command line parsed by the project itself, so the check sees the programs and the
 * files the shell will see. The line runs under `/bin/sh -c` (dash on Debian, bash in
 * POSIX mode elsewhere), so the parser accepts only what both read the same way and
 * refuses everything else, naming the construct: it fails closed. What is refused is
 * what the check cannot know before the line runs (a substitution's output, a
 * variable's value, what a subshell or a function would do) or what sh and bash read
 * differently.
 *
 * `checkShell` (commands/index.ts) checks every stage of a parsed line as the program it
 * really runs and every redirect as a read or a write, before anything runs; this module
 * only parses, so the check depends on it and not the other way round.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';

/** How a stage connects to the next one. */
export type ShellConnector = '|' | '&&' | '||' | ';' | '\n';

/**
 * A redirect. `>|` reads as `>`, `<<-` as `<<`. For `<<` the target is the here-doc's
 * body; for `<<<` the here-string; for `>&`/`<&` a file descriptor (`1`, `2-`, `-`) or,
 * for `>&`, a file. `&>` is refused: /bin/sh (dash) reads it as `&` then `>`.
 */
export type RedirectOp = '>' | '>>' | '<' | '>&' | '<&' | '<<' | '<<<';

export interface ShellRedirect {
  fd: number;
  op: RedirectOp;
  target: string;
}

/** One simple command: `NAME=value` prefixes, the argv, its redirects. */
export interface ShellStage {
  argv: string[];
  /**
   * The argv words the shell will expand as file name patterns (an unquoted `*`, `?` or
   * `[`): their index, and the pattern with every quoted character escaped by `\\`.
   */
  globs: { index: number; pattern: string }[];
  assignments: Record<string, string>;
  redirects: ShellRedirect[];
  /** How this stage connects to the next one; null for the last. */
  connector: ShellConnector | null;
}

export type ShellParse = { ok: true; stages: ShellStage[] } | { ok: false; reason: string };

/**
 * Parses a command line into stages, or says which construct it refuses and why.
 *
 * @example
 * parseShell("'r''m' -rf build 2>/dev/null && ls | grep x");
 * // stages: rm -rf build (2> /dev/null) &&, ls |, grep x
 */
export function parseShell(line: string): ShellParse {
  try {
    return { ok: true, stages: new Parser(line).parse() };
  } catch (error) {
    if (error instanceof Refusal) return { ok: false, reason: error.message };
    throw error;
  }
}

/**
 * The shell the parser models: dash, which is /bin/sh on Debian and Ubuntu. A checked
 * line runs under this shell, not under whatever /bin/sh is, so it is read the way the
 * check read it. Where dash is not installed, /bin/sh runs it (bash in POSIX mode on
 * macOS; the parser accepts only what both read alike, and takes one digit before a
 * redirect as its file descriptor, as dash does: bash would take `12>` as descriptor 12,
 * writing the same file the check decided).
 */
export const MODELLED_SHELL = 'dash';

let shellPath: string | undefined;

/** The program a checked line runs under: dash when it is installed, else /bin/sh. */
export function lineShell(): string {
  shellPath ??= ['/bin/dash', '/usr/bin/dash'].find((path) => existsSync(path)) ?? '/bin/sh';
  return shellPath;
}

class Refusal extends Error {}

interface Word {
  /** The word after quote removal. */
  value: string;
  /** The same length as value: unquoted characters as themselves, quoted ones as NUL. */
  shape: string;
  quoted: boolean;
  /** Where in value the first quoted piece starts (an empty `''` counts); value.length + 1 when none. */
  firstQuote: number;
}

type Token =
  | { type: 'word'; word: Word }
  | { type: 'redirect'; redirect: ShellRedirect; word: Word | null }
  | { type: 'op'; op: ShellConnector };

interface PendingHeredoc {
  redirect: ShellRedirect;
  delimiter: string;
  quoted: boolean;
  strip: boolean;
}

const QUOTED = '\u0000';
const BLANK = new Set([' ', '\t']);
const OPERATOR = new Set(['|', '&', ';', '<', '>', '(', ')', '\n']);

/** Reserved words that open or close a compound command: the parser takes simple commands only. */
const KEYWORDS: ReadonlyMap<string, string> = new Map([
  ['if', 'if/then/fi'],
  ['then', 'if/then/fi'],
  ['elif', 'if/then/fi'],
  ['else', 'if/then/fi'],
  ['fi', 'if/then/fi'],
  ['case', 'case/esac'],
  ['esac', 'case/esac'],
  ['for', 'a for loop'],
  ['select', 'a select loop'],
  ['while', 'a while loop'],
  ['until', 'an until loop'],
  ['do', 'a loop body (do/done)'],
  ['done', 'a loop body (do/done)'],
  ['function', 'a function definition'],
  ['coproc', 'a coprocess (coproc)'],
  ['{', 'a brace group { ...; }'],
  ['}', 'a brace group { ...; }'],
  ['[[', 'a [[ ... ]] conditional (bash only; its < and > are not redirects)'],
  [']]', 'a [[ ... ]] conditional (bash only; its < and > are not redirects)'],
]);

/** Builtins that run a string as code or change how later commands are read. */
const CODE_BUILTINS: Record<string, string> = {
  eval: 'eval runs a string as shell code',
  source: 'source runs a file as shell code',
  '.': '. runs a file as shell code',
  alias: 'alias changes what a later command name runs',
  trap: 'trap runs a string as shell code later',
  builtin: 'builtin runs a shell builtin (eval among them) past the check',
  enable: 'enable loads builtins from a shared object',
  let: 'let evaluates arithmetic, whose array subscripts can run commands',
  fc: 'fc re-runs commands from the history',
  shopt: 'shopt changes how bash reads later commands (expand_aliases)',
  pushd: 'pushd/popd move through a directory stack the check does not track',
  popd: 'pushd/popd move through a directory stack the check does not track',
  coproc: 'coproc starts a coprocess',
  compgen: 'compgen -C/-F runs a command or a function for completions',
  complete: 'complete -C/-F runs a command or a function for completions',
  bind: 'bind -x binds a key to shell code',
};

/** Variables the shell itself reads to decide what a later command does. */
const SHELL_VARIABLES = new Set([
  'PS1',
  'PS2',
  'PS3',
  'PS4',
  'PROMPT_COMMAND',
  'IFS',
  'SHELLOPTS',
  'BASHOPTS',
  'BASH_ENV',
  'ENV',
  'CDPATH',
  'GLOBIGNORE',
  'BASH_XTRACEFD',
  'FUNCNEST',
  'BASH_COMPAT',
]);

/** Builtins whose name arguments are evaluated (an array subscript runs `$(...)` in bash). */
const NAME_EVALUATING = new Set([
  'declare',
  'typeset',
  'local',
  'readonly',
  'export',
  'unset',
  'read',
  'printf',
  'test',
  '[',
  'wait',
  'mapfile',
  'readarray',
  'getopts',
]);

class Parser {
  readonly #src: string;
  #pos = 0;
  #pending: PendingHeredoc[] = [];

  constructor(src: string) {
    this.#src = src;
  }

  parse(): ShellStage[] {
    return assemble(this.#tokens());
  }

  #tokens(): Token[] {
    const tokens: Token[] = [];
    const src = this.#src;
    while (this.#pos < src.length) {
      const c = src[this.#pos] as string;
      const next = src[this.#pos + 1];
      if (BLANK.has(c)) {
        this.#pos++;
      } else if (c === '\\' && next === '\n') {
        this.#pos += 2;
      } else if (c === '#') {
        const end = src.indexOf('\n', this.#pos);
        this.#pos = end === -1 ? src.length : end;
      } else if (c === '\n') {
        this.#pos++;
        tokens.push({ type: 'op', op: '\n' });
        this.#readHeredocs();
      } else if (c === ';') {
        if (next === ';' || next === '&')
          throw new Refusal(`${c}${next} ends a case branch: case/esac is not supported`);
        this.#pos++;
        tokens.push({ type: 'op', op: ';' });
      } else if (c === '&') {
        if (next === '&') {
          this.#pos += 2;
          tokens.push({ type: 'op', op: '&&' });
        } else if (next === '>') {
          throw new Refusal(
            '&> (bash only): /bin/sh reads it as a background job (&) and then > (truncating the file); write >file 2>&1',
          );
        } else {
          throw new Refusal(
            'a background job (&): it would outlive the check and the command; use shell_start for a long-lived command',
          );
        }
      } else if (c === '|') {
        if (next === '|') {
          this.#pos += 2;
          tokens.push({ type: 'op', op: '||' });
        } else if (next === '&') {
          throw new Refusal('|& (bash only; sh reads it as a pipe into a background job): write 2>&1 | instead');
        } else {
          this.#pos++;
          tokens.push({ type: 'op', op: '|' });
        }
      } else if (c === '(') {
        throw new Refusal(this.#parenReason(tokens));
      } else if (c === ')') {
        throw new Refusal('an unmatched ) (subshells, case patterns and function definitions are not supported)');
      } else if (c === '<' || c === '>') {
        tokens.push(this.#redirect(null));
      } else {
        const word = this.#word();
        const after = src[this.#pos];
        // dash takes one digit before a redirect as its file descriptor; `12>x` is the word 12, then >x.
        if ((after === '<' || after === '>') && !word.quoted && /^[0-9]$/.test(word.value)) {
          tokens.push(this.#redirect(Number(word.value)));
        } else if (
          (after === '<' || after === '>') &&
          !word.quoted &&
          /^\{[A-Za-z_][A-Za-z0-9_]*\}$/.test(word.value)
        ) {
          throw new Refusal(`a named file descriptor ${word.value}${after} (bash only)`);
        } else {
          tokens.push({ type: 'word', word });
        }
      }
    }
    if (this.#pending.length > 0) {
      const first = this.#pending[0] as PendingHeredoc;
      throw new Refusal(`an unterminated here-doc: no line ${JSON.stringify(first.delimiter)} ends it`);
    }
    return tokens;
  }

  #parenReason(tokens: Token[]): string {
    const src = this.#src;
    if (src[this.#pos + 1] === '(') return 'an arithmetic command ((...)): its array subscripts can run commands';
    const last = tokens[tokens.length - 1];
    const rest = src.slice(this.#pos + 1).trimStart();
    if (last?.type === 'word' && rest.startsWith(')')) {
      return `a function definition ${last.word.value}() {...}: the check cannot follow what a call to it runs`;
    }
    if (last?.type === 'word') return `( after a word (a function definition or a bash array): not supported`;
    return 'a subshell ( ... ): write the commands without the parentheses';
  }

  /** A redirect operator at the current position, then its target. */
  #redirect(fd: number | null): Token {
    const src = this.#src;
    const c = src[this.#pos];
    const next = src[this.#pos + 1];
    if (c === '<') {
      if (next === '(') throw new Refusal('a process substitution <(...): it runs a command the check cannot see');
      if (next === '>') throw new Refusal('a read-write redirect <> is not supported');
      if (src.startsWith('<<<', this.#pos)) {
        this.#pos += 3;
        return this.#redirectTarget({ fd: fd ?? 0, op: '<<<', target: '' });
      }
      if (next === '<') {
        const strip = src[this.#pos + 2] === '-';
        this.#pos += strip ? 3 : 2;
        return this.#heredoc(fd ?? 0, strip);
      }
      if (next === '&') {
        this.#pos += 2;
        return this.#redirectTarget({ fd: fd ?? 0, op: '<&', target: '' });
      }
      this.#pos++;
      return this.#redirectTarget({ fd: fd ?? 0, op: '<', target: '' });
    }
    if (next === '(') throw new Refusal('a process substitution >(...): it runs a command the check cannot see');
    if (next === '>') {
      this.#pos += 2;
      return this.#redirectTarget({ fd: fd ?? 1, op: '>>', target: '' });
    }
    if (next === '&') {
      this.#pos += 2;
      return this.#redirectTarget({ fd: fd ?? 1, op: '>&', target: '' });
    }
    this.#pos += next === '|' ? 2 : 1;
    return this.#redirectTarget({ fd: fd ?? 1, op: '>', target: '' });
  }

  #redirectTarget(redirect: ShellRedirect): Token {
    const word = this.#targetWord(redirect.op);
    redirect.target = word.value;
    return { type: 'redirect', redirect, word };
  }

  #targetWord(op: string): Word {
    if (this.#src.startsWith('\\\n', this.#pos)) {
      throw new Refusal(
        `a line continuation right after ${op}: the shell joins it with what follows into another operator`,
      );
    }
    for (;;) {
      if (BLANK.has(this.#src[this.#pos] ?? '')) this.#pos++;
      else if (this.#src.startsWith('\\\n', this.#pos)) this.#pos += 2;
      else break;
    }
    const c = this.#src[this.#pos];
    if (c === '(') throw new Refusal(`${op}( ...: a process substitution or subshell as a redirect target`);
    if (c === undefined || OPERATOR.has(c) || c === '#') throw new Refusal(`the redirect ${op} has no target`);
    return this.#word();
  }

  #heredoc(fd: number, strip: boolean): Token {
    const word = this.#targetWord(strip ? '<<-' : '<<');
    const redirect: ShellRedirect = { fd, op: '<<', target: '' };
    this.#pending.push({ redirect, delimiter: word.value, quoted: word.quoted, strip });
    return { type: 'redirect', redirect, word: null };
  }

  /** Reads the bodies of the here-docs opened on the line that just ended. */
  #readHeredocs(): void {
    const src = this.#src;
    for (const doc of this.#pending.splice(0)) {
      const lines: string[] = [];
      let closed = false;
      while (this.#pos < src.length) {
        const end = src.indexOf('\n', this.#pos);
        const raw = src.slice(this.#pos, end === -1 ? src.length : end);
        this.#pos = end === -1 ? src.length : end + 1;
        const line = doc.strip ? raw.replace(/^\t+/, '') : raw;
        if (line === doc.delimiter) {
          closed = true;
          break;
        }
        lines.push(line);
      }
      if (!closed) throw new Refusal(`an unterminated here-doc: no line ${JSON.stringify(doc.delimiter)} ends it`);
      const body = lines.map((line) => `${line}\n`).join('');
      if (!doc.quoted && lines.some((line) => line.endsWith('\\'))) {
        throw new Refusal(
          `a line continuation in an unquoted here-doc (<<${doc.delimiter}): the shell joins the lines before it looks for the end and expands what they form`,
        );
      }
      if (!doc.quoted && /\$\(|`|\$\{|\$\[/.test(body)) {
        throw new Refusal(
          `an unquoted here-doc (<<${doc.delimiter}) whose body holds $(...), backticks or \${...}: the shell would expand them; quote the delimiter (<<'${doc.delimiter}') to pass the text as it is`,
        );
      }
      doc.redirect.target = body;
    }
  }

  /** One word: unquoted, single-quoted, double-quoted and escaped pieces, concatenated. */
  #word(): Word {
    const src = this.#src;
    let value = '';
    let shape = '';
    let quoted = false;
    let firstQuote = -1;
    for (;;) {
      const c = src[this.#pos];
      if (c === undefined || BLANK.has(c) || OPERATOR.has(c)) break;
      controlCheck(c);
      const continuation = c === '\\' && src[this.#pos + 1] === '\n';
      if (firstQuote === -1 && !continuation && (c === '\\' || c === "'" || c === '"')) firstQuote = value.length;
      if (c === '\\') {
        const next = src[this.#pos + 1];
        if (next === undefined) throw new Refusal('a backslash at the end of the line');
        this.#pos += 2;
        if (next === '\n') continue;
        controlCheck(next);
        value += next;
        shape += QUOTED;
        quoted = true;
      } else if (c === "'") {
        const end = src.indexOf("'", this.#pos + 1);
        if (end === -1) throw new Refusal('an unterminated single quote');
        const piece = src.slice(this.#pos + 1, end);
        for (const ch of piece) if (ch !== '\n') controlCheck(ch);
        value += piece;
        shape += QUOTED.repeat(piece.length);
        quoted = true;
        this.#pos = end + 1;
      } else if (c === '"') {
        const piece = this.#doubleQuoted();
        value += piece;
        shape += QUOTED.repeat(piece.length);
        quoted = true;
      } else if (c === '`') {
        throw new Refusal('a command substitution `...`: its output is not known when the line is checked');
      } else if (c === '$') {
        dollar(src, this.#pos, false);
        value += '$';
        shape += '$';
        this.#pos++;
      } else {
        value += c;
        shape += c;
        this.#pos++;
      }
    }
    // A word made of line continuations alone is no word: the caller must not see one.
    if (value === '' && !quoted) throw new Refusal('a line continuation where a word was expected');
    return { value, shape, quoted, firstQuote: firstQuote === -1 ? value.length + 1 : firstQuote };
  }

  #doubleQuoted(): string {
    const src = this.#src;
    let value = '';
    this.#pos++;
    for (;;) {
      const c = src[this.#pos];
      if (c === undefined) throw new Refusal('an unterminated double quote');
      if (c === '"') {
        this.#pos++;
        return value;
      }
      if (c !== '\n') controlCheck(c);
      if (c === '\\') {
        const next = src[this.#pos + 1];
        if (next === '\n') {
          this.#pos += 2;
        } else if (next === '"' || next === '$' || next === '`' || next === '\\') {
          value += next;
          this.#pos += 2;
        } else {
          value += c;
          this.#pos++;
        }
      } else if (c === '`') {
        throw new Refusal(
          'a command substitution `...` inside double quotes: its output is not known when the line is checked',
        );
      } else if (c === '$') {
        dollar(src, this.#pos, true);
        value += c;
        this.#pos++;
      } else {
        value += c;
        this.#pos++;
      }
    }
  }
}

function controlCheck(c: string): void {
  const code = c.charCodeAt(0);
  if ((code < 0x20 && c !== '\t') || code === 0x7f) {
    throw new Refusal(`a control character U+${code.toString(16).padStart(4, '0').toUpperCase()} in the line`);
  }
}

/** Refuses a `$` that expands; returns when it is a literal dollar sign. */
function dollar(src: string, pos: number, inDouble: boolean): void {
  const next = src[pos + 1];
  if (next === undefined) return;
  if (next === '\\' && src[pos + 2] === '\n') {
    throw new Refusal('a line continuation right after $: the shell joins the lines first and expands what follows');
  }
  if (next === '(') {
    if (src[pos + 2] === '(')
      throw new Refusal('an arithmetic expansion $((...)): its array subscripts can run commands');
    throw new Refusal('a command substitution $(...): its output is not known when the line is checked');
  }
  if (next === '{') {
    throw new Refusal(
      `a parameter expansion \${...}: its value is not known when the line is checked (single-quote a literal $)`,
    );
  }
  if (next === '[') throw new Refusal('an arithmetic expansion $[...]');
  if (/[A-Za-z_]/.test(next)) {
    const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(pos + 1))?.[0] ?? next;
    throw new Refusal(
      `a parameter expansion $${name}: its value is not known when the line is checked, so what runs could differ from what was checked (single-quote a literal $)`,
    );
  }
  if (/[0-9@*#?$!-]/.test(next)) {
    throw new Refusal(`the special parameter $${next}: its value is not known when the line is checked`);
  }
  if (!inDouble && next === "'") {
    throw new Refusal("ANSI-C quoting $'...': sh and bash read it differently");
  }
  if (!inDouble && next === '"') throw new Refusal('locale quoting $"...": sh and bash read it differently');
}

/** Expands a leading `~` or `~/` to the home directory; refuses `~user`, `~+`, `~-`. */
function tilde(word: Word): string {
  if (word.shape[0] !== '~' || word.firstQuote === 0) return word.value;
  const slash = word.shape.indexOf('/');
  const end = slash === -1 ? word.shape.length : slash;
  // A quoted piece (even '') inside the tilde-prefix turns expansion off.
  if (word.firstQuote <= end) return word.value;
  if (end === 1) return homedir() + word.value.slice(1);
  throw new Refusal(
    `the tilde expansion ${word.value.slice(0, end)}: another user's home or the directory stack is not resolved`,
  );
}

/** `NAME=` at the start of a word, unquoted (a quote before the = makes it an ordinary word). */
function assignmentPrefix(word: Word): RegExpExecArray | null {
  const match = /^([A-Za-z_][A-Za-z0-9_]*)=/.exec(word.shape);
  return match && word.firstQuote >= match[0].length ? match : null;
}

/** Checks that apply to every word that is not an assignment prefix. */
function plainWord(word: Word): string {
  if (/\{[^{}]*(,|\.\.)[^{}]*\}/.test(word.shape)) {
    throw new Refusal(`the brace expansion in ${word.value}: bash expands it into several words, sh does not`);
  }
  const assignment = assignmentPrefix(word);
  if (assignment && /(^~|:~)/.test(word.shape.slice(assignment[0].length))) {
    throw new Refusal(`a tilde after = or : in ${word.value}: bash expands it there, sh does not`);
  }
  return tilde(word);
}

function emptyStage(): ShellStage {
  return { argv: [], globs: [], assignments: {}, redirects: [], connector: null };
}

/** A word's pattern for file name expansion: quoted characters escaped, so only unquoted ones are special. */
function globPattern(word: Word): string | null {
  if (!/[*?[]/.test(word.shape)) return null;
  let pattern = '';
  for (let i = 0; i < word.value.length; i++) {
    const ch = word.value[i] as string;
    pattern += word.shape[i] === QUOTED && /[*?[\]\\!^-]/.test(ch) ? `\\${ch}` : ch;
  }
  return pattern;
}

function isEmpty(stage: ShellStage): boolean {
  return stage.argv.length === 0 && stage.redirects.length === 0 && Object.keys(stage.assignments).length === 0;
}

/** Turns tokens into stages, refusing compound commands and what runs code from a string. */
function assemble(tokens: Token[]): ShellStage[] {
  const stages: ShellStage[] = [];
  let stage = emptyStage();
  let negated = false;
  const finish = (connector: ShellConnector | null): void => {
    checkStage(stage);
    stage.connector = connector;
    stages.push(stage);
    stage = emptyStage();
    negated = false;
  };
  for (const token of tokens) {
    if (token.type === 'op') {
      if (isEmpty(stage)) {
        // A newline after &&, ||, | or on its own continues the line; anything else has no command.
        if (token.op === '\n' && !negated) continue;
        throw new Refusal(`a syntax error: ${token.op === '\n' ? 'a newline' : token.op} with no command before it`);
      }
      finish(token.op);
      continue;
    }
    if (token.type === 'redirect') {
      if (token.word) {
        if (token.redirect.op !== '<<<') {
          token.redirect.target = plainWord(token.word);
          if (/[*?[]/.test(token.word.shape)) {
            throw new Refusal(
              `a pattern in the redirect target ${token.word.value}: the shell would expand it to a file the check did not see`,
            );
          }
        }
      }
      stage.redirects.push(token.redirect);
      continue;
    }
    const word = token.word;
    const assignment = assignmentPrefix(word);
    if (stage.argv.length === 0 && assignment) {
      const name = assignment[1] as string;
      const valueShape = word.shape.slice(assignment[0].length);
      if (/(^~|:~)/.test(valueShape)) throw new Refusal(`a tilde in the assignment ${word.value}: it is expanded`);
      stage.assignments[name] = word.value.slice(assignment[0].length);
      continue;
    }
    if (
      stage.argv.length === 0 &&
      !word.quoted &&
      word.value === '!' &&
      Object.keys(stage.assignments).length === 0 &&
      !negated
    ) {
      negated = true;
      continue;
    }
    const keyword = KEYWORDS.get(word.value);
    if (stage.argv.length === 0 && !word.quoted && keyword !== undefined) {
      throw new Refusal(`${keyword} (the keyword ${word.value}): only simple commands are supported`);
    }
    const value = plainWord(word);
    const pattern = value === word.value ? globPattern(word) : null;
    if (pattern !== null) stage.globs.push({ index: stage.argv.length, pattern });
    else if (value !== word.value && /[*?[]/.test(word.shape)) {
      throw new Refusal(`a pattern after ~ in ${word.value}: write the home directory's path`);
    }
    stage.argv.push(value);
  }
  if (isEmpty(stage)) {
    const last = stages[stages.length - 1];
    if (last && (last.connector === '&&' || last.connector === '||' || last.connector === '|')) {
      throw new Refusal(`a syntax error: the line ends after ${last.connector}`);
    }
    if (negated) throw new Refusal('a syntax error: the line ends after !');
  } else {
    finish(null);
  }
  const last = stages[stages.length - 1];
  if (last && (last.connector === ';' || last.connector === '\n')) last.connector = null;
  return stages;
}

function checkStage(stage: ShellStage): void {
  const exporting = ['export', 'readonly', 'declare', 'typeset', 'local'].includes(stage.argv[0] ?? '');
  const named = [
    ...Object.keys(stage.assignments),
    ...(exporting ? stage.argv.slice(1).map((arg) => arg.split('=')[0] ?? '') : []),
  ];
  const internal = named.find((name) => SHELL_VARIABLES.has(name));
  if (internal !== undefined) {
    throw new Refusal(`assigning ${internal}: it changes how the shell reads or runs the commands after it`);
  }
  const program = stage.argv[0];
  if (program === undefined) return;
  const code = Object.hasOwn(CODE_BUILTINS, program) ? CODE_BUILTINS[program] : undefined;
  if (code !== undefined) throw new Refusal(`${program}: ${code}`);
  if (program === 'exec' && stage.argv.length === 1 && stage.redirects.length > 0) {
    throw new Refusal('exec with only redirects: it changes the shell’s own files for the rest of the line');
  }
  if (program === 'hash' && stage.argv.slice(1).some((arg) => /^-[a-z]*p/.test(arg))) {
    throw new Refusal('hash -p binds a command name to another file (bash)');
  }
  if ((program === 'mapfile' || program === 'readarray') && stage.argv.some((arg) => /^-[a-zA-Z]*C/.test(arg))) {
    throw new Refusal(`${program} -C runs a string as a callback`);
  }
  if (NAME_EVALUATING.has(program) && stage.argv.slice(1).some((arg) => arg.includes('[') && /[$`]/.test(arg))) {
    throw new Refusal(`${program} with a subscript holding $ or a backtick: bash evaluates it and can run a command`);
  }
}
