/**
 * Workbooks, on exceljs: the sheets listed, one sheet read as rows of cells, a workbook
 * generated from rows, and one cell set with the rest of the workbook loaded and written
 * back as exceljs keeps it (values, formulas, styles, merges, sizes, sheet order).
 */
import type ExcelJS from 'exceljs';

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

/** A cell's value as text: a formula with its last result, a date in ISO form, rich text joined. */
function shown(value: ExcelJS.CellValue): string {
  if (value === null || value === undefined) return '';
  if (value instanceof Date) return value.toISOString();
  if (typeof value !== 'object') return String(value);
  if ('formula' in value || 'sharedFormula' in value) {
    const formula =
      (value as ExcelJS.CellFormulaValue).formula ?? (value as ExcelJS.CellSharedFormulaValue).sharedFormula;
    const result = (value as ExcelJS.CellFormulaValue).result;
    return `=${formula}${result === undefined ? '' : ` → ${shown(result as ExcelJS.CellValue)}`}`;
  }
  if ('richText' in value) return value.richText.map((part) => part.text).join('');
  if ('hyperlink' in value) return `${shown((value as ExcelJS.CellHyperlinkValue).text)} <${value.hyperlink}>`;
  if ('error' in value) return String(value.error);
  return JSON.stringify(value);
}

/** A cell's value from the text a model gives: a number, a formula (`=...`), empty, or the text as it is. */
export function cellValue(text: string): ExcelJS.CellValue {
  if (text === '') return null;
  if (text.startsWith('=') && text.length > 1) return { formula: text.slice(1) } as ExcelJS.CellFormulaValue;
  if (/^-?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(text)) {
    const number = Number(text);
    if (Number.isFinite(number)) return number;
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
    const cells: string[] = [];
    for (let column = 1; column <= row.cellCount; column++) cells.push(shown(row.getCell(column).value));
    lines.push(`${number}\t${cells.join('\t')}`);
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
  const before = shown(cell.value);
  cell.value = cellValue(value);
  return { bytes: new Uint8Array(await workbook.xlsx.writeBuffer()), before };
}
