/**
 * What `follow` and `resume` show while a tree runs: each event on a line, and a progress
 * line on stderr that counts the runs by status and what the tree has spent.
 */
import type { HarnessEvent } from '../runtime/events.js';
import type { RunRecord } from '../store/records.js';
import type { CliIo } from './command.js';
import { describeEvent, formatDuration } from './render.js';
import type { Reader } from './stores.js';

/** An event as `follow` and `resume` print it: the time, the run, and what happened. */
export function describeFollowed(event: HarnessEvent): string {
  return `${new Date(event.at).toISOString().slice(11, 23)}  ${event.runId.slice(0, 8)}  ${describeEvent(event)}`;
}

/**
 * The progress line on stderr: redrawn in place on a terminal, a line per change
 * otherwise; `above` clears it before other output, `end` leaves it on its own line.
 */
export function progressOn(io: CliIo) {
  let last = '';
  return {
    show(line: string) {
      if (io.tty) io.err(`\r\x1b[K${line}`);
      else if (line !== last) io.err(`${line}\n`);
      last = line;
    },
    above() {
      if (last && io.tty) io.err('\r\x1b[K');
    },
    end() {
      if (io.tty) io.err('\n');
    },
  };
}

/** The progress line's text: the time since it began, the runs by status, and what the tree has spent. */
export async function progressLine(
  reader: Reader,
  rootId: string,
  runs: RunRecord[],
  elapsedMs: number,
): Promise<string> {
  const counts = new Map<string, number>();
  for (const run of runs) counts.set(run.status, (counts.get(run.status) ?? 0) + 1);
  const spent = (await reader.ledger(rootId))?.root.spent ?? { steps: 0, tokens: 0 };
  const states = [...counts.entries()].map(([status, count]) => `${count} ${status}`).join(', ');
  return `[${formatDuration(elapsedMs)}] ${runs.length} run${runs.length === 1 ? '' : 's'}: ${states}; ${spent.steps} steps, ${spent.tokens} tokens`;
}
