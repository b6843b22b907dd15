/**
 * What a thread of the document pool runs (./document-pool.ts): one task, read or written
 * with the format's package, loaded at the first task that needs it. An error is an
 * answer (`error`), never a throw that would take the thread down with it.
 */
import type { DocumentOutcome, DocumentTask } from './document-pool.js';

async function work(task: DocumentTask): Promise<Exclude<DocumentOutcome, { error: string }>> {
  switch (task.op) {
    case 'xlsx-sheets':
      return { text: await (await import('./xlsx.js')).xlsxSheets(task.bytes) };
    case 'xlsx-read':
      return { text: await (await import('./xlsx.js')).xlsxRead(task.bytes, task.sheet, task.maxRows) };
    case 'xlsx-write':
      return { bytes: await (await import('./xlsx.js')).xlsxWrite(task.sheets), text: '' };
    case 'xlsx-set-cell': {
      const done = await (await import('./xlsx.js')).xlsxSetCell(task.bytes, task.sheet, task.cell, task.value);
      return { bytes: done.bytes, text: done.before };
    }
    case 'docx-read':
      return { text: await (await import('./docx.js')).docxRead(task.bytes) };
    case 'docx-write':
      return { bytes: await (await import('./docx.js')).docxWrite(task.paragraphs), text: '' };
    case 'pptx-read':
      return { text: await (await import('./pptx.js')).pptxRead(task.bytes, task.slide) };
    case 'pdf-read':
      return { text: await (await import('./pdf.js')).pdfRead(task.bytes, task.pages) };
    case 'pdf-write': {
      const done = await (await import('./pdf.js')).pdfWrite(task.pages);
      return {
        bytes: done.bytes,
        text: `${done.pages} page${done.pages === 1 ? '' : 's'}${done.replaced > 0 ? `; ${done.replaced} characters the PDF's standard font cannot draw were written as ?` : ''}`,
      };
    }
    case 'pdf-watermark': {
      const done = await (await import('./pdf.js')).pdfWatermark(task.bytes, task.text);
      return { bytes: done.bytes, text: `${done.pages} page${done.pages === 1 ? '' : 's'} stamped` };
    }
    case 'pdf-fill-form': {
      const done = await (await import('./pdf.js')).pdfFillForm(task.bytes, task.fields);
      return { bytes: done.bytes, text: `filled ${done.filled.join(', ')}` };
    }
    case 'barcode-read':
      return { text: await (await import('./barcode.js')).barcodeRead(task.bytes) };
  }
}

/** The most characters of text that cross back to the agent's thread (an answer shows fewer, and says it cut). */
const MAX_TEXT = 256 * 1024;
/** The most characters of a library's error that cross back. */
const MAX_ERROR = 2_000;

const cut = (text: string, max: number) =>
  text.length > max ? `${text.slice(0, max)}… [${text.length - max} more characters]` : text;

export default async function run(task: DocumentTask): Promise<DocumentOutcome> {
  try {
    const outcome = await work(task);
    return { ...outcome, text: cut(outcome.text, MAX_TEXT) };
  } catch (error) {
    return { error: cut(error instanceof Error ? error.message : String(error), MAX_ERROR) };
  }
}
