/**
 * Presentations, read slide by slide: the slides in the order the presentation lists them
 * (ppt/presentation.xml's slide list, through its relationships), each slide's text a
 * paragraph a line, its speaker notes after. The parts are read with jszip and the few
 * elements wanted found by linear scans: no XML is evaluated.
 */
import { posix } from 'node:path';

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

/** A character reference's character; one past Unicode is left as written. */
function character(code: number, whole: string): string {
  return Number.isInteger(code) && code >= 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
}

/** XML text with its entities put back. */
function unescapeXml(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]{1,8}|#[0-9]{1,8}|[a-z]+);/g, (whole, name: string) => {
    if (name.startsWith('#x')) return character(Number.parseInt(name.slice(2), 16), whole);
    if (name.startsWith('#')) return character(Number.parseInt(name.slice(1), 10), whole);
    return ENTITIES[name] ?? whole;
  });
}

/** The most a part of a presentation may unpack to: a few kilobytes of zip may claim gigabytes. */
const MAX_PART_BYTES = 64 * 1024 * 1024;

/** A part named relative to `base` (`ppt`, or a slide's folder); a target from the package's root starts with /. */
function partPath(base: string, target: string): string {
  return target.startsWith('/') ? posix.normalize(target.slice(1)) : posix.join(base, target);
}

/** The text of a slide's (or notes page's) XML: each `<a:p>` a line, its `<a:t>` runs joined. */
function textOf(xml: string): string[] {
  const lines: string[] = [];
  for (const paragraph of xml.split('</a:p>')) {
    const runs = [...paragraph.matchAll(/<a:t(?:\s[^>]*)?>([^<]*)<\/a:t>/g)].map((match) =>
      unescapeXml(match[1] ?? ''),
    );
    const line = runs.join('').trim();
    if (line !== '') lines.push(line);
  }
  return lines;
}

/** Relationship ids to targets, from a `.rels` part. */
function relationships(xml: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const match of xml.matchAll(/<Relationship\s[^>]*>/g)) {
    const id = /\sId="([^"]*)"/.exec(match[0])?.[1];
    const target = /\sTarget="([^"]*)"/.exec(match[0])?.[1];
    if (id && target) map.set(id, unescapeXml(target));
  }
  return map;
}

/** Lines past which no more slides are read. */
const MAX_SLIDE_LINES = 20_000;

export async function pptxRead(bytes: Uint8Array, only: number | null): Promise<string> {
  const JSZip = ((await import('jszip')) as unknown as { default: typeof import('jszip') }).default;
  const zip = await JSZip.loadAsync(bytes);
  const read = async (path: string) => {
    const part = zip.file(path);
    if (!part) return null;
    const size = (part as unknown as { _data?: { uncompressedSize?: number } })._data?.uncompressedSize ?? 0;
    if (size > MAX_PART_BYTES)
      throw new Error(`its part ${path} unpacks to ${size} bytes, more than a part is read to (${MAX_PART_BYTES})`);
    return part.async('string');
  };
  const presentation = await read('ppt/presentation.xml');
  const rels = await read('ppt/_rels/presentation.xml.rels');
  if (presentation === null || rels === null) throw new Error('it is not a presentation (no ppt/presentation.xml)');
  const targets = relationships(rels);
  const slides = [...presentation.matchAll(/<p:sldId\s[^>]*>/g)]
    .map((match) => /\sr:id="([^"]*)"/.exec(match[0])?.[1])
    .map((id) => (id ? targets.get(id) : undefined))
    .filter((target): target is string => target !== undefined)
    .map((target) => partPath('ppt', target))
    // A slide listed again is read once.
    .filter((path, index, all) => all.indexOf(path) === index);
  if (only !== null && (only < 1 || only > slides.length))
    throw new Error(`there is no slide ${only}; the presentation has ${slides.length}`);
  const out = [`${slides.length} slide${slides.length === 1 ? '' : 's'}`];
  for (const [index, path] of slides.entries()) {
    if (only !== null && index + 1 !== only) continue;
    const xml = (await read(path)) ?? '';
    const lines = textOf(xml);
    out.push('', `slide ${index + 1}:`, ...(lines.length > 0 ? lines : ['(no text)']));
    const slideRels = await read(posix.join(posix.dirname(path), '_rels', `${posix.basename(path)}.rels`));
    if (out.length > MAX_SLIDE_LINES) {
      out.push('', `[slides from ${index + 1} on not read: the text so far is as much as an answer shows]`);
      break;
    }
    const notesTarget = slideRels
      ? [...relationships(slideRels).values()].find((target) => target.includes('notesSlide'))
      : undefined;
    if (notesTarget) {
      const notes = textOf((await read(partPath(posix.dirname(path), notesTarget))) ?? '').filter(
        (line) => !/^\d+$/.test(line),
      );
      if (notes.length > 0) out.push('notes:', ...notes);
    }
  }
  return out.join('\n');
}
