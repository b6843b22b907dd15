/**
 * What `follow` and `resume` show while a tree runs: each event on a line, and a progress
 * line on stderr that counts the runs by status and what the tree has spent.
 */
import type { HarnessEvent } from '../runtime/events.js';
import type { RunRecord } from '../store/records.js';
import type { CliIo } from './command.js';
import { describeEvent, formatDuration } from './render.js';
import type { Reader } from './stores.js';

/** An event as `follow` and `resume` print it: the time, the agent (its address, or its run id's start), and what happened. */
export function describeFollowed(event: HarnessEvent, addresses?: ReadonlyMap<string, string>): string {
  const who = addresses?.get(event.runId) ?? event.runId.slice(0, 8);
  return `${new Date(event.at).toISOString().slice(11, 23)}  ${who}  ${describeEvent(event)}`;
}

/** The address of each run of a tree, by run id (a run starting says its own: see `follow`). */
export function addressesOf(runs: readonly RunRecord[]): Map<string, string> {
  return new Map(runs.map((run) => [run.runId, run.address]));
}

/**
 * The progress line on stderr: redrawn in place on a terminal; elsewhere (a log, a pipe) a
 * line only when the runs or the spend change, not each time the clock moves. `above`
 * clears it before other output, `end` leaves it on its own line.
 */
export function progressOn(io: CliIo) {
  let last = '';
  let lastState = '';
  return {
    show({ elapsed, state }: Progress) {
      const line = `[${elapsed}] ${state}`;
      if (io.tty) io.err(`\r\x1b[K${line}`);
      else if (state !== lastState) io.err(`${line}\n`);
      lastState = state;
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

/** A progress line's parts: the time since it began, and the state (the runs by status, the tree's spend). */
export interface Progress {
  elapsed: string;
  state: string;
}

/** The progress line: the time since it began, the runs by status, and what the tree has spent. */
export async function progressLine(
  reader: Reader,
  rootId: string,
  runs: RunRecord[],
  elapsedMs: number,
): Promise<Progress> {
  const counts = new Map<string, number>();
  for (const run of runs) counts.set(run.status, (counts.get(run.status) ?? 0) + 1);
  const spent = (await reader.ledger(rootId))?.root.spent ?? { steps: 0, tokens: 0 };
  const states = [...counts.entries()].map(([status, count]) => `${count} ${status}`).join(', ');
  return {
    elapsed: formatDuration(elapsedMs),
    state: `${runs.length} run${runs.length === 1 ? '' : 's'}: ${states}; ${spent.steps} steps, ${spent.tokens} tokens`,
  };
}
