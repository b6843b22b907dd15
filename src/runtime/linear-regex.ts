/**
 * Regular expressions that come from outside — a JSON Schema `pattern` or
 * `patternProperties` key in a tool's parameters (the embedder's or an MCP server's), in
 * an MCP tool's output schema, in a run's output schema — are matched here, against text
 * a model chose, with RE2's linear-time engine (the `re2js` port) instead of JavaScript's
 * backtracking one. On the backtracking engine `^(a+)+$` against forty `a`s and a `!`
 * runs for hours, and on the main thread that stops every run of the process with it,
 * deadlines included; here it is one pass over the text.
 *
 * A pattern is read with JavaScript's meaning where the two syntaxes differ on something
 * schemas use (`\uXXXX`, `\u{X}`, `\cX`, `\s`, `.`), and otherwise as RE2 reads it. What
 * RE2 cannot run in linear time — backreferences, lookahead and lookbehind — is refused
 * when the schema is compiled, by a {@link LinearPatternError} naming the pattern; it is
 * never handed to the backtracking engine instead.
 *
 * `re2js` is loaded on first use: agent threads load this module with the contract, and
 * most runs never compile a pattern.
 */
import type { RE2JS as RE2JSClass } from 're2js';
import { requiredOnFirstUse } from './lazy-require.js';

const re2js = requiredOnFirstUse<{ RE2JS: typeof RE2JSClass }>('re2js');
const re2 = () => re2js().RE2JS;

/** A pattern the linear-time engine cannot run, and why; callers say whose pattern it was. */
export class LinearPatternError extends Error {
  readonly pattern: string;
  readonly reason: string;
  constructor(pattern: string, reason: string) {
    super(
      `the pattern ${JSON.stringify(pattern)} cannot be matched in linear time (${reason}); ` +
        'patterns are matched with RE2, which has no backreferences, lookahead or lookbehind, ' +
        'and are never run on a backtracking engine',
    );
    this.name = 'LinearPatternError';
    this.pattern = pattern;
    this.reason = reason;
  }
}

/** What a caller adds to a {@link LinearPatternError}'s message: what to do about it. */
export const LINEAR_PATTERN_ADVICE =
  'Rewrite the pattern without backreferences (\\1, \\k<name>) and lookaround ((?=, (?!, (?<=, (?<!), or drop it and check that part in code';

/** What Ajv's `code.regExp` option takes: `(pattern, flags) => { test }`. */
export interface LinearRegExp {
  test(text: string): boolean;
  toString(): string;
}

/** JavaScript's `\s`: ASCII white space, the Unicode space separators, the line and paragraph separators and the BOM. */
const SPACE = '\\t\\n\\v\\f\\r\\p{Zs}\\x{2028}\\x{2029}\\x{feff}';
/** JavaScript's `.` without the `s` flag: anything but a line terminator. */
const NOT_LINE_END = '[^\\n\\r\\x{2028}\\x{2029}]';

/**
 * `pattern`, an ECMAScript regular expression, spelled for RE2 where the two read the same
 * text differently. Escapes are walked one at a time, so `\\u0041` (an escaped backslash,
 * then `u0041`) is left as it is.
 */
function toRe2Syntax(pattern: string): string {
  let out = '';
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i] as string;
    if (ch === '\\') {
      const next = pattern[i + 1];
      if (next === undefined) {
        out += ch;
        continue;
      }
      const hex4 = /^u([0-9A-Fa-f]{4})/.exec(pattern.slice(i + 1, i + 6));
      const braced = /^u\{([0-9A-Fa-f]{1,6})\}/.exec(pattern.slice(i + 1, i + 10));
      const control = /^c([A-Za-z])/.exec(pattern.slice(i + 1, i + 3));
      const low = hex4 ? /^\\u([Dd][C-Fc-f][0-9A-Fa-f]{2})/.exec(pattern.slice(i + 6, i + 12)) : null;
      if (hex4 && low && /^[Dd][89ABab]/.test(hex4[1] as string)) {
        // A surrogate pair written as two escapes is the one code point it encodes, as under the `u` flag.
        const point =
          (Number.parseInt(hex4[1] as string, 16) - 0xd800) * 0x400 +
          Number.parseInt(low[1] as string, 16) -
          0xdc00 +
          0x10000;
        out += `\\x{${point.toString(16)}}`;
        i += 11;
      } else if (hex4) {
        out += `\\x{${hex4[1]}}`;
        i += 5;
      } else if (braced) {
        out += `\\x{${braced[1]}}`;
        i += (braced[0] as string).length;
      } else if (control) {
        out += `\\x{${((control[1] as string).charCodeAt(0) % 32).toString(16)}}`;
        i += 2;
      } else if (next === 's') {
        out += inClass ? SPACE : `[${SPACE}]`;
        i += 1;
      } else if (next === 'S' && !inClass) {
        // Inside a class RE2's own \S stays (ASCII white space excluded): no class subtraction to say more.
        out += `[^${SPACE}]`;
        i += 1;
      } else {
        out += ch + next;
        i += 1;
      }
      continue;
    }
    if (inClass) {
      if (ch === ']') inClass = false;
      out += ch;
      continue;
    }
    if (ch === '[') {
      inClass = true;
      out += ch;
      // A `]` first in a class (after `^`) is JavaScript's empty class or `[^]`, never a literal.
      if (pattern.startsWith('^]', i + 1)) {
        out += '\\x{0}-\\x{10ffff}]';
        inClass = false;
        i += 2;
      } else if (pattern[i + 1] === ']') {
        // An empty class matches nothing.
        out = `${out.slice(0, -1)}[^\\x{0}-\\x{10ffff}]`;
        inClass = false;
        i += 1;
      }
      continue;
    }
    out += ch === '.' ? NOT_LINE_END : ch;
  }
  return out;
}

/** Compiled patterns, by flags and source: a tool catalogue repeats the same few. */
const compiled = new Map<string, LinearRegExp>();
const COMPILED_LIMIT = 1024;

/**
 * Compiles `pattern` for the linear-time engine, or throws a {@link LinearPatternError}.
 * `flags` are ECMAScript's (`u` is how schemas are read anyway; `i`, `m` and `s` map to
 * RE2's). The result's `test` is an unanchored search, as `RegExp.prototype.test` is.
 */
export function linearRegExp(pattern: string, flags = ''): LinearRegExp {
  const key = `${flags}/${pattern}`;
  const known = compiled.get(key);
  if (known) return known;
  const RE2JS = re2();
  let bits = 0;
  if (flags.includes('i')) bits |= RE2JS.CASE_INSENSITIVE;
  if (flags.includes('m')) bits |= RE2JS.MULTILINE;
  if (flags.includes('s')) bits |= RE2JS.DOTALL;
  let program: RE2JSClass;
  try {
    program = RE2JS.compile(toRe2Syntax(pattern), bits);
  } catch (error) {
    const message = (error as Error).message.replace(/^error parsing regexp: /, '');
    throw new LinearPatternError(pattern, message);
  }
  const regExp: LinearRegExp = {
    test: (text: string) => program.test(text),
    // Ajv keys its compiled patterns by this text.
    toString: () => `/${pattern}/${flags}`,
  };
  if (compiled.size >= COMPILED_LIMIT) compiled.delete(compiled.keys().next().value as string);
  compiled.set(key, regExp);
  return regExp;
}

/**
 * The engine in the shape Ajv's `code.regExp` option takes. `code` is what Ajv would
 * write for it into standalone validation code, which the harness never generates.
 */
export const ajvRegExp: ((pattern: string, flags: string) => LinearRegExp) & { code: string } = Object.assign(
  (pattern: string, flags: string) => linearRegExp(pattern, flags),
  { code: 'linearRegExp' },
);
