/**
 * One configuration file read: parsed by smol-toml, and its keys located by line, so an
 * error and `Config.explain` can name the line that set a value. The parser is smol-toml's;
 * the locator only follows table headers and `key =` lines (skipping multi-line strings and
 * the inside of multi-line arrays), and a key it cannot place (one inside an inline table)
 * is named by the line of the nearest key above it that it did place.
 */
import { lstatSync } from 'node:fs';
import { ConfigError, ErrorCode } from '../errors.js';
import { requiredOnFirstUse } from '../runtime/lazy-require.js';
import { readBounded } from '../runtime/read-bounded.js';

/** smol-toml, required on the first file read: a program that never reads a configuration never loads it. */
const tomlLib = requiredOnFirstUse<typeof import('smol-toml')>('smol-toml');

/** Where a key was set: the file and the line. */
export interface Origin {
  file: string;
  line: number;
}

/** A file's parsed table and the line of each key path it sets (`a.b`, `list[0].c`). */
export interface ParsedFile {
  file: string;
  data: Record<string, unknown>;
  lines: Map<string, number>;
}

/** A table of parsed TOML data. */
export type Table = Record<string, unknown>;
/** Whether a value is a table (a TOML date is not). */
export const isTable = (value: unknown): value is Table =>
  typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);
/** Whether a value is a non-empty array of tables. */
export const isTables = (value: unknown): value is Table[] =>
  Array.isArray(value) && value.length > 0 && value.every(isTable);

/** Reads and parses `file`; a syntax error names its line and column, and nothing is used. */
/** The largest configuration file read: far above any real one, and a bound on what a repository can make the caller parse. */
export const MAX_CONFIG_BYTES = 1024 * 1024;

/**
 * Reads and parses `file`; a syntax error names its line and column, and nothing is used.
 * Only a regular file is read, through one descriptor and never past the size limit, so a
 * device or a pipe cannot hang the caller; with `noLinks` (a workspace's files) a symbolic
 * link is refused too: the floor keeps agents from writing `io.toml`, not what it points to.
 */
export function readToml(file: string, options: { noLinks?: boolean } = {}): ParsedFile {
  const refused = (why: string, code: ErrorCode = ErrorCode.ConfigInvalid) =>
    new ConfigError(code, `${file}: ${why} (nothing of the configuration was used).`, { details: { file } });
  let link = false;
  try {
    link = options.noLinks === true && lstatSync(file).isSymbolicLink();
  } catch (error) {
    throw refused(`cannot be read (${error instanceof Error ? error.message : String(error)})`);
  }
  if (link)
    throw refused(
      'is a symbolic link; a workspace’s configuration must be a regular file at the workspace root, which the policy’s floor keeps agents from writing',
      ErrorCode.ConfigRefused,
    );
  const read = readBounded(file, MAX_CONFIG_BYTES, { noFollow: options.noLinks === true });
  if (!read.ok)
    throw refused(
      read.problem === 'not-file'
        ? 'is not a regular file'
        : read.problem === 'too-large'
          ? `is above the ${MAX_CONFIG_BYTES} bytes a configuration file may have`
          : `cannot be read (${read.code})`,
    );
  return parseToml(read.text, file);
}

export function parseToml(text: string, file: string): ParsedFile {
  let data: Record<string, unknown>;
  try {
    data = tomlLib().parse(text) as Record<string, unknown>;
  } catch (error) {
    if (error instanceof tomlLib().TomlError) {
      const first = error.message.split('\n')[0] ?? 'invalid TOML';
      throw new ConfigError(
        ErrorCode.ConfigInvalid,
        `${file}:${error.line}:${error.column}: ${first.replace(/^Invalid TOML document: /, '')}; fix the TOML there (nothing of the configuration was used).`,
        { details: { file, line: error.line, column: error.column } },
      );
    }
    throw error;
  }
  const lines = locate(text);
  // A key that names an object's own machinery could change what a merged table inherits.
  const walk = (value: unknown, path: string): void => {
    if (typeof value !== 'object' || value === null || value instanceof Date) return;
    for (const [key, child] of Object.entries(value)) {
      const at = Array.isArray(value) ? `${path}[${key}]` : path ? `${path}.${key}` : key;
      if (!Array.isArray(value) && (key === '__proto__' || key === 'constructor' || key === 'prototype'))
        throw new ConfigError(
          ErrorCode.ConfigInvalid,
          `${file}:${lineOf(lines, at) ?? 1}: ${at} is not a key a configuration may use; rename it (nothing of the configuration was used).`,
          { details: { file, key: at } },
        );
      walk(child, at);
    }
  };
  walk(data, '');
  // A key the locator placed that the parser did not make means the lines would be wrong: say so rather than mislead.
  for (const [path, line] of lines)
    if (valueAt(data, path) === undefined)
      throw new ConfigError(
        ErrorCode.ConfigInvalid,
        `${file}:${line}: cannot tell which line sets ${path}; write the keys near it plainly (one key = value a line, no escapes in key names) (nothing of the configuration was used).`,
        { details: { file, line, key: path } },
      );
  return { file, data, lines };
}

/** What a basic string's escape stands for (`\\u0070` is `p`). */
const ESCAPES: Readonly<Record<string, string>> = {
  b: '\b',
  t: '\t',
  n: '\n',
  f: '\f',
  r: '\r',
  e: '\u001b',
  '"': '"',
  '\\': '\\',
};

/** A key as written, unquoted and unescaped: `a."b.c"` is ["a", "b.c"], `"\\u0070"` is ["p"]. */
function keyParts(raw: string): string[] {
  const parts: string[] = [];
  let current = '';
  let quote: string | null = null;
  const text = raw.trim();
  for (let index = 0; index < text.length; index++) {
    const char = text[index] as string;
    if (quote) {
      if (char === quote) quote = null;
      else if (quote === '"' && char === '\\') {
        const next = text[index + 1] ?? '';
        if (next === 'u' || next === 'U') {
          const length = next === 'u' ? 4 : 8;
          current += String.fromCodePoint(Number.parseInt(text.slice(index + 2, index + 2 + length), 16) || 0);
          index += 1 + length;
        } else if (next === 'x') {
          current += String.fromCodePoint(Number.parseInt(text.slice(index + 2, index + 4), 16) || 0);
          index += 3;
        } else {
          current += ESCAPES[next] ?? next;
          index++;
        }
      } else current += char;
    } else if (char === '"' || char === "'") quote = char;
    else if (char === '.') {
      parts.push(current.trim());
      current = '';
    } else current += char;
  }
  parts.push(current.trim());
  return parts;
}

/** The index after the `=` of a `key = value` line, or -1 (a quoted key may hold an `=`). */
function assignment(line: string): number {
  let quote: string | null = null;
  for (let index = 0; index < line.length; index++) {
    const char = line[index] as string;
    if (quote) {
      if (char === quote) quote = null;
    } else if (char === '"' || char === "'") quote = char;
    else if (char === '=') return index;
    else if (char === '#') return -1;
  }
  return -1;
}

/** How far `text` opens brackets (outside strings), and whether it leaves a multi-line string open. */
function depthAndString(text: string, open: string | null): { depth: number; open: string | null } {
  let depth = 0;
  let quote: string | null = open;
  for (let index = 0; index < text.length; index++) {
    const rest = text.slice(index, index + 3);
    if (quote === '"""' || quote === "'''") {
      // In a basic multi-line string a backslash escapes what follows it (\""" does not close it).
      if (quote === '"""' && text[index] === '\\') {
        index++;
        continue;
      }
      if (rest === quote) {
        quote = null;
        index += 2;
      }
      continue;
    }
    const char = text[index] as string;
    if (quote) {
      if (char === '\\' && quote === '"') index++;
      else if (char === quote) quote = null;
      continue;
    }
    if (rest === '"""' || rest === "'''") {
      quote = rest;
      index += 2;
    } else if (char === '"' || char === "'") quote = char;
    else if (char === '#') break;
    else if (char === '[' || char === '{') depth++;
    else if (char === ']' || char === '}') depth--;
  }
  return { depth, open: quote === '"' || quote === "'" ? null : quote };
}

/** A key name a dotted path can carry. */
const PLAIN = /^[^.[\]]+$/;

/** The line of every key path a TOML text sets, arrays of tables by their index. */
export function locate(text: string): Map<string, number> {
  const lines = new Map<string, number>();
  // The element each array of tables (by its dotted name) is at, and how many each has (by its place).
  const current = new Map<string, number>();
  const counts = new Map<string, number>();
  // A header's parts with the index of every array of tables above it: [a.b] under [[a]] is a[1].b.
  const placed = (parts: readonly string[]) =>
    parts.map((part, k) => {
      const index = current.get(parts.slice(0, k + 1).join('.'));
      return index === undefined ? part : `${part}[${index}]`;
    });
  let table: string[] = [];
  // Whether keys under the current header can be placed (its own name is plain).
  let placeable = true;
  let depth = 0;
  let open: string | null = null;
  for (const [number, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.trim();
    if (open || depth > 0) {
      const scanned = depthAndString(raw, open);
      open = scanned.open;
      depth += scanned.depth;
      continue;
    }
    if (line === '' || line.startsWith('#')) continue;
    const header = /^\[\[\s*(.+?)\s*\]\](\s*#.*)?$/.exec(line) ?? /^\[\s*([^[\]].*?)\s*\](\s*#.*)?$/.exec(line);
    if (header) {
      const parts = keyParts(header[1] as string);
      if (line.startsWith('[[')) {
        const parent = placed(parts.slice(0, -1));
        const key = [...parent, parts.at(-1)].join('.');
        const index = counts.get(key) ?? 0;
        counts.set(key, index + 1);
        current.set(parts.join('.'), index);
        table = [...parent, `${parts.at(-1)}[${index}]`];
      } else table = placed(parts);
      placeable = parts.every((part) => PLAIN.test(part));
      if (placeable) lines.set(table.join('.'), number + 1);
      continue;
    }
    const equals = assignment(line);
    if (equals <= 0) continue;
    const parts = keyParts(line.slice(0, equals));
    // A key with a dot or a bracket in its name cannot be told apart in a dotted path: it is named by its table's line.
    if (placeable && parts.every((part) => PLAIN.test(part))) lines.set([...table, ...parts].join('.'), number + 1);
    const scanned = depthAndString(line.slice(equals + 1), null);
    open = scanned.open;
    depth = scanned.depth;
  }
  return lines;
}

/** The value at a key path (`a.b[2].c`) of parsed data, or undefined. */
export function valueAt(data: unknown, path: string): unknown {
  let value = data;
  for (const piece of path.split('.')) {
    const match = /^(.*?)((?:\[\d+\])*)$/.exec(piece) as RegExpExecArray;
    const name = match[1] as string;
    if (name !== '')
      value =
        typeof value === 'object' && value !== null && !Array.isArray(value)
          ? (value as Record<string, unknown>)[name]
          : undefined;
    for (const index of (match[2] ?? '').matchAll(/\[(\d+)\]/g))
      value = Array.isArray(value) ? value[Number(index[1])] : undefined;
    if (value === undefined) return undefined;
  }
  return value;
}

/** The line that set `path` in a file, or the line of the nearest key above it that was placed. */
export function lineOf(lines: ReadonlyMap<string, number>, path: string): number | null {
  let key = path;
  for (;;) {
    const found = lines.get(key);
    if (found !== undefined) return found;
    const cut = Math.max(key.lastIndexOf('.'), key.lastIndexOf('['));
    if (cut <= 0) break;
    key = key.slice(0, cut);
  }
  // A table only its parts set ([[a.b]] places a.b[0], never a): the first line under it.
  let first: number | null = null;
  for (const [key, line] of lines)
    if ((key.startsWith(`${path}.`) || key.startsWith(`${path}[`)) && (first === null || line < first)) first = line;
  return first;
}
