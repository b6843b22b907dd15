/**
 * Reads a later change made stale. The model read a file at one step; a command, an edit
 * or anyone else changed it after; trusting the old read, it would work from text that is
 * no longer there. So after every step each file the run has read whole is looked at again
 * (by its text the first time, then by its size and time until those move), and one that changed is read
 * afresh: the new text is appended to the step as a `@refresh` observation, which the model
 * reads as the user's words after the step's results. A file the model changed itself with
 * the file tools is not refreshed: it asked for that change and was told what it did, and
 * the file is followed again once it reads it again. The old entry is left as it was sent
 * (the transcript only grows between folds), and the refresh is stored with the step, so a
 * resumed run sends the same bytes.
 */
import { statSync } from 'node:fs';
import type { EventData } from '../../runtime/events.js';
import type { ToolResult } from '../../runtime/tools/tool.js';
import type { Observation } from '../../store/records.js';

/** The files a step's own file tools changed, by call: its `file-changed` events. */
export function changedIn(events: readonly EventData[]): { callId: string; path: string }[] {
  return events.flatMap((event) => (event.type === 'file-changed' ? [{ callId: event.callId, path: event.path }] : []));
}

/** The name of a refresh's observation. */
export const REFRESH = '@refresh';

/** What reads a file now: the workspace's read_file, with no policy decision (the run read it already). */
export type ReadNow = (path: string) => ToolResult;

interface Seen {
  /** The text the model last saw of it: a read_file result or a refresh. */
  text: string;
  seq: number;
  /** Its size and time when that text was taken; null when not known (a resumed run), so its text is compared. */
  stat: { size: number; mtimeMs: number } | null;
  /** When the text was taken: a file whose time is this close to it may have changed within the clock's tick. */
  takenAt: number;
}

/** A file changed less than this before its text was taken is compared by its text, whatever its time says. */
const TICK_MS = 2_000;

export class Freshness {
  /** By the path as the workspace resolves it (relative to its root), so two spellings of one file are one. */
  readonly #seen = new Map<string, Seen>();
  readonly #resolve: (path: string) => { relative: string; absolute: string } | null;

  /** `resolve` resolves a path as the workspace does, or null when it is not one of its files. */
  constructor(resolve: (path: string) => { relative: string; absolute: string } | null) {
    this.#resolve = resolve;
  }

  /**
   * Takes note of what a committed step showed the model, in the order it happened: its
   * whole-file reads and refreshes, and the files its own file tools changed (`changed`:
   * the `file-changed` events of the step, by call).
   */
  note(
    seq: number,
    calls: readonly { id: string; name: string; args: Record<string, unknown> }[],
    observations: readonly Observation[],
    changed: readonly { callId: string; path: string }[],
  ): void {
    for (const observation of observations) {
      for (const change of changed)
        if (change.callId === observation.callId)
          this.#seen.delete(this.#resolve(change.path)?.relative ?? change.path);
      if (observation.name === REFRESH && observation.refreshed) {
        const path = this.#resolve(observation.refreshed.path)?.relative ?? observation.refreshed.path;
        const text = observation.content.slice(observation.content.indexOf('\n') + 1);
        this.#seen.set(path, { text, seq, stat: null, takenAt: 0 });
        continue;
      }
      // An image read is not followed: a refresh is text, and an image's line says nothing of its pixels.
      if (observation.name !== 'read_file' || observation.isError || observation.images?.length) continue;
      const call = calls.find((item) => item.id === observation.callId);
      if (!call || call.args.start_line !== undefined || call.args.end_line !== undefined) continue;
      if (typeof call.args.path !== 'string') continue;
      const path = this.#resolve(call.args.path)?.relative;
      if (path === undefined) continue;
      // Its time is not taken here: the file may have changed since the read, within this very step.
      this.#seen.set(path, { text: observation.content, seq, stat: null, takenAt: 0 });
    }
  }

  /**
   * The refreshes this step owes the model: a file it read whole whose text has changed
   * since, by anything but the step's own file tools (`changed`: the paths they wrote,
   * which are noted with the step and followed no more).
   */
  stale(seq: number, read: ReadNow, changed: ReadonlySet<string>): Observation[] {
    const refreshed: Observation[] = [];
    for (const [path, seen] of this.#seen) {
      if (changed.has(path)) continue;
      const stat = this.#stat(path);
      const unmoved = seen.stat && stat && stat.size === seen.stat.size && stat.mtimeMs === seen.stat.mtimeMs;
      if (unmoved && stat.mtimeMs < seen.takenAt - TICK_MS) continue;
      const now = read(path);
      const text = now.isError ? `(it can no longer be read: ${now.content})` : now.content;
      if (text === seen.text) {
        seen.stat = stat;
        seen.takenAt = Date.now();
        continue;
      }
      refreshed.push({
        callId: `refresh:${path}`,
        name: REFRESH,
        content: `${path} has changed since you read it at step ${seen.seq}; it now reads:\n${text}`,
        isError: false,
        refreshed: { path },
      });
      this.#seen.set(path, { text, seq, stat, takenAt: Date.now() });
    }
    return refreshed;
  }

  #stat(path: string): { size: number; mtimeMs: number } | null {
    const absolute = this.#resolve(path)?.absolute ?? null;
    if (absolute === null) return null;
    try {
      const stat = statSync(absolute);
      return { size: stat.size, mtimeMs: stat.mtimeMs };
    } catch {
      return null;
    }
  }
}
