/**
 * read_file: the exact text of a file, or of a range of its lines. The path is located
 * (links followed, checked against the root), and the file is then opened beneath the
 * root by that resolved path with no link followed (./beneath.ts), so a link swapped in
 * since the check is refused rather than read through.
 */
import { closeSync, constants, openSync, readSync } from 'node:fs';
import { attachedName, checkImage, imageLine, isImage, MAX_IMAGE_BYTES } from '../images.js';
import type { ToolResult } from '../tools/tool.js';
import { binaryRefusal, error, hardLinkRefusal, refusal } from './answers.js';
import { lookBeneath, walksByDescriptor } from './beneath.js';
import { message } from './diffs.js';
import { MAX_RANGED_READ_BYTES } from './limits.js';
import { locate, statOrNull, type WorkspaceScope } from './paths.js';
import { decode, hasNul, readRegular, SNIFF_BYTES } from './search.js';

export interface ReadArgs {
  path: string;
  start_line?: number;
  end_line?: number;
}

/**
 * read_file: the exact text of a file, or of lines start_line..end_line (1-based,
 * inclusive), a whole-file read held to `maxReadBytes`. `decided`: the resolved path a
 * policy allowed; a path that resolves elsewhere now (a link swapped in on the way since)
 * is refused, not read.
 */
export function readFile(scope: WorkspaceScope, maxReadBytes: number, args: ReadArgs, decided?: string): ToolResult {
  const file = readableFile(scope, args.path, decided);
  if ('content' in file) return file;
  const { absolute, path, stats } = file;
  for (const name of ['start_line', 'end_line'] as const) {
    const value = args[name];
    if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
      return error(`${name} must be a whole number of at least 1 (lines are counted from 1); it was ${value}.`);
    }
  }
  const ranged = args.start_line !== undefined || args.end_line !== undefined;
  const head = sniff(absolute);
  if (!ranged && looksLikeImage(head, path)) return readImage(scope, path, absolute);
  if (hasNul(head))
    return binaryRefusal('read.binary', path, stats.size, 'read_file returns text only, so it was not read');
  if (!ranged && stats.size > maxReadBytes) {
    return refusal(
      'read.ceiling',
      `${path} is ${stats.size} bytes, above the read ceiling of ${maxReadBytes} bytes, so it was not read; read it in parts with start_line and end_line (for example start_line 1, end_line 1000), or use grep to find the lines you need.`,
    );
  }
  let text: string | null;
  try {
    const limit = ranged ? MAX_RANGED_READ_BYTES : maxReadBytes;
    // Opened beneath the root by the path just resolved, no link followed: one a command
    // swapped in since (to a file the policy denies) is refused, not read.
    const read = readBytes(scope, path, absolute, limit, (size) =>
      refusal(
        'read.ceiling',
        `${path} is ${size} bytes, above the ${ranged ? `limit of ${MAX_RANGED_READ_BYTES} bytes for a file read in parts` : `read ceiling of ${maxReadBytes} bytes`}, so it was not read; use grep to find the lines you need${ranged ? '' : ', or read it in parts with start_line and end_line'}.`,
      ),
    );
    if (!('bytes' in read)) return read;
    text = decode(read.bytes);
  } catch (problem) {
    return error(`${path} cannot be read: ${message(problem)}.`);
  }
  if (text === null)
    return binaryRefusal('read.binary', path, stats.size, 'read_file returns text only, so it was not read');
  if (!ranged) return { content: text, isError: false };

  const lines = splitLines(text);
  const total = lines.length;
  const start = args.start_line ?? 1;
  const end = args.end_line ?? total;
  if (args.start_line !== undefined && args.end_line !== undefined && start > end) {
    return error(`start_line ${start} is after end_line ${end}; pass start_line no greater than end_line.`);
  }
  if (start > total) {
    return error(
      `start_line ${start} is past the end of ${path}, which has ${total} line${total === 1 ? '' : 's'}${total === 0 ? ' (it is empty)' : ''}.`,
    );
  }
  const last = Math.min(end, total);
  const selected = lines.slice(start - 1, last).join('');
  const bytes = Buffer.byteLength(selected);
  if (bytes > maxReadBytes) {
    return refusal(
      'read.ceiling',
      `lines ${start}-${last} of ${path} are ${bytes} bytes, above the read ceiling of ${maxReadBytes} bytes, so they were not read; ask for fewer lines.`,
    );
  }
  const clamped = end > total ? ` (end_line ${end} is past the end: the file has ${total} lines)` : '';
  return { content: `lines ${start}-${last} of ${total}${clamped}:\n${selected}`, isError: false };
}

/**
 * Whether read_file takes the file for an image: one ./images.ts decides on (its
 * signature, a TGA by its name), in bytes that could not be text (a NUL, or not UTF-8) —
 * a text file that merely starts like an image is text, and an SVG is text, its source —
 * or a plain (text) PNM by its name.
 */
function looksLikeImage(head: Buffer, path: string): boolean {
  return (!couldBeText(head) || /\.(pbm|pgm|ppm|pnm)$/i.test(path)) && isImage(head, path);
}

/** Whether a file's first bytes could be UTF-8 text (one cut mid-character at their end still could). */
function couldBeText(head: Buffer): boolean {
  if (hasNul(head)) return false;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(head, { stream: true });
    return true;
  } catch {
    return false;
  }
}

/**
 * An image file read for the model: attached as it is, or converted to PNG, or refused
 * saying why (./images.ts); its bytes read beneath the root as a text file's are.
 */
function readImage(scope: WorkspaceScope, path: string, absolute: string): ToolResult {
  const read = readBytes(scope, path, absolute, MAX_IMAGE_BYTES, (size) =>
    refusal(
      'read.image',
      `${path} is an image of ${size} bytes, above the ${MAX_IMAGE_BYTES / 1024 / 1024} MiB an image may be; scale it down first.`,
    ),
  );
  if (!('bytes' in read)) return read;
  const checked = checkImage(path, read.bytes.toString('base64'));
  if ('refused' in checked) return refusal('read.image', `${path}: ${checked.refused}`);
  return {
    content: `${path}: ${imageLine(attachedName(checked), read.bytes.length, 'attached')}`,
    isError: false,
    images: [checked.image],
  };
}

/**
 * The regular file `given` names, located (links followed, held to the root) and checked
 * as every read is: still where the policy decided on it (`decided`), there, not a
 * directory or a device, not a hard link; else the call's answer.
 */
function readableFile(
  scope: WorkspaceScope,
  given: string,
  decided: string | undefined,
): { absolute: string; path: string; stats: NonNullable<ReturnType<typeof statOrNull>> } | ToolResult {
  const located = locate(scope, given, false);
  if (!located.ok) return located.result;
  const { absolute, relative: path } = located;
  if (decided !== undefined && path !== decided)
    return refusal(
      'fs.path-moved',
      `${given} led to ${decided} when the policy decided on it and leads to ${path} now (a link on the way changed), so it was not read; read it again.`,
    );
  const stats = statOrNull(absolute);
  if (!stats) return error(`there is no file at ${path}; use find to look for it.`);
  if (stats.isDirectory()) {
    return error(`${path} is a directory, not a file; use find with path ${JSON.stringify(path)} to list it.`);
  }
  if (!stats.isFile()) return error(`${path} is not a regular file (a device, socket or pipe) and cannot be read.`);
  if (stats.nlink > 1) return hardLinkRefusal(path, stats.nlink, 'read');
  return { absolute, path, stats };
}

/**
 * A whole file's bytes, for a tool that reads a binary format (a workbook, a PDF): located
 * and checked as read_file does (`decided`: the resolved path the policy allowed), at most
 * `limit` bytes, opened beneath the root with no link followed; else the call's answer.
 */
export function readWhole(
  scope: WorkspaceScope,
  given: string,
  limit: number,
  decided?: string,
): { bytes: Buffer; path: string } | ToolResult {
  const file = readableFile(scope, given, decided);
  if ('content' in file) return file;
  const { absolute, path } = file;
  try {
    const read = readBytes(scope, path, absolute, limit, (size) =>
      refusal(
        'read.ceiling',
        `${path} is ${size} bytes, above the ${limit} bytes a document may be, so it was not read.`,
      ),
    );
    return 'bytes' in read ? { bytes: read.bytes, path } : read;
  } catch (problem) {
    return error(`${path} cannot be read: ${message(problem)}.`);
  }
}

/**
 * A file's bytes, at most `limit`, opened beneath the root by the path resolved, no link
 * followed (a link swapped in since is refused, not read); else the call's answer, `over`'s
 * for a file above the limit.
 */
function readBytes(
  scope: WorkspaceScope,
  path: string,
  absolute: string,
  limit: number,
  over: (size: number) => ToolResult,
): { bytes: Buffer } | ToolResult {
  const read = walksByDescriptor() ? readBeneath(scope, path, limit) : readRegular(absolute, limit);
  if ('result' in read) return read.result;
  if (!('problem' in read)) return read;
  if (read.problem === 'linked') return hardLinkRefusal(path, read.size, 'read');
  if (read.problem === 'not-regular')
    return error(`${path} is not a regular file (a device, socket or pipe) and cannot be read.`);
  return over(read.size);
}

/** A file's bytes read beneath the root (see readFile), in readRegular's terms, or the call's refusal. */
function readBeneath(
  scope: WorkspaceScope,
  path: string,
  limit: number,
): ReturnType<typeof readRegular> | { result: ToolResult } {
  const looked = lookBeneath(scope.root, path, limit, false, false);
  if (!looked.ok) return { result: refusal(looked.rule, looked.reason) };
  switch (looked.kind) {
    case 'file':
      return { bytes: looked.bytes };
    case 'linked':
      return { problem: 'linked', size: looked.names };
    case 'too-large':
      return { problem: 'too-large', size: looked.size };
    case 'missing':
    case 'blocked':
      return { result: error(`there is no file at ${path}; use find to look for it.`) };
    default:
      return { problem: 'not-regular', size: 0 };
  }
}

/** The first bytes of a file, to look for a NUL. */
function sniff(path: string): Buffer {
  const buffer = Buffer.alloc(SNIFF_BYTES);
  let fd: number | undefined;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    const read = readSync(fd, buffer, 0, SNIFF_BYTES, 0);
    return buffer.subarray(0, read);
  } catch {
    return Buffer.alloc(0);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Lines with their endings, so joining a slice gives the exact text; a final line may have none. */
function splitLines(text: string): string[] {
  const lines = text.split(/(?<=\n)/);
  return lines.length === 1 && lines[0] === '' ? [] : lines;
}
