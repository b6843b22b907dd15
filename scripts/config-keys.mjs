// node scripts/config-keys.mjs [--write]: the table of io.toml's keys, from the zod schema's
// descriptions (src/config/schema.ts), and of the keys renamed since an earlier release.
// With --write it replaces the tables between the <!-- keys --> and <!-- renamed -->
// markers of docs/guides/configuration.md; a test checks that the guide's tables are what
// this prints, so the guide cannot drift from the code.
import { readFileSync, writeFileSync } from 'node:fs';
import { RENAMED_KEYS } from '../dist/config/renamed.js';
import { describeKeys } from '../dist/config/schema.js';

export function keysTable() {
  const rows = describeKeys().map(({ key, description }) => `| \`${key}\` | ${description.replaceAll('|', '\\|')} |`);
  return ['| key | what it is |', '| --- | --- |', ...rows].join('\n');
}

export function renamedTable() {
  const rows = RENAMED_KEYS.map(({ from, to }) => `| \`${from}\` | \`${to}\` |`);
  return ['| written as | read as |', '| --- | --- |', ...rows].join('\n');
}

/** Replaces what sits between `<!-- name -->` and `<!-- /name -->` in `text`. */
function between(text, name, table) {
  const start = text.indexOf(`<!-- ${name} -->`);
  const end = text.indexOf(`<!-- /${name} -->`);
  if (start < 0 || end < start)
    throw new Error(`docs/guides/configuration.md has no <!-- ${name} --> ... <!-- /${name} --> markers`);
  return `${text.slice(0, start)}<!-- ${name} -->\n${table}\n${text.slice(end)}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const table = keysTable();
  if (process.argv.includes('--write')) {
    const path = new URL('../docs/guides/configuration.md', import.meta.url);
    const text = readFileSync(path, 'utf8');
    writeFileSync(path, between(between(text, 'keys', table), 'renamed', renamedTable()));
  } else process.stdout.write(`${table}\n`);
}
