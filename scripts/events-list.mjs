// node scripts/events-list.mjs [--write]: the table of event types, from EVENT_TYPES and
// the line each has in src/runtime/event-docs.ts. With --write it replaces the table
// between the <!-- events --> and <!-- /events --> markers of docs/guides/actor-runtime.md;
// a test checks that the guide's table is what this prints.
import { readFileSync, writeFileSync } from 'node:fs';
import { EVENT_DOCS } from '../dist/runtime/event-docs.js';
import { EVENT_TYPES } from '../dist/runtime/events.js';

export function eventsTable() {
  const rows = EVENT_TYPES.map((type) => `| \`${type}\` | ${EVENT_DOCS[type].replaceAll('|', '\\|')} |`);
  return ['| type | what it says |', '| --- | --- |', ...rows].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const table = eventsTable();
  if (process.argv.includes('--write')) {
    const path = new URL('../docs/guides/actor-runtime.md', import.meta.url);
    const text = readFileSync(path, 'utf8');
    const start = text.indexOf('<!-- events -->');
    const end = text.indexOf('<!-- /events -->');
    if (start < 0 || end < start) throw new Error('docs/guides/actor-runtime.md has no <!-- events --> markers');
    writeFileSync(path, `${text.slice(0, start)}<!-- events -->\n${table}\n${text.slice(end)}`);
  } else process.stdout.write(`${table}\n`);
}
