/**
 * Keys an earlier release spelled another way, and key paths as `Config.get` and
 * `Config.explain` are asked them: a renamed key is read under its new name, with a
 * warning naming the file, the line and the key to write instead.
 */
import { ConfigError, ErrorCode } from '../errors.js';
import { isTable, isTables, lineOf, type ParsedFile, type Table } from './toml.js';

/**
 * Keys an earlier release spelled another way: still read, under the new name, with a
 * warning naming the file, the line and the key to write instead. `[]` is each element of
 * an array of tables.
 */
export const RENAMED_KEYS: readonly { from: string; to: string }[] = [
  { from: 'policy.layers', to: 'policy.layer' },
  { from: 'policy.layer[].rules', to: 'policy.layer[].rule' },
  { from: 'budget.wall_seconds', to: 'budget.wall_secs' },
  { from: 'skills.paths', to: 'skills.roots' },
  { from: 'sandbox.writable_paths', to: 'sandbox.writable_roots' },
];

/** A key (as `get` and `explain` are asked it) with every renamed part spelled the new way. */
function currentName(key: string): string {
  let out = key;
  for (const { from, to } of RENAMED_KEYS) {
    const pattern = new RegExp(
      `^((?:profile\\.[^.]+\\.)?${from.replace(/[.]/g, '\\.').replace(/\[\]/g, '\\[\\d+\\]')})(?=$|[.[])`,
    );
    out = out.replace(
      pattern,
      (whole) =>
        whole.slice(0, whole.length - (from.split('.').at(-1) as string).length) + (to.split('.').at(-1) as string),
    );
  }
  return out;
}

/** Moves each renamed key of a file (and of its profiles) to its new name; returns the warnings. */
export function renameOld(parsed: ParsedFile): string[] {
  const warnings: [number, string][] = [];
  const bodies: [string, Table][] = [['', parsed.data]];
  for (const [name, body] of Object.entries(isTable(parsed.data.profile) ? parsed.data.profile : {}))
    if (isTable(body)) bodies.push([`profile.${name}.`, body]);
  for (const [prefix, body] of bodies)
    for (const { from, to } of RENAMED_KEYS) {
      const parts = from.split('.');
      const oldName = parts.at(-1) as string;
      const newName = to.split('.').at(-1) as string;
      // The tables the old key may sit in: each step a key, `name[]` every element of an array of tables.
      let holders: [string, Table][] = [[prefix.replace(/\.$/, ''), body]];
      for (const part of parts.slice(0, -1)) {
        const each = part.endsWith('[]');
        const name = each ? part.slice(0, -2) : part;
        holders = holders.flatMap(([path, table]): [string, Table][] => {
          const child = table[name];
          const here = path ? `${path}.${name}` : name;
          if (each) return isTables(child) ? child.map((item, index) => [`${here}[${index}]`, item]) : [];
          return isTable(child) ? [[here, child]] : [];
        });
      }
      for (const [path, table] of holders) {
        if (!(oldName in table)) continue;
        const oldKey = path ? `${path}.${oldName}` : oldName;
        const newKey = path ? `${path}.${newName}` : newName;
        const line = parsed.lines.get(oldKey) ?? parsed.lines.get(`${oldKey}[0]`) ?? lineOf(parsed.lines, oldKey);
        if (newName in table)
          throw new ConfigError(
            ErrorCode.ConfigInvalid,
            `${parsed.file}:${line ?? 1}: ${oldKey} is the old name of ${newKey}, and both are set; keep ${newKey} alone (nothing of the configuration was used).`,
            { details: { file: parsed.file, line, key: oldKey } },
          );
        table[newName] = table[oldName];
        delete table[oldName];
        for (const [key, number] of [...parsed.lines])
          if (key === oldKey || key.startsWith(`${oldKey}.`) || key.startsWith(`${oldKey}[`)) {
            parsed.lines.delete(key);
            parsed.lines.set(newKey + key.slice(oldKey.length), number);
          }
        warnings.push([
          line ?? 1,
          `${parsed.file}:${line ?? 1}: ${oldKey} is the old name of ${newKey}; it is read as ${newKey} for now, and a later release will stop reading it: write ${newKey}.`,
        ]);
      }
    }
  return warnings.sort((a, b) => a[0] - b[0]).map(([, text]) => text);
}

/** `a.b[2].c` as parts: ["a", "b", 2, "c"]. */
function splitKey(key: string): (string | number)[] {
  const parts: (string | number)[] = [];
  for (const piece of key.split('.')) {
    const match = /^([^[\]]*)((?:\[\d+\])*)$/.exec(piece);
    if (!match) {
      parts.push(piece);
      continue;
    }
    if (match[1]) parts.push(match[1]);
    for (const index of (match[2] ?? '').matchAll(/\[(\d+)\]/g)) parts.push(Number(index[1]));
  }
  return parts;
}

/** A key as `get` and `explain` are asked it, spelled the current way: `a.b[2]`, every renamed part new. */
export function normalKey(key: string): string {
  return splitKey(currentName(key))
    .map((part, index) => (typeof part === 'number' ? `[${part}]` : index === 0 ? part : `.${part}`))
    .join('');
}
