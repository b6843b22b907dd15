/**
 * Presentations, read slide by slide: the slides in the order the presentation lists them
 * (ppt/presentation.xml's slide list, through its relationships), each slide's text a
 * paragraph a line, its speaker notes after. The parts are read with jszip and the few
 * elements wanted found by linear scans: no XML is evaluated.
 */
import { posix } from 'node:path';

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

/** XML text with its entities put back. */
function unescapeXml(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-z]+);/g, (whole, name: string) => {
    if (name.startsWith('#x')) return String.fromCodePoint(Number.parseInt(name.slice(2), 16));
    if (name.startsWith('#')) return String.fromCodePoint(Number.parseInt(name.slice(1), 10));
    return ENTITIES[name] ?? whole;
  });
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

export async function pptxRead(bytes: Uint8Array, only: number | null): Promise<string> {
  const JSZip = ((await import('jszip')) as unknown as { default: typeof import('jszip') }).default;
  const zip = await JSZip.loadAsync(bytes);
  const read = async (path: string) => (await zip.file(path)?.async('string')) ?? null;
  const presentation = await read('ppt/presentation.xml');
  const rels = await read('ppt/_rels/presentation.xml.rels');
  if (presentation === null || rels === null) throw new Error('it is not a presentation (no ppt/presentation.xml)');
  const targets = relationships(rels);
  const slides = [...presentation.matchAll(/<p:sldId\s[^>]*>/g)]
    .map((match) => /\sr:id="([^"]*)"/.exec(match[0])?.[1])
    .map((id) => (id ? targets.get(id) : undefined))
    .filter((target): target is string => target !== undefined)
    .map((target) => posix.join('ppt', target));
  if (only !== null && (only < 1 || only > slides.length))
    throw new Error(`there is no slide ${only}; the presentation has ${slides.length}`);
  const out = [`${slides.length} slide${slides.length === 1 ? '' : 's'}`];
  for (const [index, path] of slides.entries()) {
    if (only !== null && index + 1 !== only) continue;
    const xml = (await read(path)) ?? '';
    const lines = textOf(xml);
    out.push('', `slide ${index + 1}:`, ...(lines.length > 0 ? lines : ['(no text)']));
    const slideRels = await read(posix.join(posix.dirname(path), '_rels', `${posix.basename(path)}.rels`));
    const notesTarget = slideRels
      ? [...relationships(slideRels).values()].find((target) => target.includes('notesSlide'))
      : undefined;
    if (notesTarget) {
      const notes = textOf((await read(posix.join(posix.dirname(path), notesTarget))) ?? '').filter(
        (line) => !/^\d+$/.test(line),
      );
      if (notes.length > 0) out.push('notes:', ...notes);
    }
  }
  return out.join('\n');
}
