/**
 * Workbooks, on exceljs: the sheets listed, one sheet read as rows of cells, a workbook
 * generated from rows, and one cell set with the rest of the workbook loaded and written
 * back as exceljs keeps it (values, formulas, styles, merges, sizes, sheet order). A set
 * that would lose a part of the file exceljs does not model (a comment, a macro, a chart)
 * is refused, naming it, rather than written.
 */
import type ExcelJS from 'exceljs';

/** The most columns of a row an answer shows. */
const MAX_COLUMNS = 200;

async function excel(): Promise<typeof ExcelJS> {
  const module = (await import('exceljs')) as unknown as { default?: typeof ExcelJS } & typeof ExcelJS;
  return module.default ?? module;
}

async function load(bytes: Uint8Array): Promise<ExcelJS.Workbook> {
  const { Workbook } = await excel();
  const workbook = new Workbook();
  await workbook.xlsx.load(Buffer.from(bytes) as unknown as ArrayBuffer);
  return workbook;
}

/** A cell as text: a formula (a shared one as it reads in this cell) with its last result, else its value. */
function shownCell(cell: ExcelJS.Cell): string {
  const formula = cell.formula;
  if (formula) return `=${formula}${cell.result === undefined ? '' : ` → ${shown(cell.result as ExcelJS.CellValue)}`}`;
  return shown(cell.value);
}

/** A value as text: a date in ISO form, rich text joined, a formula's last result. */
function shown(value: ExcelJS.CellValue): string {
  if (value === null || value === undefined) return '';
  if (value instanceof Date) return value.toISOString();
  if (typeof value !== 'object') return String(value);
  if ('formula' in value || 'sharedFormula' in value) {
    const result = (value as ExcelJS.CellFormulaValue).result;
    return result === undefined ? '' : shown(result as ExcelJS.CellValue);
  }
  if ('richText' in value) return value.richText.map((part) => part.text).join('');
  if ('hyperlink' in value) return `${shown((value as ExcelJS.CellHyperlinkValue).text)} <${value.hyperlink}>`;
  if ('error' in value) return String(value.error);
  return JSON.stringify(value);
}

/**
 * A cell's value from the text a model gives: a number, a formula (`=...`), empty, or the
 * text as it is. A number that would not read back the same (a leading zero, as in an
 * account number; more digits than a double keeps) stays text.
 */
export function cellValue(text: string): ExcelJS.CellValue {
  if (text === '') return null;
  if (text.startsWith('=') && text.length > 1) return { formula: text.slice(1) } as ExcelJS.CellFormulaValue;
  if (/^-?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(text) && !/^-?0\d/.test(text)) {
    const number = Number(text);
    if (Number.isFinite(number) && (/[.eE]/.test(text) || Number.isSafeInteger(number))) return number;
  }
  return text;
}

function sheetNamed(workbook: ExcelJS.Workbook, name: string | null): ExcelJS.Worksheet | string {
  const sheet = name === null ? workbook.worksheets[0] : workbook.getWorksheet(name);
  if (sheet) return sheet;
  const names = workbook.worksheets.map((each) => JSON.stringify(each.name)).join(', ');
  return name === null
    ? 'the workbook has no sheets'
    : `there is no sheet ${JSON.stringify(name)}; the sheets are ${names}`;
}

export async function xlsxSheets(bytes: Uint8Array): Promise<string> {
  const workbook = await load(bytes);
  if (workbook.worksheets.length === 0) return 'the workbook has no sheets.';
  return workbook.worksheets
    .map(
      (sheet) =>
        `${sheet.name}: ${sheet.actualRowCount} rows, ${sheet.actualColumnCount} columns${sheet.state !== 'visible' ? ` (${sheet.state})` : ''}`,
    )
    .join('\n');
}

export async function xlsxRead(bytes: Uint8Array, name: string | null, maxRows: number): Promise<string> {
  const workbook = await load(bytes);
  const sheet = sheetNamed(workbook, name);
  if (typeof sheet === 'string') throw new Error(sheet);
  const lines = [
    `sheet ${sheet.name}: ${sheet.actualRowCount} rows; row number, then the cells from column A, tab-separated`,
  ];
  let shownRows = 0;
  sheet.eachRow({ includeEmpty: false }, (row, number) => {
    if (shownRows >= maxRows) return;
    shownRows++;
    // Only the cells that hold something are visited: a row naming its last column is not 16,384 cells.
    const cells: string[] = [];
    let wide = false;
    row.eachCell({ includeEmpty: false }, (cell, column) => {
      if (column > MAX_COLUMNS) {
        wide = true;
        return;
      }
      while (cells.length < column - 1) cells.push('');
      cells.push(shownCell(cell));
    });
    lines.push(`${number}\t${cells.join('\t')}${wide ? `\t[cells past column ${MAX_COLUMNS} not shown]` : ''}`);
  });
  if (sheet.actualRowCount > shownRows) lines.push(`[${sheet.actualRowCount - shownRows} more rows not shown]`);
  return lines.join('\n');
}

export async function xlsxWrite(sheets: { name: string; rows: string[][] }[]): Promise<Uint8Array> {
  const { Workbook } = await excel();
  const workbook = new Workbook();
  for (const { name, rows } of sheets) {
    const sheet = workbook.addWorksheet(name);
    for (const row of rows) sheet.addRow(row.map(cellValue));
  }
  return new Uint8Array(await workbook.xlsx.writeBuffer());
}

/** The parts of a workbook's zip, by name. */
async function parts(bytes: Uint8Array): Promise<string[]> {
  const JSZip = ((await import('jszip')) as unknown as { default: typeof import('jszip') }).default;
  return Object.keys((await JSZip.loadAsync(bytes)).files).filter((name) => !name.endsWith('/'));
}

/** Parts exceljs writes under names of its own: what they hold is kept, under another name. */
const RENAMED =
  /^(\[Content_Types\]\.xml|_rels\/.*|docProps\/.*|xl\/_rels\/.*|xl\/(workbook|styles|sharedStrings|calcChain)\.xml|xl\/worksheets\/(_rels\/)?sheet\d+\.xml(\.rels)?|xl\/theme\/.*|xl\/tables\/.*)$/;

export async function xlsxSetCell(
  bytes: Uint8Array,
  name: string,
  address: string,
  value: string,
): Promise<{ bytes: Uint8Array; before: string }> {
  const workbook = await load(bytes);
  const sheet = sheetNamed(workbook, name);
  if (typeof sheet === 'string') throw new Error(sheet);
  const cell = sheet.getCell(address);
  const before = shownCell(cell);
  if (cell.type === 6 && typeof cell.value === 'object' && cell.value !== null && 'shareType' in cell.value)
    throw new Error(
      `${address} holds the formula ${before.split(' → ')[0]} that other cells share; set those cells first, or write the workbook anew with xlsx_write`,
    );
  try {
    cell.value = cellValue(value);
  } catch (error) {
    throw new Error(`${address} cannot be set: ${(error as Error).message}`);
  }
  const written = new Uint8Array(await workbook.xlsx.writeBuffer());
  const kept = new Set(await parts(written));
  const lost = (await parts(bytes)).filter((part) => !kept.has(part) && !RENAMED.test(part));
  if (lost.length > 0)
    throw new Error(
      `setting one cell would drop what the workbook holds beyond cells and styles (${lost.slice(0, 10).join(', ')}${lost.length > 10 ? `, and ${lost.length - 10} more` : ''}): comments, macros, charts or pictures the library does not carry through. Nothing was written; change this workbook with a spreadsheet program, or write a new one with xlsx_write`,
    );
  return { bytes: written, before };
}
