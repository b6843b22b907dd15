/**
 * The guidance a configuration puts in a run's system block: the files `[instructions]
 * files` names (the workspace's AGENTS.md when it names none).
 */
import { lstatSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { ConfigError, ErrorCode } from '../errors.js';
import { type InstructionFile, MAX_INSTRUCTION_CHARS } from '../runtime/contract/contract.js';
import { escapes, type Policy, realTarget } from '../runtime/policy/policy.js';
import { readBounded } from '../runtime/read-bounded.js';
import { filePath } from './substitute.js';

/** Where a name came from: the file and line that named it, and whether that file is the user's. */
interface NamedAt {
  file: string;
  line: number | null;
  scope: string;
}

/**
 * Reads the guidance `[instructions] files` names (the workspace's AGENTS.md when it names
 * none): each a regular file, from the workspace root unless the user file named it by an
 * absolute path; a file not there is skipped, and so is one the configuration's own
 * policy does not let be read. Inside the workspace a symbolic link is never followed: a
 * guidance file that is one, or is reached through one, is skipped with a warning. An
 * agent can plant a link at AGENTS.md (to a directory, a device, a file outside the
 * workspace), and it must neither make every later load throw nor be read.
 */
export function readGuidance(options: {
  names: readonly string[];
  originOf: (index: number) => NamedAt | undefined;
  root: string;
  /** The user file, named where a workspace file names guidance outside the workspace. */
  userFile: string;
  policy: Policy;
  /** A guidance file skipped because it is, or is reached through, a link. */
  warn: (warning: string) => void;
}): InstructionFile[] {
  const { names, root, policy } = options;
  const inside = (path: string) => !escapes(relative(realTarget(root), realTarget(path)));
  const out: InstructionFile[] = [];
  let total = 0;
  for (const [index, name] of names.entries()) {
    const origin = options.originOf(index);
    const where = origin ? `${origin.file}:${origin.line ?? 1}` : '(defaults)';
    const fromWorkspace = origin?.scope !== 'user';
    const path = filePath(name, root);
    const bad = (why: string) =>
      new ConfigError(
        ErrorCode.ConfigInvalid,
        `${where}: instructions.files[${index}]: ${path} ${why}; name a regular file of guidance, or set files = [] to put none in (nothing of the configuration was used).`,
        { details: { file: origin?.file ?? null, line: origin?.line ?? null, key: `instructions.files[${index}]` } },
      );
    const skipLink = (link: string) => {
      const warning = `${where}: instructions.files[${index}]: ${path} ${link === path ? 'is a symbolic link' : `is reached through a symbolic link, ${link}`}; guidance in the workspace is read only from regular files, so it was skipped. Make it a regular file, or name the file the link leads to.`;
      options.warn(warning);
      process.emitWarning(warning, { code: 'IO_HARNESS_GUIDANCE_SKIPPED' });
    };
    // Looked at before anything follows it (a link to itself would make the stat below throw).
    const link = linkOnTheWay(root, path);
    if (link !== null) {
      skipLink(link);
      continue;
    }
    let there: ReturnType<typeof statSync> | undefined;
    try {
      there = statSync(path, { throwIfNoEntry: false });
    } catch (error) {
      throw bad(`cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
    }
    // Not there: skipped, as the default AGENTS.md is when a repository has none. An empty
    // directory in its place is the containment's placeholder while a run is on: not there either.
    if (!there || (there.isDirectory() && emptyDirectory(path))) continue;
    const within = inside(path);
    if (!within && fromWorkspace)
      throw new ConfigError(
        ErrorCode.ConfigRefused,
        `${where}: instructions.files[${index}] names ${JSON.stringify(name)}, outside the workspace; a file inside the workspace may only name the workspace's own guidance. If you mean it, name it in your user file, ${options.userFile} (nothing of the configuration was used).`,
        { details: { file: origin?.file ?? null, line: origin?.line ?? null, key: `instructions.files[${index}]` } },
      );
    // By its real path: a name the user file gave outside the workspace may be a link, read as what it leads to.
    const relativePath = relative(realTarget(root), realTarget(path));
    if (within && policy.decide({ kind: 'read', path: relativePath }, root).effect !== 'allow') continue;
    if (!there.isFile()) throw bad('is not a regular file');
    if (there.size > MAX_INSTRUCTION_CHARS * 4) throw bad(`is above ${MAX_INSTRUCTION_CHARS * 4} bytes`);
    // Through one descriptor, and in the workspace with no link followed at the name: one
    // swapped in since the look above is refused by the open, and skipped the same way.
    const read = readBounded(path, MAX_INSTRUCTION_CHARS * 4, { noFollow: beneath(root, path) });
    if (!read.ok && read.code === 'ELOOP') {
      skipLink(path);
      continue;
    }
    if (!read.ok)
      throw bad(
        read.problem === 'not-file' ? 'is not a regular file' : `cannot be read (${read.code || read.problem})`,
      );
    const text = read.text.replace(/^\uFEFF/, '').trimEnd();
    total += text.length;
    if (total > MAX_INSTRUCTION_CHARS)
      throw bad(
        `takes the guidance past the ${MAX_INSTRUCTION_CHARS} characters a system block holds (name fewer or shorter files)`,
      );
    if (text !== '') out.push({ source: within ? relativePath : path, text });
  }
  return out;
}

/** Whether `path`, as written, names something beneath `root` (no link resolved). */
function beneath(root: string, path: string): boolean {
  const below = relative(resolve(root), resolve(path));
  return below !== '' && !escapes(below);
}

/**
 * The first symbolic link on the way from `root` down to `path`, `path` itself included;
 * null when there is none, and for a path that is not beneath `root`.
 */
function linkOnTheWay(root: string, path: string): string | null {
  if (!beneath(root, path)) return null;
  const below = relative(resolve(root), resolve(path));
  let at = resolve(root);
  for (const part of below.split(sep)) {
    at = join(at, part);
    let stat: ReturnType<typeof lstatSync>;
    try {
      stat = lstatSync(at, { throwIfNoEntry: false });
    } catch {
      // Not a directory on the way, say: no link; what follows says what is wrong with the name.
      return null;
    }
    if (stat === undefined) return null;
    if (stat.isSymbolicLink()) return at;
  }
  return null;
}

/** Whether `path` is a directory with nothing in it. */
export function emptyDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory() && readdirSync(path).length === 0;
  } catch {
    return false;
  }
}
