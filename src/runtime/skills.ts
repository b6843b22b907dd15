/**
 * Skills: folders holding a `SKILL.md` whose front matter names the skill and says what
 * it is for. The embedder states the roots they are found under; each becomes one line
 * of the system block (sorted by name, so the prompt's cached prefix holds), and the
 * agent opens one, or a file beside it, with `read_skill`. A read is decided by the run's
 * read policy like any read, and never reaches outside the skill's own folder: the path
 * is resolved, links included, before it is checked.
 */
import { existsSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { InvalidArgumentError } from '../errors.js';
import type { ArgumentSchema } from './arguments.js';
import { readBounded } from './read-bounded.js';

/** A skill as a run's spec carries it: what the catalogue line says, and its folder. */
export interface SkillData {
  name: string;
  description: string;
  dir: string;
}

const NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;
const NAMESPACE = /^[a-z0-9][a-z0-9-]{0,63}$/;

/**
 * Where skills are found: a directory, or a directory whose skills are named
 * `<namespace>__<name>` (a bundle's, so the catalogue and a read say which bundle has it).
 */
export type SkillRoot = string | { root: string; namespace: string };
/** The most characters of a skill's file an observation holds. */
export const MAX_SKILL_CHARS = 64 * 1024;

/** The `key: value` lines between a file's opening `---` and the next. */
function frontMatter(text: string, file: string): Record<string, string> {
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  if (lines[0]?.trim() !== '---')
    throw new InvalidArgumentError(
      `${file} has no front matter: it must open with ---, then name: and description:, then ---.`,
    );
  const fields: Record<string, string> = {};
  for (let at = 1; at < lines.length; at++) {
    const line = lines[at] as string;
    if (line.trim() === '---') return fields;
    const match = /^([A-Za-z_][\w-]*):\s*(.*)$/.exec(line);
    if (match) fields[(match[1] as string).toLowerCase()] = (match[2] as string).trim().replace(/^(["'])(.*)\1$/, '$2');
  }
  throw new InvalidArgumentError(`${file}: its front matter is not closed with ---.`);
}

/**
 * The skills under `roots`: each root that holds a SKILL.md is one, and so is each folder
 * directly inside it that does. Sorted by name; a bad file or two skills of one name is
 * an error naming the file.
 */
export function discoverSkills(
  roots: readonly SkillRoot[],
  readable: (file: string) => boolean = () => true,
): SkillData[] {
  const valid = (root: unknown) =>
    (typeof root === 'string' && root !== '') ||
    (typeof root === 'object' &&
      root !== null &&
      typeof (root as { root?: unknown }).root === 'string' &&
      (root as { root: string }).root !== '' &&
      typeof (root as { namespace?: unknown }).namespace === 'string' &&
      NAMESPACE.test((root as { namespace: string }).namespace));
  if (!Array.isArray(roots) || !roots.every(valid))
    throw new InvalidArgumentError(
      'skills must be an array of directories to find SKILL.md files under (or { root, namespace }, the namespace lowercase letters, digits and -).',
    );
  const found = new Map<string, SkillData>();
  for (const given of roots) {
    const root = typeof given === 'string' ? given : given.root;
    const prefix = typeof given === 'string' ? '' : `${given.namespace}__`;
    const base = resolve(root);
    if (!existsSync(base) || !statSync(base).isDirectory())
      throw new InvalidArgumentError(`skills: ${base} is not a directory.`);
    const dirs = [
      base,
      ...readdirSync(base, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => join(base, e.name)),
    ];
    for (const dir of dirs) {
      const file = join(dir, 'SKILL.md');
      if (!existsSync(file)) continue;
      // What the policy keeps unread is not in the catalogue either.
      if (!readable(file)) continue;
      const fields = frontMatter(readSkillFile(file, dir), file);
      const own = fields.name ?? '';
      const name = `${prefix}${own}`;
      if (!NAME.test(own))
        throw new InvalidArgumentError(
          `${file}: name must be 1 to 64 lowercase letters, digits or -, got ${JSON.stringify(own)}.`,
        );
      const description = (fields.description ?? '').replace(/\s+/g, ' ');
      if (description === '' || description.length > 1024)
        throw new InvalidArgumentError(
          `${file}: description must say, in 1 to 1,024 characters, what the skill is for.`,
        );
      const other = found.get(name);
      if (other) throw new InvalidArgumentError(`two skills are named ${name}: in ${other.dir} and in ${dir}.`);
      found.set(name, { name, description, dir: realpathSync(dir) });
    }
  }
  return [...found.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * A SKILL.md's text: a regular file inside its skill's folder by its real path (a link
 * out of it is refused), read through one descriptor and never past a bound, so a link to
 * a device or a pipe cannot hang or flood the reader.
 */
function readSkillFile(file: string, dir: string): string {
  const real = realpathSync(file);
  const inside = relative(realpathSync(dir), real);
  if (inside.startsWith(`..${sep}`) || inside === '..' || isAbsolute(inside))
    throw new InvalidArgumentError(
      `${file} leads outside its skill's folder (to ${real}); a skill is its folder's own files.`,
    );
  const read = readBounded(real, MAX_SKILL_CHARS * 4);
  if (read.ok) return read.text;
  throw new InvalidArgumentError(
    read.problem === 'not-file'
      ? `${file} is not a regular file.`
      : read.problem === 'too-large'
        ? `${file} is above the ${MAX_SKILL_CHARS * 4} bytes a SKILL.md may have.`
        : `${file} cannot be read (${read.code}).`,
  );
}

/** The system block's lines for a run's skills: one each, in the spec's (sorted) order. */
export function skillCatalogue(skills: readonly SkillData[]): string {
  return [
    'Skills you can use (open one with read_skill before you follow it; its folder may hold files it refers to):',
    ...skills.map((skill) => `- ${skill.name}: ${skill.description}`),
  ].join('\n');
}

export const readSkillParameters: ArgumentSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', description: 'The skill, as the catalogue names it.', maxLength: 130 },
    path: {
      type: 'string',
      description: 'A file in the skill\u2019s folder, relative to it. Leave it out to read SKILL.md.',
      maxLength: 1024,
    },
  },
  required: ['name'],
  additionalProperties: false,
};

/**
 * Where `read_skill(name, path?)` reads: the real path (links resolved) of a file inside
 * the skill's own folder, or why not.
 */
export function skillFile(
  skills: readonly SkillData[],
  name: string,
  path: string | undefined,
): { ok: true; path: string } | { ok: false; reason: string } {
  const skill = skills.find((item) => item.name === name);
  if (!skill)
    return {
      ok: false,
      reason: `there is no skill ${JSON.stringify(name)}; the catalogue lists ${skills.map((s) => s.name).join(', ')}.`,
    };
  const asked = path === undefined || path === '' ? 'SKILL.md' : path;
  if (isAbsolute(asked)) return { ok: false, reason: `path is relative to the skill's folder; ${asked} is absolute.` };
  let real: string;
  try {
    real = realpathSync(resolve(skill.dir, asked));
  } catch {
    return { ok: false, reason: `the skill ${name} has no file ${asked}.` };
  }
  const inside = relative(skill.dir, real);
  if (inside === '' || inside.startsWith(`..${sep}`) || inside === '..' || isAbsolute(inside))
    return {
      ok: false,
      reason: `${asked} resolves outside the folder of the skill ${name}; a skill reads only its own files.`,
    };
  if (!statSync(real).isFile()) return { ok: false, reason: `${asked} in the skill ${name} is not a file.` };
  return { ok: true, path: real };
}
