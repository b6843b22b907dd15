/**
 * One configuration file read: parsed by smol-toml, and its keys located by line, so an
 * error and `Config.explain` can name the line that set a value. The parser is smol-toml's;
 * the locator only follows table headers and `key =` lines (skipping multi-line strings and
 * the inside of multi-line arrays), and a key it cannot place (one inside an inline table)
 * is named by the line of the nearest key above it that it did place.
 */
import { readFileSync, statSync } from 'node:fs';
import { parse, TomlError } from 'smol-toml';
import { ConfigError, ErrorCode } from '../errors.js';

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

/** Reads and parses `file`; a syntax error names its line and column, and nothing is used. */
/** The largest configuration file read: far above any real one, and a bound on what a repository can make the caller parse. */
export const MAX_CONFIG_BYTES = 1024 * 1024;

export function readToml(file: string): ParsedFile {
  let text: string;
  try {
    const size = statSync(file).size;
    if (size > MAX_CONFIG_BYTES)
      throw new ConfigError(
        ErrorCode.ConfigInvalid,
        `${file}: is ${size} bytes, above the ${MAX_CONFIG_BYTES} a configuration file may have (nothing of the configuration was used).`,
        { details: { file, size } },
      );
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    throw new ConfigError(
      ErrorCode.ConfigInvalid,
      `${file}: cannot be read (${error instanceof Error ? error.message : String(error)}).`,
      { details: { file } },
    );
  }
  return parseToml(text, file);
}

export function parseToml(text: string, file: string): ParsedFile {
  let data: Record<string, unknown>;
  try {
    data = parse(text) as Record<string, unknown>;
  } catch (error) {
    if (error instanceof TomlError) {
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
  return { file, data, lines };
}

/** A key as written, unquoted: `a."b.c"` is ["a", "b.c"]. */
function keyParts(raw: string): string[] {
  const parts: string[] = [];
  let current = '';
  let quote: string | null = null;
  for (const char of raw.trim()) {
    if (quote) {
      if (char === quote) quote = null;
      else current += char;
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
      lines.set(table.join('.'), number + 1);
      continue;
    }
    const equals = assignment(line);
    if (equals <= 0) continue;
    const path = [...table, ...keyParts(line.slice(0, equals))].join('.');
    lines.set(path, number + 1);
    const scanned = depthAndString(line.slice(equals + 1), null);
    open = scanned.open;
    depth = scanned.depth;
  }
  return lines;
}

/** The line that set `path` in a file, or the line of the nearest key above it that was placed. */
export function lineOf(lines: ReadonlyMap<string, number>, path: string): number | null {
  let key = path;
  for (;;) {
    const found = lines.get(key);
    if (found !== undefined) return found;
    const cut = Math.max(key.lastIndexOf('.'), key.lastIndexOf('['));
    if (cut <= 0) return null;
    key = key.slice(0, cut);
  }
}
