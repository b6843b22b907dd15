/**
 * Barcodes and QR codes, decoded from a PNG or JPEG with ZXing's WebAssembly build
 * (zxing-wasm's reader). Its module is handed the .wasm file from the installed package,
 * never fetched: a run has no route to a CDN, and nothing is downloaded.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

let prepared: Promise<typeof import('zxing-wasm/reader')> | null = null;

function reader(): Promise<typeof import('zxing-wasm/reader')> {
  prepared ??= (async () => {
    const zxing = await import('zxing-wasm/reader');
    // .../dist/cjs/reader/index.js → .../dist/reader/zxing_reader.wasm
    const entry = createRequire(import.meta.url).resolve('zxing-wasm/reader');
    const wasm = join(dirname(dirname(dirname(entry))), 'reader', 'zxing_reader.wasm');
    await zxing.prepareZXingModule({
      overrides: { wasmBinary: readFileSync(wasm) as unknown as ArrayBuffer },
      fireImmediately: true,
    });
    return zxing;
  })();
  return prepared;
}

export async function barcodeRead(bytes: Uint8Array): Promise<string> {
  const zxing = await reader();
  const found = await zxing.readBarcodes(bytes, { tryHarder: true, maxNumberOfSymbols: 32 });
  const broken = found.find((barcode) => !barcode.isValid && !barcode.text && barcode.error);
  if (broken) throw new Error(`the image could not be decoded (${broken.error})`);
  const valid = found.filter((barcode) => barcode.isValid);
  if (valid.length === 0) return 'no barcode or QR code was found in the image.';
  return [
    `${valid.length} found:`,
    ...valid.map((barcode) => `${barcode.format}: ${JSON.stringify(barcode.text)}`),
  ].join('\n');
}
