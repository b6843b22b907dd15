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

/** The words `pattern` expands to in `cwd`, or null when it matches nothing (the shell keeps the word). */
export function expandPattern(pattern: string, cwd: string): string[] | null {
  const absolute = pattern.startsWith('/');
  const components = pattern.split('/').filter((part, index) => part !== '' || index === 0);
  const start = absolute ? '/' : '';
  let results: string[] = [start];
  for (const [index, component] of components.entries()) {
    if (absolute && index === 0) continue;
    const last = index === components.length - 1;
    const next: string[] = [];
    for (const prefix of results) {
      const dir = prefix === '' ? cwd : prefix.startsWith('/') ? prefix : `${cwd}/${prefix}`;
      if (!hasMeta(component)) {
        const joined = `${prefix}${literal(component)}`;
        if (last ? exists(`${dir}/${literal(component)}`) : isDirectory(`${dir}/${literal(component)}`)) {
          next.push(last ? joined : `${joined}/`);
        }
        continue;
      }
      const matcher = compile(component);
      const dot = component.startsWith('.') || component.startsWith('\\.');
      let names: string[];
      try {
        names = readdirSync(dir);
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
  if (pattern.endsWith('/'))
    results = results
      .filter((word) => isDirectory(word.startsWith('/') ? word : `${cwd}/${word}`))
      .map((word) => (word.endsWith('/') ? word : `${word}/`));
  if (results.length === 0) return null;
  return results.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
}

function exists(path: string): boolean {
  return statSync(path, { throwIfNoEntry: false }) !== undefined;
}

function isDirectory(path: string): boolean {
  return statSync(path, { throwIfNoEntry: false })?.isDirectory() === true;
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
  return new RegExp(`^${source}$`, 's');
}

function escapeRegExp(ch: string): string {
  return /[.*+?^${}()|[\]\\/]/.test(ch) ? `\\${ch}` : ch;
}

function escapeClass(ch: string): string {
  return /[\]\\^-]/.test(ch) ? `\\${ch}` : ch;
}
