/**
 * Substitutions: a string value of io.toml may hold `${env:NAME}`, `${file:path}` or
 * `${cmd:program arg ...}`, so a credential is named by the file and never written in it.
 * Each is replaced by what it names when the file is read, once, before the run:
 *
 * - `${env:NAME}`: the variable's value; a variable that is not set is an error, never an
 *   empty string. Every name resolved joins the run's scrub list, so no contained command
 *   is handed it (unless the contract inherits it by name).
 * - `${file:path}`: the file's text, its trailing line ends dropped; a relative path is
 *   from the directory of the file that names it, `~/` from the home directory.
 * - `${cmd:argv}`: what the program prints, its trailing line ends dropped; the argv is
 *   split at spaces (no shell), run with a time limit, and a failure is an error.
 *
 * `$${` writes a literal `${`. A `${` with any other word before its colon is left as
 * written (a policy pattern may well hold one). Keys are never substituted.
 */
import { execFileSync } from 'node:child_process';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { readBounded } from '../runtime/read-bounded.js';

/** What one string's substitutions came to, or why they could not be resolved. */
export type Resolved =
  | {
      ok: true;
      value: string;
      env: string[];
      /** Each substitution's value, with its token as written: what an error shows instead of the value. */
      pieces: [string, string][];
    }
  | { ok: false; reason: string };

/** The most a `${file:}` or a `${cmd:}` may hand in: far above any credential. */
export const MAX_SUBSTITUTED_BYTES = 64 * 1024;
/** How long a `${cmd:}` may run. */
export const SUBSTITUTION_TIMEOUT_MS = 15_000;

const TOKEN = /\$\$\{|\$\{(env|file|cmd):([^}]*)(\})?/g;

/** The kinds a string uses (`$${` escapes skipped). */
export function kindsIn(text: string): Set<'env' | 'file' | 'cmd'> {
  const kinds = new Set<'env' | 'file' | 'cmd'>();
  for (const match of text.matchAll(TOKEN)) if (match[1]) kinds.add(match[1] as 'env' | 'file' | 'cmd');
  return kinds;
}

/** The paths a string's `${file:}` substitutions name, resolved from `base`. */
export function filesIn(text: string, base: string): string[] {
  const out: string[] = [];
  // Trimmed as resolveText trims it: the path checked is the path read.
  for (const match of text.matchAll(TOKEN)) if (match[1] === 'file') out.push(filePath((match[2] ?? '').trim(), base));
  return out;
}

/** A path a file names, from `base` (the file's directory); `~/` is from the home directory. */
export const filePath = (path: string, base: string): string =>
  path.startsWith('~/') ? join(homedir(), path.slice(2)) : isAbsolute(path) ? path : resolve(base, path);

/** Resolves every substitution of `text`, for the file `file`. */
export function resolveText(text: string, file: string, env: NodeJS.ProcessEnv = process.env): Resolved {
  const names: string[] = [];
  const pieces: [string, string][] = [];
  let out = '';
  let last = 0;
  for (const match of text.matchAll(TOKEN)) {
    out += text.slice(last, match.index);
    last = (match.index as number) + match[0].length;
    if (match[0] === '$${') {
      out += '${';
      continue;
    }
    const [, kind, body = '', closed] = match;
    if (!closed) return { ok: false, reason: `\${${kind}:${body.slice(0, 40)} is not closed with }` };
    const value = resolveOne(kind as 'env' | 'file' | 'cmd', body.trim(), dirname(file), env);
    if (!value.ok) return value;
    if (kind === 'env') names.push(body.trim());
    pieces.push([value.value, match[0]]);
    out += value.value;
  }
  out += text.slice(last);
  return { ok: true, value: out, env: names, pieces };
}

function resolveOne(
  kind: 'env' | 'file' | 'cmd',
  body: string,
  base: string,
  env: NodeJS.ProcessEnv,
): { ok: true; value: string } | { ok: false; reason: string } {
  if (kind === 'env') {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(body))
      return { ok: false, reason: `\${env:${body}} does not name a variable (letters, digits and _)` };
    const value = env[body];
    if (value === undefined)
      return { ok: false, reason: `\${env:${body}} names a variable that is not set; set ${body}, or remove the key` };
    return { ok: true, value };
  }
  if (kind === 'file') {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the substitution's spelling, named for the reader
    if (body === '') return { ok: false, reason: '${file:} names no file' };
    const path = filePath(body, base);
    const read = readBounded(path, MAX_SUBSTITUTED_BYTES);
    if (read.ok) return { ok: true, value: read.text.replace(/(\r?\n)+$/, '') };
    const why =
      read.problem === 'not-file'
        ? 'which is not a regular file'
        : read.problem === 'too-large'
          ? `above the ${MAX_SUBSTITUTED_BYTES} bytes it may hand in`
          : `which cannot be read (${read.code})`;
    return { ok: false, reason: `\${file:} names ${path}, ${why}` };
  }
  const argv = body.split(/\s+/).filter((part) => part !== '');
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the substitution's spelling, named for the reader
  if (argv.length === 0) return { ok: false, reason: '${cmd:} names no program' };
  try {
    const stdout = execFileSync(argv[0] as string, argv.slice(1), {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: SUBSTITUTION_TIMEOUT_MS,
      maxBuffer: MAX_SUBSTITUTED_BYTES,
      env,
    });
    return { ok: true, value: stdout.replace(/(\r?\n)+$/, '') };
  } catch (error) {
    const failure = error as { status?: number | null; signal?: string | null; code?: string; stderr?: string };
    const why =
      failure.code === 'ENOENT'
        ? `${argv[0]} was not found on PATH`
        : failure.code === 'ENOBUFS'
          ? `it printed more than ${MAX_SUBSTITUTED_BYTES} bytes`
          : failure.signal
            ? `it was ended by ${failure.signal}${failure.signal === 'SIGTERM' ? ` (the limit is ${SUBSTITUTION_TIMEOUT_MS / 1000} s)` : ''}`
            : `it exited with ${failure.status}${failure.stderr?.trim() ? `: ${failure.stderr.trim().split('\n')[0]?.slice(0, 200)}` : ''}`;
    return { ok: false, reason: `\${cmd:${body.slice(0, 60)}} failed: ${why}` };
  }
}
