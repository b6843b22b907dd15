/**
 * One file checked on its own, with its own lines, before anything is merged: no NUL, no
 * section that is not built, a workspace file's substitutions only in `[app]` (and never a
 * command), its substitutions resolved (the top level's and the chosen profile's), then a
 * workspace file's widening keys and the schema. An error names the file, the line and
 * the key, and never quotes a value a substitution resolved.
 */
import { dirname, resolve } from 'node:path';
import type { z } from 'zod';
import { ConfigError, ErrorCode } from '../errors.js';
import { nearest } from '../runtime/nearest.js';
import { fileSchema, knownKeys, NOT_BUILT } from './schema.js';
import type { ConfigScope } from './scopes.js';
import { filesIn, kindsIn, resolveText } from './substitute.js';
import { isTable, lineOf, type ParsedFile, type Table } from './toml.js';
import { inside, refuse, widening } from './widening.js';

/** What reading the files found besides the values: the variables substitutions read, and renamed keys. */
export interface Findings {
  env: Set<string>;
  warnings: string[];
}

/**
 * Checks one file (sections not built, where a workspace file may use substitutions, its
 * widening keys, then the schema) and resolves its substitutions in place: the top level's
 * and the chosen profile's, never another profile's (a variable only it needs may be unset).
 * Returns the keys a substitution replaced, each with its value as written.
 */
export function check(
  parsed: ParsedFile,
  scope: ConfigScope,
  userFile: string,
  root: string,
  profile: string | undefined,
  findings: Findings,
): { written: Map<string, unknown>; resolved: [string, string][]; raw: Table } {
  const { file, data, lines } = parsed;
  const at = (key: string) => `${file}:${lineOf(lines, key) ?? 1}`;
  const workspace = scope === 'project' || scope === 'local';
  const bodies: [string, Table][] = [['', data]];
  for (const [name, body] of Object.entries(isTable(data.profile) ? data.profile : {}))
    if (isTable(body)) bodies.push([`profile.${name}.`, body]);
  // A NUL cannot be in a path, a name or an argv, and a value with one only ever fails later and less clearly.
  const nul = (value: unknown, path: string): string | null => {
    if (typeof value === 'string') return value.includes('\0') ? path : null;
    if (Array.isArray(value)) {
      for (const [index, item] of value.entries()) {
        const found = nul(item, `${path}[${index}]`);
        if (found) return found;
      }
    } else if (isTable(value))
      for (const [key, item] of Object.entries(value)) {
        const here = path ? `${path}.${key}` : key;
        const found = key.includes('\0') ? here : nul(item, here);
        if (found) return found;
      }
    return null;
  };
  const withNul = nul(data, '');
  if (withNul !== null)
    throw new ConfigError(
      ErrorCode.ConfigInvalid,
      `${at(withNul)}: ${withNul.replace(/\0/g, '\\0')} holds a NUL character, which no path, name or command may; remove it (nothing of the configuration was used).`,
      { details: { file, line: lineOf(lines, withNul), key: withNul } },
    );
  for (const [prefix, body] of bodies)
    for (const section of NOT_BUILT)
      if (section in body) {
        const key = `${prefix}${section}`;
        throw new ConfigError(
          ErrorCode.ConfigInvalid,
          `${at(key)}: [${section}] is not built yet in this release of io-harness; remove it (nothing of the configuration was used).`,
          { details: { file, line: lineOf(lines, key), key } },
        );
      }
  if (workspace)
    substitutions(data, '', (key, text) => {
      const kinds = kindsIn(text);
      if (kinds.size === 0) return;
      if (kinds.has('cmd'))
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the substitution's spelling, named for the reader
        refuse(file, lineOf(lines, key), key, 'runs a command (${cmd:...})', userFile);
      // Outside [app], a value of a workspace file shapes the run (a rule, a root, a name the agent reads): one
      // read from your environment or your disk there would hand it to the repository's authors.
      if (!isAppKey(key))
        refuse(
          file,
          lineOf(lines, key),
          key,
          `reads ${kinds.has('env') ? 'a variable of your environment' : 'a file'} into a value the run is built from (a substitution in a workspace file may only go in [app], which only your program reads)`,
          userFile,
        );
      for (const path of filesIn(text, dirname(file)))
        if (!inside(path, root))
          refuse(file, lineOf(lines, key), key, `reads ${path}, outside the workspace`, userFile);
    });
  const raw = structuredClone(data);
  const written = new Map<string, unknown>();
  // Each value a substitution resolved, with what the file wrote: an error past here shows the latter.
  const resolved: [string, string][] = [];
  const chosen = profile === undefined ? null : `profile.${profile}`;
  substitutions(data, '', (key, text, arrays, parts) => {
    if (key.startsWith('profile.') && (chosen === null || !(key === chosen || key.startsWith(`${chosen}.`)))) return;
    const result = resolveText(text, file);
    if (!result.ok)
      throw new ConfigError(
        ErrorCode.ConfigInvalid,
        `${at(key)}: ${key}: ${result.reason} (nothing of the configuration was used).`,
        { details: { file, line: lineOf(lines, key), key } },
      );
    if (result.value === text) return;
    for (const [path, array] of arrays) if (!written.has(path)) written.set(path, structuredClone(array));
    written.set(key, text);
    for (const name of result.env) findings.env.add(name);
    setAt(data, parts, result.value);
    resolved.push([result.value, text], ...result.pieces);
  });
  try {
    checkResolved(parsed, workspace, bodies, userFile, root);
  } catch (error) {
    throw redacted(error, resolved);
  }
  return { written, resolved, raw };
}

/**
 * An error with every value a substitution resolved shown as the file wrote it instead, so
 * no message quotes a credential (values under four characters are left: they are no key).
 */
export function redacted(error: unknown, resolved: readonly [string, string][]): unknown {
  if (!(error instanceof ConfigError) || resolved.length === 0) return error;
  let message = error.message;
  // The longest first, so a value holding another is shown whole.
  for (const [value, text] of [...resolved].sort((a, b) => b[0].length - a[0].length))
    if (value.length >= 4) message = message.split(value).join(text);
  if (message === error.message) return error;
  return new ConfigError(error.code as ErrorCode, message, { details: error.details });
}

/** The checks of a file that look at its values as resolved: a workspace file's widening keys, then the schema. */
function checkResolved(
  parsed: ParsedFile,
  workspace: boolean,
  bodies: [string, Table][],
  userFile: string,
  root: string,
): void {
  const { file, data, lines } = parsed;
  const at = (key: string) => `${file}:${lineOf(lines, key) ?? 1}`;
  if (workspace)
    for (const [prefix, body] of bodies) {
      widening(body, prefix, (key, why) => refuse(file, lineOf(lines, key), key, why, userFile));
      // A workspace's skills are its own: a root outside it would read what it has no business with into the prompt.
      const roots = isTable(body.skills) && Array.isArray(body.skills.roots) ? body.skills.roots : [];
      for (const [index, skillRoot] of roots.entries())
        if (typeof skillRoot === 'string' && !inside(resolve(root, skillRoot), root))
          refuse(
            file,
            lineOf(lines, `${prefix}skills.roots`),
            `${prefix}skills.roots[${index}]`,
            `names ${JSON.stringify(skillRoot)}, outside the workspace`,
            userFile,
          );
    }
  const result = fileSchema.safeParse(data);
  if (result.success) return;
  const issue = result.error.issues[0] as z.core.$ZodIssue;
  const path = pathText(issue.path);
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] as string;
    const full = path ? `${path}.${key}` : key;
    const known = knownKeys(issue.path as (string | number)[]);
    const near = nearest(key, known);
    throw new ConfigError(
      ErrorCode.ConfigInvalid,
      `${at(full)}: unknown key ${full}${near ? `; did you mean ${path ? `${path}.` : ''}${near}?` : ''} (the keys ${path ? `of ${path} ` : ''}are ${known.join(', ')}; nothing of the configuration was used).`,
      { details: { file, line: lineOf(lines, full), key: full, ...(near ? { nearest: near } : {}) } },
    );
  }
  throw new ConfigError(
    ErrorCode.ConfigInvalid,
    `${at(path)}: ${path || '(the file)'}: ${issue.message}; fix it there (nothing of the configuration was used).`,
    { details: { file, line: lineOf(lines, path), key: path } },
  );
}

/** Whether a key path is in an `[app]` section (the top level's or a profile's). */
const isAppKey = (key: string) => /^(profile\.[^.]+\.)?app(\.|\[|$)/.test(key);

/**
 * Calls `found` with every string value that may hold a substitution (one with `${` in
 * it), with the arrays it sits in (their paths and values, outermost first).
 */
function substitutions(
  value: unknown,
  path: string,
  found: (key: string, text: string, arrays: [string, unknown[]][], parts: (string | number)[]) => void,
  arrays: [string, unknown[]][] = [],
  parts: (string | number)[] = [],
): void {
  if (typeof value === 'string') {
    if (value.includes('${')) found(path, value, arrays, parts);
  } else if (Array.isArray(value)) {
    const within: [string, unknown[]][] = [...arrays, [path, value]];
    for (const [index, item] of value.entries())
      substitutions(item, `${path}[${index}]`, found, within, [...parts, index]);
  } else if (isTable(value))
    for (const [key, item] of Object.entries(value))
      substitutions(item, path ? `${path}.${key}` : key, found, arrays, [...parts, key]);
}

/** Sets the value at a path of parsed data, by its parts (a key may itself hold a dot or a bracket). */
function setAt(data: Table, parts: readonly (string | number)[], value: unknown): void {
  let holder: unknown = data;
  for (const part of parts.slice(0, -1)) holder = (holder as Record<string | number, unknown>)[part];
  (holder as Record<string | number, unknown>)[parts.at(-1) as string | number] = value;
}

const pathText = (path: readonly PropertyKey[]) =>
  path
    .map((part, index) => (typeof part === 'number' ? `[${part}]` : index === 0 ? String(part) : `.${String(part)}`))
    .join('');
