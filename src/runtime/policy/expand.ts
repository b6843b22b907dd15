/**
 * File name expansion as dash performs it, run here against the real directory when a
 * line is checked, so the check sees the words the program will get (`rm *` is checked
 * as `rm -rf notes.txt` when a file named `-rf` is there). Components are matched one by
 * one (`*` and `?` never match `/`), a name starting with `.` only by a pattern starting
 * with `.` (which then matches `.` and `..` too), matches are sorted byte by byte (dash
 * sorts with strcmp, whatever the locale), and a pattern that matches nothing stays as
 * written, without its quotes.
 */
import { readdirSync, statSync } from 'node:fs';

/** How many words one pattern may expand to before the line is refused. */
export const EXPANSION_LIMIT = 1000;

/** A match whose name is not UTF-8: the check could not name the file it would decide. */
export class UndecodableName extends Error {}

/** Text as dash sees it: one character per byte (`?` matches one byte, not one character). */
function bytes(text: string): string {
  return Buffer.from(text, 'utf8').toString('latin1');
}

function onDisk(byteText: string): Buffer {
  return Buffer.from(byteText, 'latin1');
}

const strict = new TextDecoder('utf-8', { fatal: true });

function text(byteText: string): string {
  try {
    return strict.decode(onDisk(byteText));
  } catch {
    throw new UndecodableName(`a file name matched by the pattern is not UTF-8 (${JSON.stringify(byteText)})`);
  }
}

/**
 * The words `pattern` expands to in `cwd`, or null when it matches nothing (the shell
 * keeps the word). Matching is on bytes, as dash's is. Throws {@link UndecodableName}
 * when a match is not UTF-8.
 */
export function expandPattern(pattern: string, cwd: string): string[] | null {
  const source = bytes(pattern);
  const base = bytes(cwd);
  const absolute = source.startsWith('/');
  const components = source.split('/').filter((part, index) => part !== '' || index === 0);
  let results: string[] = [absolute ? '/' : ''];
  for (const [index, component] of components.entries()) {
    if (absolute && index === 0) continue;
    const last = index === components.length - 1;
    const next: string[] = [];
    for (const prefix of results) {
      const dir = prefix === '' ? base : prefix.startsWith('/') ? prefix : `${base}/${prefix}`;
      if (!hasMeta(component)) {
        const name = literal(component);
        if (last ? exists(`${dir}/${name}`) : isDirectory(`${dir}/${name}`)) {
          next.push(last ? `${prefix}${name}` : `${prefix}${name}/`);
        }
        continue;
      }
      const matcher = compile(component);
      const dot = component.startsWith('.') || component.startsWith('\\.');
      let names: string[];
      try {
        names = readdirSync(onDisk(dir), { encoding: 'buffer' }).map((name) => name.toString('latin1'));
      } catch {
        continue;
      }
      if (dot) names.push('.', '..');
      for (const name of names) {
        if (name.startsWith('.') && !dot) continue;
        if (!matcher.test(name)) continue;
        if (!last && !isDirectory(`${dir}/${name}`)) continue;
        next.push(last ? `${prefix}${name}` : `${prefix}${name}/`);
      }
    }
    results = next;
    if (results.length === 0) return null;
  }
  // A trailing slash in the pattern keeps only directories, written with the slash.
  if (source.endsWith('/')) {
    results = results
      .filter((word) => isDirectory(word.startsWith('/') ? word : `${base}/${word}`))
      .map((word) => (word.endsWith('/') ? word : `${word}/`));
  }
  if (results.length === 0) return null;
  // dash sorts with strcmp: byte by byte, which the one-character-per-byte strings compare as.
  return results.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).map(text);
}

function exists(byteText: string): boolean {
  return statSync(onDisk(byteText), { throwIfNoEntry: false }) !== undefined;
}

function isDirectory(byteText: string): boolean {
  return statSync(onDisk(byteText), { throwIfNoEntry: false })?.isDirectory() === true;
}

/** True when a component holds an unescaped `*`, `?` or a `[` that opens a bracket expression. */
function hasMeta(component: string): boolean {
  for (let i = 0; i < component.length; i++) {
    const ch = component[i];
    if (ch === '\\') i++;
    else if (ch === '*' || ch === '?') return true;
    else if (ch === '[' && closingBracket(component, i) !== -1) return true;
  }
  return false;
}

function literal(component: string): string {
  return component.replace(/\\(.)/g, '$1');
}

/** Where the bracket expression opened at `open` closes, or -1 (then `[` is an ordinary character). */
function closingBracket(text: string, open: number): number {
  let i = open + 1;
  if (text[i] === '!' || text[i] === '^') i++;
  if (text[i] === ']') i++;
  for (; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === '[' && text[i + 1] === ':') {
      const end = text.indexOf(':]', i + 2);
      if (end !== -1) i = end + 1;
    } else if (text[i] === ']') return i;
  }
  return -1;
}

const CLASSES: Record<string, string> = {
  alnum: 'A-Za-z0-9',
  alpha: 'A-Za-z',
  blank: ' \\t',
  cntrl: '\\x00-\\x1f\\x7f',
  digit: '0-9',
  graph: '\\x21-\\x7e',
  lower: 'a-z',
  print: '\\x20-\\x7e',
  punct: '!-\\/:-@\\[-`{-~',
  space: ' \\t\\n\\r\\f\\v',
  upper: 'A-Z',
  xdigit: '0-9A-Fa-f',
};

/** One component's pattern as a regular expression over a whole name. */
function compile(component: string): RegExp {
  let source = '';
  for (let i = 0; i < component.length; i++) {
    const ch = component[i] as string;
    if (ch === '\\' && i + 1 < component.length) {
      source += escapeRegExp(component[++i] as string);
    } else if (ch === '*') {
      source += '[^/]*';
    } else if (ch === '?') {
      source += '[^/]';
    } else if (ch === '[' && closingBracket(component, i) !== -1) {
      const end = closingBracket(component, i);
      let body = component.slice(i + 1, end);
      let negate = false;
      if (body.startsWith('!') || body.startsWith('^')) {
        negate = true;
        body = body.slice(1);
      }
      let set = '';
      for (let k = 0; k < body.length; k++) {
        const c = body[k] as string;
        if (c === '[' && body[k + 1] === ':') {
          const close = body.indexOf(':]', k + 2);
          const name = body.slice(k + 2, close);
          set += CLASSES[name] ?? '';
          k = close + 1;
        } else if (c === '\\' && k + 1 < body.length) {
          set += escapeClass(body[++k] as string);
        } else if (c === '-' && k > 0 && k < body.length - 1) {
          set += '-';
        } else {
          set += escapeClass(c);
        }
      }
      source += negate ? `[^/${set}]` : `[${set}]`;
      i = end;
    } else {
      source += escapeRegExp(ch);
    }
  }
  // Over one-character-per-byte text, so `.` and classes never span a byte.
  return new RegExp(`^${source}$`, 's');
}

function escapeRegExp(ch: string): string {
  return /[.*+?^${}()|[\]\\/]/.test(ch) ? `\\${ch}` : ch;
}

function escapeClass(ch: string): string {
  return /[\]\\^-]/.test(ch) ? `\\${ch}` : ch;
}
