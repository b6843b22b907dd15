/**
 * Documents, as built-in tools of a workspace run whose contract asks for them
 * (`withDocuments`): a family per format (xlsx, docx, pptx, pdf, barcode). Every path is
 * decided by the policy as a read or a write first, and read or written by this thread as
 * the file tools do (beneath the root, no link followed; a write with its restore point,
 * its diff and a `file-changed` event); the parsing and generating run on the document
 * pool (../../documents/document-pool.ts) under the contract's deadline.
 */

import { sep } from 'node:path';
import type { ArgumentSchema } from '../../arguments.js';
import { type DocumentOutcome, type DocumentTask, documentTask } from '../../documents/document-pool.js';
import type { DocumentFormat } from '../../documents/documents.js';
import { checkImage } from '../../images.js';
import { refuseProtected } from '../../workspace/beneath.js';
import { MAX_WRITE_BYTES } from '../../workspace/limits.js';
import type { WorkspaceSession } from '../../workspace/session.js';
import type { StepContext, ToolResult } from '../tool.js';
import type { WorkspaceToolDeclaration } from './workspace.js';

/** The largest document a tool reads. */
export const MAX_DOCUMENT_BYTES = 32 * 1024 * 1024;
/** The most characters of a document's text one answer shows. */
const MAX_TEXT_CHARS = 60_000;
/** The most rows of a sheet one answer shows. */
const MAX_ROWS = 2_000;

const PATH: ArgumentSchema = { type: 'string', minLength: 1, description: 'The file, relative to the workspace root.' };

function object(properties: Record<string, ArgumentSchema>, required: string[]): ArgumentSchema {
  return { type: 'object', properties, required, additionalProperties: false };
}

/** A document's text for the model, cut where it is too long for one answer. */
function shownText(path: string, text: string): ToolResult {
  const cut = text.length > MAX_TEXT_CHARS;
  return {
    content: `${path}: ${cut ? `${text.slice(0, MAX_TEXT_CHARS)}\n[the rest, ${text.length - MAX_TEXT_CHARS} characters, was cut; ask for fewer pages, slides or rows]` : text}`,
    isError: false,
  };
}

function failed(path: string, what: string, outcome: Extract<DocumentOutcome, { error: string }>): ToolResult {
  const error = outcome.error.length > 2_000 ? `${outcome.error.slice(0, 2_000)}…` : outcome.error;
  return { content: `${path} could not be ${what}: ${error}.`, isError: true };
}

function deadline(session: WorkspaceSession): number {
  return (session.contract.documents?.timeoutSecs ?? 60) * 1000;
}

/** The bytes of the document at `path`, once the policy allows reading it; else the answer. */
async function readDocument(
  session: WorkspaceSession,
  path: string,
  call: StepContext,
  limit = MAX_DOCUMENT_BYTES,
): Promise<{ bytes: Buffer; path: string } | ToolResult> {
  const located = session.workspace.resolve(path);
  if (!located.ok) return located.result;
  const refused = await call.authorize({ kind: 'read', path: located.relative });
  if (refused) return refused;
  return session.workspace.readBytes(path, limit, located.relative);
}

/** Reads the document and runs a task on its bytes that answers with text. */
async function reading(
  session: WorkspaceSession,
  path: string,
  call: StepContext,
  task: (bytes: Uint8Array) => DocumentTask,
  check?: (bytes: Buffer) => string | null,
): Promise<ToolResult> {
  const read = await readDocument(session, path, call);
  if (!('bytes' in read)) return read;
  const wrong = check?.(read.bytes);
  if (wrong) return { content: `${read.path}: ${wrong}`, isError: true };
  const outcome = await documentTask(task(new Uint8Array(read.bytes)), call.signal, deadline(session));
  if ('error' in outcome) return failed(read.path, 'read', outcome);
  return shownText(read.path, outcome.text);
}

/**
 * Writes `bytes` at `path` once the policy allows it, as the file tools write: the policy
 * decides on the path as written and on where it leads, the file's restore point is
 * stored first, the bytes go beneath the root by name with no link followed.
 */
async function writeDocument(
  session: WorkspaceSession,
  tool: string,
  path: string,
  bytes: Uint8Array,
  call: StepContext,
  refuseExisting?: (path: string) => ToolResult,
): Promise<{ path: string; existed: boolean } | ToolResult> {
  const workspace = session.workspace;
  if (bytes.length > MAX_WRITE_BYTES) {
    const reason = `${path} would be ${bytes.length} bytes, above the ${MAX_WRITE_BYTES} bytes one write may be, so nothing was written; make it smaller (fewer rows or pages), or split it.`;
    return { content: reason, isError: true, refusal: { rule: 'write.ceiling', reason } };
  }
  const located = workspace.resolve(path);
  if (!located.ok) return located.result;
  const refused = await call.authorize({ kind: 'write', path });
  if (refused) return refused;
  if (located.relative !== path) {
    const target = await call.authorize({ kind: 'write', path: located.relative });
    if (target) return target;
  }
  // A protected name is refused by how it is written too, as the file tools refuse it.
  const written = refuseProtected(path.split(sep).join('/'));
  if (written)
    return { content: written.reason, isError: true, refusal: { rule: written.rule, reason: written.reason } };
  const current = workspace.current(located.relative);
  if (!current.ok) return current.result;
  if (current.content !== null && refuseExisting) return refuseExisting(located.relative);
  await call.restorePoint(located.relative, current.content);
  let applied: ToolResult | null;
  try {
    applied = workspace.restore(located.relative, bytes);
  } catch (error) {
    return { content: `could not write ${located.relative}: ${(error as Error).message}`, isError: true };
  }
  if (applied) return applied;
  const existed = current.content !== null;
  call.change({
    path: located.relative,
    diff: `Binary files ${existed ? `a/${located.relative}` : '/dev/null'} and b/${located.relative} differ\n`,
  });
  call.record({ type: 'file-changed', callId: call.callId, tool, path: located.relative, added: 0, removed: 0 });
  return { path: located.relative, existed };
}

/** Runs a task that makes a document's bytes, and writes them at `path`. */
async function producing(
  session: WorkspaceSession,
  tool: string,
  path: string,
  call: StepContext,
  task: DocumentTask,
  said: (outcome: { path: string; existed: boolean; text: string }) => string,
  refuseExisting?: (path: string) => ToolResult,
): Promise<ToolResult> {
  const outcome = await documentTask(task, call.signal, deadline(session));
  if ('error' in outcome) return failed(path, 'written', outcome);
  if (!('bytes' in outcome)) return { content: `${path}: nothing was made to write.`, isError: true };
  const written = await writeDocument(session, tool, path, outcome.bytes, call, refuseExisting);
  if (!('existed' in written)) return written;
  return { content: said({ ...written, text: outcome.text }), isError: false };
}

/** Reads the document at `path`, changes it on the pool, and writes it to `output` (default: in place). */
async function changing(
  session: WorkspaceSession,
  tool: string,
  path: string,
  output: string | undefined,
  call: StepContext,
  task: (bytes: Uint8Array) => DocumentTask,
  said: (outcome: { path: string; text: string }) => string,
): Promise<ToolResult> {
  // A document changed in place is one a write may replace: read no more than a write may be.
  const read = await readDocument(session, path, call, output === undefined ? MAX_WRITE_BYTES : MAX_DOCUMENT_BYTES);
  if (!('bytes' in read)) return read;
  const outcome = await documentTask(task(new Uint8Array(read.bytes)), call.signal, deadline(session));
  if ('error' in outcome) return failed(read.path, 'changed', outcome);
  if (!('bytes' in outcome)) return { content: `${read.path}: nothing was made to write.`, isError: true };
  const written = await writeDocument(session, tool, output ?? read.path, outcome.bytes, call);
  if (!('existed' in written)) return written;
  return { content: said({ path: written.path, text: outcome.text }), isError: false };
}

const CELL = /^[A-Z]{1,3}[1-9][0-9]{0,6}$/;

/** Whether a cell address is within a sheet: columns to XFD, rows to 1,048,576. */
function inSheet(cell: string): boolean {
  const [, letters = '', digits = '0'] = /^([A-Z]+)(\d+)$/.exec(cell) ?? [];
  const column = [...letters].reduce((sum, letter) => sum * 26 + letter.charCodeAt(0) - 64, 0);
  return column <= 16_384 && Number(digits) <= 1_048_576;
}
const CELL_TEXT =
  'Cells are text: one that reads as a number is written as a number, one starting with = as a formula, an empty one as blank.';

/**
 * Why an image is not one to look for barcodes in: not a PNG or JPEG, or too large by its
 * header (read before anything is decoded: a small file may describe a huge picture).
 */
function pngOrJpeg(bytes: Buffer): string | null {
  const png = bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  const jpeg = bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff;
  if (!png && !jpeg)
    return 'barcode_read reads PNG and JPEG images; convert this one first (for example magick in.gif out.png).';
  const checked = checkImage(png ? 'image/png' : 'image/jpeg', bytes);
  return 'refused' in checked ? `barcode_read cannot look in it: ${checked.refused}` : null;
}

/** The document tools, by format; each a tool of the `documents` family. */
export const DOCUMENT_TOOLS: Record<DocumentFormat, Record<string, WorkspaceToolDeclaration>> = {
  xlsx: {
    xlsx_sheets: {
      description: 'Lists the sheets of an Excel workbook (.xlsx): each name, with its rows and columns in use.',
      parameters: object({ path: PATH }, ['path']),
      kind: 'reads',
      family: 'documents',
      run: (session, args, call) =>
        reading(session, String(args.path), call, (bytes) => ({ op: 'xlsx-sheets', bytes })),
    },
    xlsx_read: {
      description: `Reads one sheet of an Excel workbook (.xlsx), row by row (row number, then the cells from column A, tab-separated; a formula with its last result). At most ${MAX_ROWS} rows.`,
      parameters: object(
        {
          path: PATH,
          sheet: { type: 'string', minLength: 1, description: 'The sheet, by name; default the first.' },
          max_rows: { type: 'integer', minimum: 1, description: `The most rows to show (at most ${MAX_ROWS}).` },
        },
        ['path'],
      ),
      kind: 'reads',
      family: 'documents',
      run: (session, args, call) =>
        reading(session, String(args.path), call, (bytes) => ({
          op: 'xlsx-read',
          bytes,
          sheet: typeof args.sheet === 'string' ? args.sheet : null,
          maxRows: Math.min(MAX_ROWS, typeof args.max_rows === 'number' ? args.max_rows : MAX_ROWS),
        })),
    },
    xlsx_write: {
      description: `Writes a new Excel workbook (.xlsx) from sheets of rows, replacing the file. ${CELL_TEXT}`,
      parameters: object(
        {
          path: PATH,
          sheets: {
            type: 'array',
            minItems: 1,
            description: 'The sheets, in order.',
            items: object(
              {
                name: { type: 'string', minLength: 1, maxLength: 31, description: 'The sheet name.' },
                rows: {
                  type: 'array',
                  description: 'The rows from row 1, each a list of cells from column A.',
                  items: { type: 'array', items: { type: 'string' } },
                },
              },
              ['name', 'rows'],
            ),
          },
        },
        ['path', 'sheets'],
      ),
      kind: 'acts',
      family: 'documents',
      run: (session, args, call) => {
        const sheets = args.sheets as { name: string; rows: string[][] }[];
        return producing(
          session,
          'xlsx_write',
          String(args.path),
          call,
          { op: 'xlsx-write', sheets },
          (done) =>
            `wrote ${done.path}: ${sheets.length} sheet${sheets.length === 1 ? '' : 's'} (${sheets.map((sheet) => `${sheet.name}, ${sheet.rows.length} rows`).join('; ')}).`,
        );
      },
    },
    xlsx_set_cell: {
      description: `Sets one cell of an Excel workbook (.xlsx), keeping every other cell, sheet, formula and style; refused where the workbook holds what cannot be carried through (comments, macros, charts, pictures). ${CELL_TEXT}`,
      parameters: object(
        {
          path: PATH,
          sheet: { type: 'string', minLength: 1, description: 'The sheet, by name.' },
          cell: { type: 'string', minLength: 2, maxLength: 10, description: 'The cell, like B7.' },
          value: { type: 'string', description: 'What it is to hold.' },
        },
        ['path', 'sheet', 'cell', 'value'],
      ),
      kind: 'acts',
      family: 'documents',
      run: (session, args, call) => {
        const cell = String(args.cell).toUpperCase();
        if (!CELL.test(cell) || !inSheet(cell))
          return Promise.resolve({
            content: `cell ${JSON.stringify(args.cell)} is not a cell of a sheet; give a column's letters (A to XFD) and a row's number (1 to 1048576), like B7.`,
            isError: true,
          });
        return changing(
          session,
          'xlsx_set_cell',
          String(args.path),
          undefined,
          call,
          (bytes) => ({ op: 'xlsx-set-cell', bytes, sheet: String(args.sheet), cell, value: String(args.value) }),
          (done) =>
            `set ${args.sheet}!${cell} of ${done.path} (it held ${JSON.stringify(done.text)}); the rest is kept.`,
        );
      },
    },
  },
  docx: {
    docx_read: {
      description: 'Reads the text of a Word document (.docx), a paragraph a line.',
      parameters: object({ path: PATH }, ['path']),
      kind: 'reads',
      family: 'documents',
      run: (session, args, call) => reading(session, String(args.path), call, (bytes) => ({ op: 'docx-read', bytes })),
    },
    docx_write: {
      description:
        'Writes a new Word document (.docx) from paragraphs. It does not edit a document in place: write to a path where there is none.',
      parameters: object(
        {
          path: PATH,
          paragraphs: {
            type: 'array',
            minItems: 1,
            items: { type: 'string' },
            description: 'The paragraphs, in order.',
          },
        },
        ['path', 'paragraphs'],
      ),
      kind: 'acts',
      family: 'documents',
      run: (session, args, call) => {
        const paragraphs = args.paragraphs as string[];
        return producing(
          session,
          'docx_write',
          String(args.path),
          call,
          { op: 'docx-write', paragraphs },
          (done) => `wrote ${done.path}: ${paragraphs.length} paragraph${paragraphs.length === 1 ? '' : 's'}.`,
          (existing) => {
            const reason = `${existing} is a document already, and docx_write does not edit one in place: what a Word document holds beyond its paragraphs' text (styles, tables, images, comments, tracked changes) would be dropped on the way. Write the new version to another path (read this one with docx_read first).`;
            return { content: reason, isError: true, refusal: { rule: 'docx.no-edit-in-place', reason } };
          },
        );
      },
    },
  },
  pptx: {
    pptx_read: {
      description:
        'Reads a PowerPoint presentation (.pptx) slide by slide, in the presentation’s order: each slide’s text, then its speaker notes.',
      parameters: object(
        { path: PATH, slide: { type: 'integer', minimum: 1, description: 'One slide, by its number; default all.' } },
        ['path'],
      ),
      kind: 'reads',
      family: 'documents',
      run: (session, args, call) =>
        reading(session, String(args.path), call, (bytes) => ({
          op: 'pptx-read',
          bytes,
          slide: typeof args.slide === 'number' ? args.slide : null,
        })),
    },
  },
  pdf: {
    pdf_read: {
      description: 'Reads the text of a PDF page by page.',
      parameters: object(
        {
          path: PATH,
          pages: {
            type: 'array',
            items: { type: 'integer', minimum: 1 },
            minItems: 1,
            description: 'The pages, by number; default all.',
          },
        },
        ['path'],
      ),
      kind: 'reads',
      family: 'documents',
      run: (session, args, call) =>
        reading(session, String(args.path), call, (bytes) => ({
          op: 'pdf-read',
          bytes,
          pages: Array.isArray(args.pages) ? (args.pages as number[]) : null,
        })),
    },
    pdf_write: {
      description:
        'Writes a new PDF, one page per string (a string too long for a page goes on over the next), replacing the file.',
      parameters: object(
        {
          path: PATH,
          pages: { type: 'array', minItems: 1, items: { type: 'string' }, description: 'Each page’s text.' },
        },
        ['path', 'pages'],
      ),
      kind: 'acts',
      family: 'documents',
      run: (session, args, call) =>
        producing(
          session,
          'pdf_write',
          String(args.path),
          call,
          { op: 'pdf-write', pages: args.pages as string[] },
          (done) => `wrote ${done.path}: ${done.text}.`,
        ),
    },
    pdf_watermark: {
      description: 'Stamps a text across every page of a PDF, written to output (default: the PDF itself).',
      parameters: object(
        {
          path: PATH,
          text: { type: 'string', minLength: 1, maxLength: 200, description: 'The watermark, like DRAFT.' },
          output: { type: 'string', minLength: 1, description: 'Where to write the stamped PDF; default in place.' },
        },
        ['path', 'text'],
      ),
      kind: 'acts',
      family: 'documents',
      run: (session, args, call) =>
        changing(
          session,
          'pdf_watermark',
          String(args.path),
          typeof args.output === 'string' ? args.output : undefined,
          call,
          (bytes) => ({ op: 'pdf-watermark', bytes, text: String(args.text) }),
          (done) => `wrote ${done.path}: ${done.text} with ${JSON.stringify(args.text)}.`,
        ),
    },
    pdf_fill_form: {
      description:
        'Fills the form fields of a PDF (AcroForm) by name: text fields take text, check boxes true or false, choices one of their options. Written to output (default: the PDF itself).',
      parameters: object(
        {
          path: PATH,
          fields: { type: 'object', description: 'Each field’s name and its value, as text.' },
          output: { type: 'string', minLength: 1, description: 'Where to write the filled PDF; default in place.' },
        },
        ['path', 'fields'],
      ),
      kind: 'acts',
      family: 'documents',
      run: (session, args, call) => {
        const fields = args.fields as Record<string, unknown>;
        const bad = Object.entries(fields).filter(([, value]) => typeof value !== 'string');
        if (bad.length > 0 || Object.keys(fields).length === 0)
          return Promise.resolve({
            content:
              bad.length > 0
                ? `each field's value is text; ${bad.map(([name]) => JSON.stringify(name)).join(', ')} ${bad.length === 1 ? 'is' : 'are'} not.`
                : 'fields names no field; give each field to fill and its value.',
            isError: true,
          });
        return changing(
          session,
          'pdf_fill_form',
          String(args.path),
          typeof args.output === 'string' ? args.output : undefined,
          call,
          (bytes) => ({ op: 'pdf-fill-form', bytes, fields: fields as Record<string, string> }),
          (done) => `wrote ${done.path}: ${done.text}.`,
        );
      },
    },
  },
  barcode: {
    barcode_read: {
      description: 'Finds and decodes the barcodes and QR codes in a PNG or JPEG image: each format and its text.',
      parameters: object({ path: PATH }, ['path']),
      kind: 'reads',
      family: 'documents',
      run: (session, args, call) =>
        reading(session, String(args.path), call, (bytes) => ({ op: 'barcode-read', bytes }), pngOrJpeg),
    },
  },
};

/** The names of every document tool. */
export const DOCUMENT_TOOL_NAMES: readonly string[] = Object.values(DOCUMENT_TOOLS).flatMap((tools) =>
  Object.keys(tools),
);
