// node scripts/config-keys.mjs [--write]: the table of io.toml's keys, from the zod schema's
// descriptions (src/config/schema.ts). With --write it replaces the table between the
// <!-- keys --> markers of docs/guides/configuration.md; a test checks that the guide's
// table is what this prints, so the guide cannot drift from the schema.
import { readFileSync, writeFileSync } from 'node:fs';
import { describeKeys } from '../dist/config/schema.js';

export function keysTable() {
  const rows = describeKeys().map(({ key, description }) => `| \`${key}\` | ${description.replaceAll('|', '\\|')} |`);
  return ['| key | what it is |', '| --- | --- |', ...rows].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const table = keysTable();
  if (process.argv.includes('--write')) {
    const path = new URL('../docs/guides/configuration.md', import.meta.url);
    const text = readFileSync(path, 'utf8');
    const start = text.indexOf('<!-- keys -->');
    const end = text.indexOf('<!-- /keys -->');
    if (start < 0 || end < start)
      throw new Error('docs/guides/configuration.md has no <!-- keys --> ... <!-- /keys --> markers');
    writeFileSync(path, `${text.slice(0, start)}<!-- keys -->\n${table}\n${text.slice(end)}`);
  } else process.stdout.write(`${table}\n`);
}
