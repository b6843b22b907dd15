/**
 * Documents (`TaskContract.withDocuments`, `[documents]` in the user's io.toml): what a
 * contract asks for, checked, and the package each format is read and written with. The
 * work itself runs on a pool of its own (./document-pool.ts, ./document-worker.ts); the
 * tools are ../tools/families/documents.ts.
 */
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError } from '../../errors.js';
import { keptPackageDir, packageName } from '../exec/containment/harness-code.js';

/** The formats, each a family of tools. */
export const DOCUMENT_FORMATS = ['barcode', 'docx', 'pdf', 'pptx', 'xlsx'] as const;
export type DocumentFormat = (typeof DOCUMENT_FORMATS)[number];

/**
 * The packages each format needs, at the versions the project is tested with: optional
 * peer dependencies, installed by whoever turns the format on (a program that does not
 * loads none of them). The field's well-kept standards: exceljs for workbooks; mammoth to
 * read Word documents and docx to write them; pdf-lib to write and change PDFs and
 * pdfjs-dist (Mozilla's PDF.js) to read their text; jszip for a presentation's parts; a
 * WebAssembly build of ZXing for barcodes.
 */
export const DOCUMENT_PACKAGES: Record<DocumentFormat, Record<string, string>> = {
  xlsx: { exceljs: '4.4.0', jszip: '3.10.2' },
  docx: { mammoth: '1.13.0', docx: '9.15.2' },
  pptx: { jszip: '3.10.2' },
  pdf: { 'pdf-lib': '1.17.1', 'pdfjs-dist': '5.4.296' },
  barcode: { 'zxing-wasm': '3.1.4' },
};

/** What `withDocuments` takes. */
export interface DocumentsOptions {
  /** The formats whose tools are offered. Default all of them. */
  formats?: readonly DocumentFormat[];
  /** How long one document's reading or writing may take, in seconds. Default 60. */
  timeoutSecs?: number;
}

/** A contract's document settings, checked, as stored with the run. */
export interface DocumentsData {
  formats: DocumentFormat[];
  timeoutSecs: number;
}

export const DEFAULT_DOCUMENT_TIMEOUT_SECS = 60;

/** Checks what `withDocuments` (or `[documents]`) was given; the defaults filled in. */
export function checkDocumentsOptions(options: DocumentsOptions | undefined): DocumentsData {
  const given = options ?? {};
  if (typeof given !== 'object' || given === null || Array.isArray(given))
    throw new InvalidArgumentError('withDocuments takes { formats, timeoutSecs }.');
  for (const key of Object.keys(given))
    if (key !== 'formats' && key !== 'timeoutSecs')
      throw new InvalidArgumentError(
        `withDocuments: unknown option ${JSON.stringify(key)}; the options are formats, timeoutSecs.`,
      );
  const formats = given.formats ?? DOCUMENT_FORMATS;
  if (!Array.isArray(formats) || formats.length === 0 || formats.some((format) => !DOCUMENT_FORMATS.includes(format)))
    throw new InvalidArgumentError(
      `withDocuments: formats is a non-empty list of ${DOCUMENT_FORMATS.map((name) => JSON.stringify(name)).join(', ')}; got ${JSON.stringify(formats)}.`,
    );
  const timeoutSecs = given.timeoutSecs ?? DEFAULT_DOCUMENT_TIMEOUT_SECS;
  if (typeof timeoutSecs !== 'number' || !(timeoutSecs > 0) || timeoutSecs > 600)
    throw new InvalidArgumentError(
      `withDocuments: timeoutSecs is how long one document may take, in seconds, above 0 and at most 600; got ${JSON.stringify(timeoutSecs)}.`,
    );
  return { formats: [...new Set(formats)].sort() as DocumentFormat[], timeoutSecs };
}

const require = createRequire(import.meta.url);
const HERE = dirname(fileURLToPath(import.meta.url));

/**
 * Why the formats asked for cannot be worked with here: the packages they need that are
 * not installed, and the command that installs them; null when every one is there.
 */
export function missingPackages(
  formats: readonly DocumentFormat[],
  packages: Partial<Record<DocumentFormat, Record<string, string>>> = DOCUMENT_PACKAGES,
): string | null {
  const missing: string[] = [];
  for (const format of formats)
    for (const [name, version] of Object.entries(packages[format] ?? {})) {
      // Refused (CODE_NOT_KEPT) where Node would find it outside the directories kept from runs.
      if (keptPackageDir(packageName(name), HERE) === null) {
        missing.push(`${name}@${version}`);
        continue;
      }
      try {
        require.resolve(name);
      } catch {
        missing.push(`${name}@${version}`);
      }
    }
  if (missing.length === 0) return null;
  return `the contract asks for documents in ${formats.join(', ')} (withDocuments), whose packages are not installed: ${missing.join(', ')}. Install them beside io-harness (npm install ${missing.join(' ')}), or ask for fewer formats.`;
}
