/**
 * PDFs: text read page by page with PDF.js (pdfjs-dist, its script evaluation off), and
 * written, stamped and filled with pdf-lib: one page per string (a string that does not
 * fit goes on over more), a watermark across every page, AcroForm fields filled by name.
 */
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import type { PDFDocument, PDFFont } from 'pdf-lib';

const PAGE: [number, number] = [612, 792];
const MARGIN = 56;
const SIZE = 11;
const LEADING = 15;

async function pdfLib(): Promise<typeof import('pdf-lib')> {
  return import('pdf-lib');
}

async function load(bytes: Uint8Array): Promise<PDFDocument> {
  const { PDFDocument } = await pdfLib();
  try {
    return await PDFDocument.load(bytes, { updateMetadata: false });
  } catch (error) {
    const message = (error as Error).message;
    if (/encrypted/i.test(message)) throw new Error('the PDF is encrypted; it cannot be changed without its password');
    throw error;
  }
}

export async function pdfRead(bytes: Uint8Array, pages: number[] | null): Promise<string> {
  const pdfjs = await import('pdfjs-dist/legacy/build/pdf.mjs');
  // The package's own character maps and standard fonts, read from its folder: CJK text needs them, and nothing is fetched.
  const root = `${dirname(dirname(dirname(createRequire(import.meta.url).resolve('pdfjs-dist/legacy/build/pdf.mjs'))))}/`;
  const document = await pdfjs.getDocument({
    data: new Uint8Array(bytes),
    isEvalSupported: false,
    disableFontFace: true,
    useSystemFonts: false,
    cMapUrl: `${root}cmaps/`,
    cMapPacked: true,
    standardFontDataUrl: `${root}standard_fonts/`,
    verbosity: 0,
  }).promise;
  try {
    const count = document.numPages;
    const wanted = pages ?? Array.from({ length: count }, (_, i) => i + 1);
    const missing = wanted.filter((page) => page < 1 || page > count);
    if (missing.length > 0) throw new Error(`there is no page ${missing.join(', ')}; the PDF has ${count}`);
    const out = [`${count} page${count === 1 ? '' : 's'}`];
    for (const number of wanted) {
      const page = await document.getPage(number);
      const content = await page.getTextContent();
      let text = '';
      for (const item of content.items) {
        if (!('str' in item)) continue;
        text += item.str;
        if (item.hasEOL) text += '\n';
      }
      out.push('', `page ${number}:`, text.trim() === '' ? '(no text)' : text.trim());
    }
    return out.join('\n');
  } finally {
    await document.destroy();
  }
}

/** `text` with what the font cannot draw replaced by `?`, and how many were replaced. */
function drawable(font: PDFFont, text: string): { text: string; replaced: number } {
  let replaced = 0;
  let out = '';
  for (const character of text) {
    try {
      font.encodeText(character);
      out += character;
    } catch {
      replaced++;
      out += '?';
    }
  }
  return { text: out, replaced };
}

/** `text` broken into lines that fit `width` at `size`. */
function wrap(font: PDFFont, text: string, width: number): string[] {
  const lines: string[] = [];
  for (const paragraph of text.split(/\r?\n/)) {
    let line = '';
    for (const word of paragraph.split(/(\s+)/)) {
      const next = line + word;
      if (line !== '' && font.widthOfTextAtSize(next.trimEnd(), SIZE) > width) {
        lines.push(line.trimEnd());
        line = word.trimStart();
      } else line = next;
    }
    lines.push(line.trimEnd());
  }
  return lines;
}

export async function pdfWrite(texts: string[]): Promise<{ bytes: Uint8Array; pages: number; replaced: number }> {
  const { PDFDocument, StandardFonts } = await pdfLib();
  const document = await PDFDocument.create();
  const font = await document.embedFont(StandardFonts.Helvetica);
  let replaced = 0;
  const perPage = Math.floor((PAGE[1] - 2 * MARGIN) / LEADING);
  for (const text of texts) {
    const cleaned = drawable(font, text);
    replaced += cleaned.replaced;
    const lines = wrap(font, cleaned.text, PAGE[0] - 2 * MARGIN);
    for (let start = 0; start === 0 || start < lines.length; start += perPage) {
      const page = document.addPage(PAGE);
      for (const [index, line] of lines.slice(start, start + perPage).entries())
        page.drawText(line, { x: MARGIN, y: PAGE[1] - MARGIN - SIZE - index * LEADING, size: SIZE, font });
    }
  }
  return { bytes: await document.save(), pages: document.getPageCount(), replaced };
}

export async function pdfWatermark(bytes: Uint8Array, text: string): Promise<{ bytes: Uint8Array; pages: number }> {
  const { StandardFonts, degrees, rgb } = await pdfLib();
  const document = await load(bytes);
  const font = await document.embedFont(StandardFonts.HelveticaBold);
  const { text: mark } = drawable(font, text);
  for (const page of document.getPages()) {
    const { width, height } = page.getSize();
    const size = Math.max(12, Math.min(72, (Math.hypot(width, height) * 0.6) / Math.max(1, mark.length) / 0.6));
    const length = font.widthOfTextAtSize(mark, size);
    const angle = Math.atan2(height, width);
    page.drawText(mark, {
      x: width / 2 - (Math.cos(angle) * length) / 2 + (Math.sin(angle) * size) / 3,
      y: height / 2 - (Math.sin(angle) * length) / 2 - (Math.cos(angle) * size) / 3,
      size,
      font,
      color: rgb(0.6, 0.6, 0.6),
      opacity: 0.35,
      rotate: degrees((angle * 180) / Math.PI),
    });
  }
  return { bytes: await document.save(), pages: document.getPageCount() };
}

export async function pdfFillForm(
  bytes: Uint8Array,
  values: Record<string, string>,
): Promise<{ bytes: Uint8Array; filled: string[] }> {
  const lib = await pdfLib();
  const document = await load(bytes);
  const form = document.getForm();
  const names = form.getFields().map((field) => field.getName());
  const unknown = Object.keys(values).filter((name) => !names.includes(name));
  if (names.length === 0) throw new Error('the PDF has no form fields');
  if (unknown.length > 0)
    throw new Error(
      `there is no field ${unknown.map((name) => JSON.stringify(name)).join(', ')}; the fields are ${names.map((name) => JSON.stringify(name)).join(', ')}`,
    );
  const filled: string[] = [];
  for (const [name, value] of Object.entries(values)) {
    const field = form.getField(name);
    if (field instanceof lib.PDFTextField) field.setText(value);
    else if (field instanceof lib.PDFCheckBox) {
      if (/^(true|yes|on|1|x)$/i.test(value)) field.check();
      else if (/^(false|no|off|0|)$/i.test(value)) field.uncheck();
      else throw new Error(`${name} is a check box: give it true or false, not ${JSON.stringify(value)}`);
    } else if (
      field instanceof lib.PDFDropdown ||
      field instanceof lib.PDFOptionList ||
      field instanceof lib.PDFRadioGroup
    ) {
      const options = field.getOptions();
      if (!options.includes(value))
        throw new Error(
          `${name} takes one of ${options.map((option) => JSON.stringify(option)).join(', ')}, not ${JSON.stringify(value)}`,
        );
      field.select(value);
    } else throw new Error(`${name} is a field that takes no value (a button or a signature)`);
    filled.push(name);
  }
  return { bytes: await document.save(), filled };
}
