/**
 * Documents (`withDocuments()`), each format on its real package through a real run:
 * fixtures the test builds with the same field-standard libraries, read back and changed
 * by the model's calls, and checked by reading the files again here. A cell edited with
 * the rest kept; a watermark on every page of a three-page PDF; a form field filled; a
 * Word document written, read, and its edit in place refused with the reason; a
 * presentation read slide by slide; a QR code decoded; every path decided by the policy.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import JSZip from 'jszip';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import { describe, expect, it } from 'vitest';
import { Config, Policy, runWith, TaskContract } from '../dist/index.js';
import { type Answer, openStore, serve, tempWorkspace, turns } from './support/workspace.js';

const POLICY = Policy.default().layer('test').denyRead('private/**').denyWrite('locked/**');

async function run(
  root: string,
  answers: Answer[],
  contract = TaskContract.workspace('work the documents', root).withDocuments(),
) {
  const store = await openStore();
  const { server, provider } = await serve(turns([...answers, { text: 'done' }]));
  const result = await runWith(contract, provider, store, POLICY);
  const observations = store.steps(result.runId).flatMap((step) => step.observations.map((o) => o.content));
  const first = server.calls[0]?.body as { tools?: { function: { name: string } }[] } | undefined;
  return {
    result,
    observations,
    events: store.events(result.runId),
    tools: (first?.tools ?? []).map((tool) => tool.function.name),
  };
}

const call = (name: string, args: Record<string, unknown>): Answer => ({ toolCalls: [{ name, args }] });

async function workbook(): Promise<Buffer> {
  const book = new ExcelJS.Workbook();
  const prices = book.addWorksheet('Prices');
  prices.addRow(['item', 'price', 'count']);
  prices.addRow(['pen', 2.5, 4]);
  prices.addRow(['ink', 7, 1]);
  prices.getCell('D2').value = { formula: 'B2*C2', result: 10 } as ExcelJS.CellFormulaValue;
  prices.getCell('A1').font = { bold: true };
  book.addWorksheet('Notes').addRow(['keep me']);
  return Buffer.from(await book.xlsx.writeBuffer());
}

async function loadBook(path: string): Promise<ExcelJS.Workbook> {
  const book = new ExcelJS.Workbook();
  await book.xlsx.load(readFileSync(path) as unknown as ArrayBuffer);
  return book;
}

async function threePages(withForm: boolean): Promise<Uint8Array> {
  const pdf = await PDFDocument.create();
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  for (const text of ['first page', 'second page', 'third page'])
    pdf.addPage([612, 792]).drawText(text, { x: 72, y: 700, size: 14, font });
  if (withForm) {
    const form = pdf.getForm();
    form.createTextField('applicant').addToPage(pdf.getPage(0), { x: 72, y: 600, width: 200, height: 24 });
    form.createCheckBox('agreed').addToPage(pdf.getPage(0), { x: 72, y: 560, width: 16, height: 16 });
  }
  return pdf.save();
}

/** A presentation of two slides, listed in the opposite order of their files, the second with notes. */
async function presentation(): Promise<Buffer> {
  const zip = new JSZip();
  const p =
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"';
  const slide = (lines: string[]) =>
    `<?xml version="1.0"?><p:sld ${p}><p:cSld><p:spTree><p:sp><p:txBody>${lines.map((line) => `<a:p><a:r><a:t>${line}</a:t></a:r></a:p>`).join('')}</p:txBody></p:sp></p:spTree></p:cSld></p:sld>`;
  zip.file(
    '[Content_Types].xml',
    '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>',
  );
  zip.file(
    'ppt/presentation.xml',
    `<?xml version="1.0"?><p:presentation ${p}><p:sldIdLst><p:sldId id="256" r:id="rId7"/><p:sldId id="257" r:id="rId3"/></p:sldIdLst></p:presentation>`,
  );
  zip.file(
    'ppt/_rels/presentation.xml.rels',
    '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId3" Type="slide" Target="slides/slide1.xml"/><Relationship Id="rId7" Type="slide" Target="slides/slide2.xml"/></Relationships>',
  );
  zip.file('ppt/slides/slide2.xml', slide(['Quarterly review', 'Revenue &amp; costs']));
  zip.file('ppt/slides/slide1.xml', slide(['Next steps']));
  zip.file(
    'ppt/slides/_rels/slide1.xml.rels',
    '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId2" Type="notesSlide" Target="../notesSlides/notesSlide1.xml"/></Relationships>',
  );
  zip.file('ppt/notesSlides/notesSlide1.xml', slide(['Say thanks', '2']));
  return zip.generateAsync({ type: 'nodebuffer' });
}

async function qr(text: string): Promise<Buffer> {
  const { writeBarcode, prepareZXingModule } = await import('zxing-wasm/writer');
  const { createRequire } = await import('node:module');
  const entry = createRequire(import.meta.url).resolve('zxing-wasm/writer');
  const wasm = join(entry, '..', '..', '..', 'writer', 'zxing_writer.wasm');
  await prepareZXingModule({
    overrides: { wasmBinary: readFileSync(wasm) as unknown as ArrayBuffer },
    fireImmediately: true,
  });
  const written = await writeBarcode(text, { format: 'QRCode', scale: 6 });
  return Buffer.from(await (written.image as Blob).arrayBuffer());
}

async function pdfText(path: string): Promise<string[]> {
  const pdfjs = await import('pdfjs-dist/legacy/build/pdf.mjs');
  const document = await pdfjs.getDocument({
    data: new Uint8Array(readFileSync(path)),
    isEvalSupported: false,
    verbosity: 0,
  }).promise;
  const pages: string[] = [];
  for (let i = 1; i <= document.numPages; i++) {
    const content = await (await document.getPage(i)).getTextContent();
    pages.push(content.items.map((item) => ('str' in item ? item.str : '')).join(' '));
  }
  await document.destroy();
  return pages;
}

describe('documents', () => {
  it('read a workbook and edit one cell, every other cell, formula, style and sheet kept; write a new one', async () => {
    const root = tempWorkspace();
    writeFileSync(join(root, 'prices.xlsx'), await workbook());
    const { result, observations, events, tools } = await run(root, [
      call('xlsx_sheets', { path: 'prices.xlsx' }),
      call('xlsx_read', { path: 'prices.xlsx', sheet: 'Prices' }),
      call('xlsx_set_cell', { path: 'prices.xlsx', sheet: 'Prices', cell: 'c3', value: '3' }),
      call('xlsx_write', {
        path: 'out/summary.xlsx',
        sheets: [
          {
            name: 'Summary',
            rows: [
              ['item', 'total'],
              ['pen', '10'],
              ['all', '=B2+17'],
            ],
          },
        ],
      }),
      call('xlsx_read', { path: 'prices.xlsx', sheet: 'Nope' }),
    ]);
    expect(result.outcome.kind).toBe('finished');
    expect(tools).toEqual(
      expect.arrayContaining([
        'xlsx_sheets',
        'xlsx_read',
        'xlsx_write',
        'xlsx_set_cell',
        'pdf_read',
        'docx_read',
        'pptx_read',
        'barcode_read',
      ]),
    );
    expect(observations[0]).toContain('Prices: 3 rows, 4 columns');
    expect(observations[0]).toContain('Notes: 1 rows');
    expect(observations[1]).toContain('2\tpen\t2.5\t4\t=B2*C2 → 10');
    expect(observations[2]).toContain('set Prices!C3 of prices.xlsx (it held "1"); the rest is kept');
    const book = await loadBook(join(root, 'prices.xlsx'));
    const prices = book.getWorksheet('Prices') as ExcelJS.Worksheet;
    expect(prices.getCell('C3').value).toBe(3);
    expect(prices.getCell('B2').value).toBe(2.5);
    expect(prices.getCell('A3').value).toBe('ink');
    expect((prices.getCell('D2').value as ExcelJS.CellFormulaValue).formula).toBe('B2*C2');
    expect(prices.getCell('A1').font?.bold).toBe(true);
    expect(book.worksheets.map((sheet) => sheet.name)).toEqual(['Prices', 'Notes']);
    expect(book.getWorksheet('Notes')?.getCell('A1').value).toBe('keep me');
    const summary = (await loadBook(join(root, 'out/summary.xlsx'))).getWorksheet('Summary') as ExcelJS.Worksheet;
    expect(summary.getCell('B2').value).toBe(10);
    expect((summary.getCell('B3').value as ExcelJS.CellFormulaValue).formula).toBe('B2+17');
    expect(observations[4]).toContain('there is no sheet "Nope"; the sheets are "Prices", "Notes"');
    // Each write is a file-changed event, with a restore point behind it.
    expect(
      events.filter((event) => event.type === 'file-changed').map((event) => (event as { path: string }).path),
    ).toEqual(['prices.xlsx', 'out/summary.xlsx']);
  });

  it('stamp a watermark on every page of a three-page PDF, fill a form field by name, write and read one', async () => {
    const root = tempWorkspace();
    writeFileSync(join(root, 'report.pdf'), await threePages(false));
    writeFileSync(join(root, 'form.pdf'), await threePages(true));
    const { result, observations } = await run(root, [
      call('pdf_read', { path: 'report.pdf', pages: [2] }),
      call('pdf_watermark', { path: 'report.pdf', text: 'DRAFT', output: 'report-draft.pdf' }),
      call('pdf_fill_form', { path: 'form.pdf', fields: { applicant: 'Ada Lovelace', agreed: 'true' } }),
      call('pdf_fill_form', { path: 'form.pdf', fields: { nobody: 'x' } }),
      call('pdf_write', { path: 'letters.pdf', pages: ['Dear reader,', 'Yours — the harness ✓'] }),
      call('pdf_read', { path: 'letters.pdf' }),
    ]);
    expect(result.outcome.kind).toBe('finished');
    expect(observations[0]).toContain('3 pages');
    expect(observations[0]).toContain('page 2:\nsecond page');
    expect(observations[1]).toContain('3 pages stamped');
    const stamped = await pdfText(join(root, 'report-draft.pdf'));
    expect(stamped).toHaveLength(3);
    for (const [i, page] of stamped.entries()) {
      expect(page).toContain(['first page', 'second page', 'third page'][i]);
      expect(page).toContain('DRAFT');
    }
    // The original is as it was.
    expect((await pdfText(join(root, 'report.pdf'))).join(' ')).not.toContain('DRAFT');
    expect(observations[2]).toContain('filled applicant, agreed');
    const form = (await PDFDocument.load(readFileSync(join(root, 'form.pdf')))).getForm();
    expect(form.getTextField('applicant').getText()).toBe('Ada Lovelace');
    expect(form.getCheckBox('agreed').isChecked()).toBe(true);
    expect(observations[3]).toContain('there is no field "nobody"; the fields are "applicant", "agreed"');
    expect(observations[4]).toContain('2 pages; 1 characters');
    expect(observations[5]).toContain('page 1:\nDear reader,');
    expect(observations[5]).toContain('Yours — the harness ?');
  });

  it('write a Word document and read it back; refuse to edit one in place, saying why', async () => {
    const root = tempWorkspace();
    const { result, observations, events } = await run(root, [
      call('docx_write', { path: 'minutes.docx', paragraphs: ['Minutes', 'All present.', 'Adjourned at five.'] }),
      call('docx_read', { path: 'minutes.docx' }),
      call('docx_write', { path: 'minutes.docx', paragraphs: ['replaced'] }),
    ]);
    expect(result.outcome.kind).toBe('finished');
    expect(observations[0]).toContain('wrote minutes.docx: 3 paragraphs');
    expect(observations[1]).toBe('minutes.docx: Minutes\n\nAll present.\n\nAdjourned at five.');
    expect(observations[2]).toContain('docx_write does not edit one in place');
    expect(observations[2]).toContain('would be dropped');
    expect(events.find((event) => event.type === 'refusal')).toMatchObject({
      tool: 'docx_write',
      rule: 'docx.no-edit-in-place',
    });
    // The first document is as it was written.
    const mammoth = (await import('mammoth')).default;
    expect((await mammoth.extractRawText({ buffer: readFileSync(join(root, 'minutes.docx')) })).value).toContain(
      'Adjourned',
    );
  });

  it('read a presentation slide by slide in its own order, with notes, and decode a QR code', async () => {
    const root = tempWorkspace();
    writeFileSync(join(root, 'deck.pptx'), await presentation());
    writeFileSync(join(root, 'code.png'), await qr('https://example.org/ticket/42'));
    writeFileSync(join(root, 'not-an-image.gif'), 'GIF89a');
    const { observations } = await run(root, [
      call('pptx_read', { path: 'deck.pptx' }),
      call('pptx_read', { path: 'deck.pptx', slide: 2 }),
      call('barcode_read', { path: 'code.png' }),
      call('barcode_read', { path: 'not-an-image.gif' }),
    ]);
    expect(observations[0]).toBe(
      'deck.pptx: 2 slides\n\nslide 1:\nQuarterly review\nRevenue & costs\n\nslide 2:\nNext steps\nnotes:\nSay thanks',
    );
    expect(observations[1]).toBe('deck.pptx: 2 slides\n\nslide 2:\nNext steps\nnotes:\nSay thanks');
    expect(observations[2]).toContain('QRCode: "https://example.org/ticket/42"');
    expect(observations[3]).toContain('barcode_read reads PNG and JPEG images');
  });

  it('decide every path by the policy, and offer only the formats asked for', async () => {
    const root = tempWorkspace({ 'private/keep.txt': 'x' });
    writeFileSync(join(root, 'private', 'salaries.xlsx'), await workbook());
    const { observations, events, tools } = await run(
      root,
      [
        call('xlsx_read', { path: 'private/salaries.xlsx' }),
        call('xlsx_write', { path: 'locked/out.xlsx', sheets: [{ name: 'S', rows: [['1']] }] }),
        call('xlsx_write', { path: '../outside.xlsx', sheets: [{ name: 'S', rows: [['1']] }] }),
      ],
      TaskContract.workspace('work the documents', root).withDocuments({ formats: ['xlsx'] }),
    );
    expect(tools.filter((name) => /^(xlsx|docx|pptx|pdf|barcode)_/.test(name)).sort()).toEqual([
      'xlsx_read',
      'xlsx_set_cell',
      'xlsx_sheets',
      'xlsx_write',
    ]);
    expect(observations[0]).toContain('deny-read private/**');
    expect(observations[1]).toContain('deny-write locked/**');
    expect(observations[2]).toContain('../outside.xlsx is outside the workspace');
    expect(events.filter((event) => event.type === 'refusal').map((event) => (event as { rule: string }).rule)).toEqual(
      expect.arrayContaining(['deny-read private/**', 'deny-write locked/**']),
    );
    expect(events.filter((event) => event.type === 'file-changed')).toHaveLength(0);
  });

  it('stop a document past its deadline, and refuse a run whose packages are not installed, naming them', async () => {
    const root = tempWorkspace();
    writeFileSync(join(root, 'prices.xlsx'), await workbook());
    const { observations } = await run(
      root,
      [call('xlsx_sheets', { path: 'prices.xlsx' })],
      // A thread cannot even start in a millisecond: the deadline stops the work, whatever it is.
      TaskContract.workspace('work the documents', root).withDocuments({ formats: ['xlsx'], timeoutSecs: 0.001 }),
    );
    expect(observations[0]).toContain(
      'prices.xlsx could not be read: it was not done within 1 ms (withDocuments timeoutSecs',
    );
    const { missingPackages } = await import('../dist/runtime/documents/documents.js');
    expect(missingPackages(['xlsx', 'pdf'])).toBeNull();
    expect(missingPackages(['xlsx'], { xlsx: { 'exceljs-not-installed': '4.4.0' } })).toBe(
      'the contract asks for documents in xlsx (withDocuments), whose packages are not installed: exceljs-not-installed@4.4.0. Install them beside io-harness (npm install exceljs-not-installed@4.4.0), or ask for fewer formats.',
    );
  });

  it('hold up against hostile files: a row to the last column, a slide listed a thousand times, a picture too large by its header', async () => {
    const root = tempWorkspace();
    const wide = new ExcelJS.Workbook();
    const sheet = wide.addWorksheet('Wide');
    for (let row = 1; row <= 2000; row++) {
      sheet.getCell(`A${row}`).value = `r${row}`;
      sheet.getCell(`XFD${row}`).value = 'far';
    }
    writeFileSync(join(root, 'wide.xlsx'), Buffer.from(await wide.xlsx.writeBuffer()));
    const deck = await JSZip.loadAsync(await presentation());
    const listed = Array.from({ length: 1000 }, (_, i) => `<p:sldId id="${300 + i}" r:id="rId3"/>`).join('');
    const xml = (await deck.file('ppt/presentation.xml')?.async('string')) ?? '';
    deck.file('ppt/presentation.xml', xml.replace('</p:sldIdLst>', `${listed}</p:sldIdLst>`));
    writeFileSync(join(root, 'repeated.pptx'), await deck.generateAsync({ type: 'nodebuffer' }));
    // A PNG's header saying 20000×20000, and a JPEG that is not one.
    const header = Buffer.alloc(33);
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(header, 0);
    header.writeUInt32BE(13, 8);
    header.write('IHDR', 12, 'latin1');
    header.writeUInt32BE(20000, 16);
    header.writeUInt32BE(20000, 20);
    header.set([8, 6, 0, 0, 0], 24);
    writeFileSync(join(root, 'huge.png'), header);
    writeFileSync(join(root, 'broken.jpg'), Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4]));
    const { result, observations } = await run(root, [
      call('xlsx_read', { path: 'wide.xlsx', max_rows: 3 }),
      call('pptx_read', { path: 'repeated.pptx' }),
      call('barcode_read', { path: 'huge.png' }),
      call('barcode_read', { path: 'broken.jpg' }),
    ]);
    expect(result.outcome.kind).toBe('finished');
    expect(observations[0]).toContain('1\tr1\t[cells past column 200 not shown]');
    expect(observations[0]).toContain('[1997 more rows not shown]');
    expect(observations[1]).toMatch(/^repeated\.pptx: 2 slides\n/);
    expect(observations[2]).toContain('barcode_read cannot look in it');
    expect(observations[2]).toContain('20000×20000 pixels');
    expect(observations[3]).toContain('broken.jpg: barcode_read cannot look in it');
    expect(observations[3]).toContain('it is not a whole JPEG');
  });

  it('refuse to set a cell where the workbook holds what would be lost, and show a shared formula as its cell reads it', async () => {
    const root = tempWorkspace();
    const book = new ExcelJS.Workbook();
    const sheet = book.addWorksheet('Prices');
    sheet.addRow(['item', 'price', 'count']);
    sheet.addRow(['pen', 2.5, 4]);
    sheet.addRow(['ink', 7, 1]);
    sheet.getCell('D2').value = {
      formula: 'B2*C2',
      shareType: 'shared',
      ref: 'D2:D3',
      result: 10,
    } as ExcelJS.CellFormulaValue;
    sheet.getCell('D3').value = { sharedFormula: 'D2', result: 7 } as ExcelJS.CellSharedFormulaValue;
    const plain = Buffer.from(await book.xlsx.writeBuffer());
    writeFileSync(join(root, 'shared.xlsx'), plain);
    const zip = await JSZip.loadAsync(plain);
    zip.file('xl/vbaProject.bin', Buffer.from('macros the library cannot carry'));
    const withMacros = await zip.generateAsync({ type: 'nodebuffer' });
    writeFileSync(join(root, 'macros.xlsx'), withMacros);
    const { observations, events } = await run(root, [
      call('xlsx_read', { path: 'shared.xlsx' }),
      call('xlsx_set_cell', { path: 'macros.xlsx', sheet: 'Prices', cell: 'A2', value: 'quill' }),
      call('xlsx_set_cell', { path: 'shared.xlsx', sheet: 'Prices', cell: 'XFE1', value: '1' }),
    ]);
    expect(observations[0]).toContain('3\tink\t7\t1\t=B3*C3 → 7');
    expect(observations[1]).toContain('would drop what the workbook holds beyond cells and styles (xl/vbaProject.bin)');
    expect(readFileSync(join(root, 'macros.xlsx')).equals(withMacros)).toBe(true);
    expect(observations[2]).toContain('is not a cell of a sheet');
    expect(events.filter((event) => event.type === 'file-changed')).toHaveLength(0);
  });

  it('decide where a change is written: an output the policy denies, and a file it may not write in place', async () => {
    const root = tempWorkspace({ 'locked/.keep': '' });
    writeFileSync(join(root, 'report.pdf'), await threePages(false));
    writeFileSync(join(root, 'locked', 'report.pdf'), await threePages(false));
    const before = readFileSync(join(root, 'locked', 'report.pdf'));
    const { observations, events } = await run(root, [
      call('pdf_watermark', { path: 'report.pdf', text: 'DRAFT', output: 'locked/stamped.pdf' }),
      call('pdf_watermark', { path: 'locked/report.pdf', text: 'DRAFT' }),
      call('pdf_write', { path: 'io.toml', pages: ['not a configuration'] }),
    ]);
    expect(observations[0]).toContain('deny-write locked/**');
    expect(observations[1]).toContain('deny-write locked/**');
    expect(observations[2]).toMatch(/io\.toml/);
    expect(readFileSync(join(root, 'locked', 'report.pdf')).equals(before)).toBe(true);
    expect(events.filter((event) => event.type === 'file-changed')).toHaveLength(0);
  });

  it('check their options, and take [documents] from the user file only', () => {
    const root = tempWorkspace();
    expect(() => TaskContract.workspace('x', root).withDocuments({ formats: ['odt' as never] })).toThrow(/formats/);
    expect(() => TaskContract.workspace('x', root).withDocuments({ timeoutSecs: 0 })).toThrow(/timeoutSecs/);
    const userFile = join(tempWorkspace(), 'io.toml');
    writeFileSync(userFile, '[documents]\nformats = ["pdf"]\ntimeout_secs = 20\n');
    expect(Config.discover(root, { userFile }).contract('x').toJSON().documents).toEqual({
      formats: ['pdf'],
      timeoutSecs: 20,
    });
    writeFileSync(join(root, 'io.toml'), '[documents]\nformats = ["pdf"]\n');
    expect(() => Config.discover(root, { userFile })).toThrow(/documents turns on parsers/);
  });
});
