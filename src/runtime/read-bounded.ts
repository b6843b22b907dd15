/**
 * Reads a regular file's text through one descriptor, never past a bound: a device, a pipe
 * or a huge file cannot hang or flood the reader. What went wrong comes back as a value,
 * for each caller to phrase in its own words (a configuration error, a dropped bundle, a
 * refused skill).
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

export type BoundedRead =
  | { ok: true; text: string }
  /** `not-file`: not a regular file; `too-large`: above the bound; `unreadable`: could not be opened or read (`code`). */
  | { ok: false; problem: 'not-file' | 'too-large' | 'unreadable'; code: string };

/** The text of `path`, at most `maxBytes` of it; with `noFollow` a symbolic link is not followed (it is `unreadable`, ELOOP). */
export function readBounded(path: string, maxBytes: number, options: { noFollow?: boolean } = {}): BoundedRead {
  let fd: number | null = null;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | (options.noFollow ? constants.O_NOFOLLOW : 0));
    if (!fstatSync(fd).isFile()) return { ok: false, problem: 'not-file', code: '' };
    const buffer = Buffer.alloc(maxBytes + 1);
    let size = 0;
    for (;;) {
      const read = readSync(fd, buffer, size, buffer.length - size, null);
      if (read === 0) break;
      size += read;
      if (size > maxBytes) return { ok: false, problem: 'too-large', code: '' };
    }
    return { ok: true, text: buffer.subarray(0, size).toString('utf8') };
  } catch (error) {
    const failure = error as NodeJS.ErrnoException;
    return { ok: false, problem: 'unreadable', code: failure.code ?? failure.message ?? String(error) };
  } finally {
    if (fd !== null) closeSync(fd);
  }
}
