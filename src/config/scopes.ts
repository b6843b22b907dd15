/**
 * The four scopes and how they combine: where each file sits, the user file's default
 * path, and the merge of the files in order (tables key by key, arrays of tables
 * appended, any other value replaced), which records where each value came from and
 * refuses a workspace file that raises a budget, a cap or a share.
 */
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { DEFAULT_SHARE } from '../runtime/context/assembler.js';
import { DEFAULT_MEMORY_CAP, DEFAULT_MEMORY_SHARE } from '../runtime/context/memory.js';
import { isTable, lineOf, type Table } from './toml.js';
import { refuse } from './widening.js';

/** Where a file sits: the library's defaults, the user's own, or the workspace's two. */
export type ConfigScope = 'defaults' | 'user' | 'project' | 'local';

/** Where a value came from. */
export interface ValueOrigin {
  key: string;
  value: unknown;
  scope: ConfigScope;
  /** The file, or `(defaults)`. */
  file: string;
  /** Its line in the file, or null (a default). */
  line: number | null;
  /**
   * The value as the file wrote it, when a substitution (`${env:}`, `${file:}`, `${cmd:}`)
   * replaced it: `value` is then this text too, so explaining a configuration never shows
   * a credential it resolved. `Config.get` returns what it resolved to.
   */
  written?: unknown;
}

/** Where a value came from, without the value: what the merge records per key. */
export type Origin = Omit<ValueOrigin, 'key' | 'value'>;

/** The user file's path when none is given. */
export function defaultUserFile(env: NodeJS.ProcessEnv = process.env): string {
  const base =
    env.XDG_CONFIG_HOME && isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : join(homedir(), '.config');
  return join(base, 'io-harness', 'io.toml');
}

/** One file of the four, checked. */
export interface ScopeFile {
  scope: ConfigScope;
  file: string;
  data: Table;
  lines: ReadonlyMap<string, number>;
  /** The keys a substitution replaced (their paths in the file), each with its value as written. */
  written?: ReadonlyMap<string, unknown>;
  /** The file's data as written, before substitution. */
  shown?: Table;
}

/**
 * Sections whose presence turns something on that hands the run more than the workspace's
 * authors should grant: a workspace file may keep them on, not turn them on. Why, by section.
 */
const TURNED_ON_BY_USER = new Map<string, string>([
  ['memory', 'turns durable memory on, which hands the run the memory tools and your notes'],
  ['git', 'turns the git tools on, which let the run commit to your repository'],
]);

/** Keys a workspace file may only lower: budgets, caps, and the shares of a request and of memory. */
const LOWER_ONLY = /^(budget\.(steps|tokens|wall_secs)|sandbox\.caps\.[a-z_]+|context\.share|memory\.(share|cap))$/;
/** What a lower-only key is when no file sets it (a budget or a cap unset is no limit, so it has none). */
const LOWER_DEFAULTS: Readonly<Record<string, number>> = {
  'context.share': DEFAULT_SHARE,
  'memory.share': DEFAULT_MEMORY_SHARE,
  'memory.cap': DEFAULT_MEMORY_CAP,
};

/**
 * Merges `source` (a file's body, or one of its profiles at `from`) into `target`, and
 * records where each value came from: tables key by key, arrays of tables appended, any
 * other value replaced.
 */
export function merge(
  target: Table,
  source: Table,
  file: ScopeFile,
  path: string,
  from: string,
  origins: Map<string, Origin>,
  userFile: string | null,
): void {
  const origin = (sourcePath: string): Origin => {
    const written = file.written?.get(sourcePath);
    return {
      scope: file.scope,
      file: file.file,
      line: file.scope === 'defaults' ? null : lineOf(file.lines, sourcePath),
      ...(written === undefined ? {} : { written }),
    };
  };
  const record = (value: unknown, at: string, sourceAt: string) => {
    for (const key of [...origins.keys()])
      if (key === at || key.startsWith(`${at}.`) || key.startsWith(`${at}[`)) origins.delete(key);
    const walk = (item: unknown, here: string, there: string) => {
      origins.set(here, origin(there));
      if (isTable(item))
        for (const [key, child] of Object.entries(item)) walk(child, `${here}.${key}`, `${there}.${key}`);
      else if (Array.isArray(item))
        for (const [index, child] of item.entries()) walk(child, `${here}[${index}]`, `${there}[${index}]`);
    };
    walk(value, at, sourceAt);
  };
  for (const [key, value] of Object.entries(source)) {
    const at = path ? `${path}.${key}` : key;
    const sourceAt = from ? `${from}.${at}` : at;
    const current = target[key];
    const turnsOn = TURNED_ON_BY_USER.get(at);
    if (turnsOn && current === undefined && (file.scope === 'project' || file.scope === 'local'))
      refuse(file.file, lineOf(file.lines, sourceAt), at, turnsOn, userFile ?? defaultUserFile());
    if (isTable(value) && isTable(current)) {
      origins.set(at, origins.get(at) ?? origin(sourceAt));
      merge(current, value, file, at, from, origins, userFile);
    } else if (Array.isArray(value) && value.every(isTable) && Array.isArray(current) && current.every(isTable)) {
      // Arrays of tables append, whatever either holds: an empty one adds nothing, it never clears what was there.
      const base = current.length;
      value.forEach((item, index) => {
        current.push(structuredClone(item));
        record(item, `${at}[${base + index}]`, `${sourceAt}[${index}]`);
      });
    } else {
      // A value set whole (a table no earlier file had) is checked leaf by leaf, like one merged into a table.
      if (file.scope === 'project' || file.scope === 'local') {
        const lower = (item: unknown, here: string, there: string, before: unknown): void => {
          if (isTable(item)) {
            for (const [name, child] of Object.entries(item))
              lower(child, `${here}.${name}`, `${there}.${name}`, isTable(before) ? before[name] : undefined);
            return;
          }
          const earlier = typeof before === 'number' ? before : LOWER_DEFAULTS[here];
          if (!LOWER_ONLY.test(here) || typeof earlier !== 'number' || typeof item !== 'number' || item <= earlier)
            return;
          const set = origins.get(here) ?? { file: 'the defaults' };
          refuse(
            file.file,
            lineOf(file.lines, there),
            here,
            `raises ${earlier} (set in ${set.file}) to ${item} (a budget, a cap or a share may only be lowered here)`,
            userFile ?? defaultUserFile(),
          );
        };
        lower(value, at, sourceAt, current);
      }
      target[key] = structuredClone(value);
      record(value, at, sourceAt);
    }
  }
}
