/**
 * Images at the door, by type: what `read_file` and a tool's result do with each. PNG,
 * JPEG, GIF and WebP are attached byte for byte; BMP, ICO, TGA, PNM and TIFF are converted
 * to PNG (the pixels checked after a round trip; TIFF's LZW, PackBits and Deflate made by
 * libtiff's own tiffcp, kept as fixtures); SVG, HEIC and AVIF are refused by name with their fix; a 60-megapixel
 * PNG is refused from its header, never decoded; and the request for an image read from the
 * workspace carries it in each vendor's shape.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { crc32, inflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { Policy, runWith, TaskContract } from '../dist/index.js';
import { checkImage } from '../dist/runtime/images.js';
import { type Answer, openStore, serve, tempWorkspace, turns } from './support/workspace.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/images', import.meta.url));
const W = 6;
const H = 4;

/** The test picture: a colour for each pixel, told apart by place (alpha 255 unless `alpha`). */
function colourAt(x: number, y: number, alpha = false): [number, number, number, number] {
  return [(x * 40) & 0xff, (y * 60) & 0xff, (x * 7 + y * 13) & 0xff, alpha ? (x + y) * 20 : 255];
}

/** The pixels of a PNG this project wrote (8-bit RGB or RGBA, unfiltered rows), as RGBA. */
function readPng(png: Buffer): { width: number; height: number; pixel(x: number, y: number): number[] } {
  expect(png.subarray(1, 4).toString()).toBe('PNG');
  const width = png.readUInt32BE(16);
  const height = png.readUInt32BE(20);
  const channels = png[25] === 6 ? 4 : 3;
  const idat: Buffer[] = [];
  for (let at = 8; at < png.length; ) {
    const length = png.readUInt32BE(at);
    const type = png.toString('latin1', at + 4, at + 8);
    if (type === 'IDAT') idat.push(png.subarray(at + 8, at + 8 + length));
    at += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels + 1;
  return {
    width,
    height,
    pixel: (x, y) => {
      const at = y * stride + 1 + x * channels;
      const p = [...raw.subarray(at, at + channels)];
      return channels === 4 ? p : [...p, 255];
    },
  };
}

/** What checkImage attached, as PNG pixels, and the format it came from. */
function converted(bytes: Buffer, hint = 'image') {
  const checked = checkImage(hint, bytes.toString('base64'));
  if (!('image' in checked)) throw new Error(`refused: ${checked.refused}`);
  expect(checked.image.mimeType).toBe('image/png');
  return { from: checked.from, png: readPng(Buffer.from(checked.image.data, 'base64')) };
}

function expectPicture(png: ReturnType<typeof readPng>, alpha = false): void {
  expect([png.width, png.height]).toEqual([W, H]);
  for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) expect(png.pixel(x, y)).toEqual(colourAt(x, y, alpha));
}

function bmp(bits: 24 | 32): Buffer {
  const stride = Math.ceil((W * bits) / 32) * 4;
  const header = Buffer.alloc(54);
  header.write('BM', 0, 'latin1');
  header.writeUInt32LE(54 + stride * H, 2);
  header.writeUInt32LE(54, 10);
  header.writeUInt32LE(40, 14);
  header.writeInt32LE(W, 18);
  header.writeInt32LE(H, 22);
  header.writeUInt16LE(1, 26);
  header.writeUInt16LE(bits, 28);
  const pixels = Buffer.alloc(stride * H);
  for (let row = 0; row < H; row++)
    for (let x = 0; x < W; x++) {
      const [r, g, b] = colourAt(x, H - 1 - row);
      pixels.set([b, g, r, ...(bits === 32 ? [0] : [])], row * stride + (x * bits) / 8);
    }
  return Buffer.concat([header, pixels]);
}

function tga(rle: boolean): Buffer {
  const header = Buffer.alloc(18);
  header[2] = rle ? 10 : 2;
  header.writeUInt16LE(W, 12);
  header.writeUInt16LE(H, 14);
  header[16] = 32;
  header[17] = 0x28; // top-down, 8 alpha bits
  const body: number[] = [];
  for (let y = 0; y < H; y++)
    for (let x = 0; x < W; x++) {
      const [r, g, b, a] = colourAt(x, y, true);
      // RLE: each pixel a raw packet of one, the last row one run of its first pixel's colour.
      if (rle) body.push(0);
      body.push(b, g, r, a);
    }
  return Buffer.concat([header, Buffer.from(body)]);
}

function ppm(): Buffer {
  const body: number[] = [];
  for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) body.push(...colourAt(x, y).slice(0, 3));
  return Buffer.concat([Buffer.from(`P6\n# a comment\n${W} ${H}\n255\n`), Buffer.from(body)]);
}

/** An uncompressed RGB TIFF, little-endian, one strip. */
function tiff(): Buffer {
  const pixels: number[] = [];
  for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) pixels.push(...colourAt(x, y).slice(0, 3));
  const entries: [number, number, number, number][] = [
    [256, 3, 1, W],
    [257, 3, 1, H],
    [258, 3, 3, 0], // offset patched below
    [259, 3, 1, 1],
    [262, 3, 1, 2],
    [273, 4, 1, 0], // offset patched below
    [277, 3, 1, 3],
    [278, 3, 1, H],
    [279, 4, 1, pixels.length],
  ];
  const ifd = 8;
  const bitsAt = ifd + 2 + entries.length * 12 + 4;
  const dataAt = bitsAt + 6;
  const out = Buffer.alloc(dataAt + pixels.length);
  out.write('II*\0', 0, 'latin1');
  out.writeUInt32LE(ifd, 4);
  out.writeUInt16LE(entries.length, ifd);
  entries.forEach(([tag, type, count, value], i) => {
    const at = ifd + 2 + i * 12;
    out.writeUInt16LE(tag, at);
    out.writeUInt16LE(type, at + 2);
    out.writeUInt32LE(count, at + 4);
    const v = tag === 258 ? bitsAt : tag === 273 ? dataAt : value;
    if (type === 3 && count === 1) out.writeUInt16LE(v, at + 8);
    else out.writeUInt32LE(v, at + 8);
  });
  out.set([8, 0, 8, 0, 8, 0], bitsAt);
  out.set(pixels, dataAt);
  return out;
}

/** A PNG of `width`×`height` by its header alone: enough to be told its size, nothing to decode. */
function pngHeaderOnly(width: number, height: number): Buffer {
  const ihdr = Buffer.alloc(25);
  ihdr.writeUInt32BE(13, 0);
  ihdr.write('IHDR', 4, 'latin1');
  ihdr.writeUInt32BE(width, 8);
  ihdr.writeUInt32BE(height, 12);
  ihdr.set([8, 2, 0, 0, 0], 16);
  ihdr.writeUInt32BE(crc32(ihdr.subarray(4, 21)), 21);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), ihdr]);
}

describe('images at the door', () => {
  it('attaches PNG, JPEG, GIF and WebP byte for byte', () => {
    const png = pngHeaderOnly(W, H);
    const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xc0, 0, 11, 8, 0, H, 0, W, 1, 1, 0x11, 0, 0xff, 0xd9]);
    const gif = Buffer.concat([Buffer.from('GIF89a'), Buffer.from([W, 0, H, 0, 0, 0, 0, 0x3b])]);
    const webp = Buffer.alloc(30);
    webp.write('RIFF', 0, 'latin1');
    webp.write('WEBPVP8X', 8, 'latin1');
    webp.writeUIntLE(W - 1, 24, 3);
    webp.writeUIntLE(H - 1, 27, 3);
    for (const [bytes, type] of [
      [png, 'image/png'],
      [jpeg, 'image/jpeg'],
      [gif, 'image/gif'],
      [webp, 'image/webp'],
    ] as const) {
      const checked = checkImage('image', bytes.toString('base64'));
      expect(checked).toEqual({ image: { mimeType: type, data: bytes.toString('base64') } });
    }
  });

  it('converts BMP, ICO, TGA, PNM and TIFF to PNG, pixel for pixel', () => {
    expect(converted(bmp(24)).from).toBe('BMP');
    expectPicture(converted(bmp(24)).png);
    expectPicture(converted(bmp(32)).png);
    // An icon holding that bitmap (its height doubled for the AND mask, all bits clear: opaque).
    const dib = bmp(32).subarray(14);
    dib.writeInt32LE(H * 2, 8);
    const mask = Buffer.alloc(4 * H);
    const entry = Buffer.alloc(16);
    entry.set([W, H, 0, 0, 1, 0, 32, 0]);
    entry.writeUInt32LE(dib.length + mask.length, 8);
    entry.writeUInt32LE(22, 12);
    const ico = Buffer.concat([Buffer.from([0, 0, 1, 0, 1, 0]), entry, dib, mask]);
    const icon = converted(ico);
    expect(icon.from).toBe('ICO');
    expectPicture(icon.png);
    // TGA has no signature: told by its name.
    expectPicture(converted(tga(false), 'sprite.tga').png, true);
    expectPicture(converted(tga(true), 'image/x-tga').png, true);
    expect(converted(ppm()).from).toBe('PNM');
    expectPicture(converted(ppm()).png);
    expectPicture(converted(tiff()).png);
    // A 16-bit TGA: five bits a channel, white as white.
    const tga16 = Buffer.alloc(18 + 2);
    tga16[2] = 2;
    tga16.writeUInt16LE(1, 12);
    tga16.writeUInt16LE(1, 14);
    tga16[16] = 16;
    tga16.writeUInt16LE(0x7fff, 18);
    expect(converted(tga16, 'x.tga').png.pixel(0, 0)).toEqual([255, 255, 255, 255]);
  });

  it('reads TIFFs libtiff compressed with LZW (with and without its predictor, either byte order), PackBits and Deflate', () => {
    // Made by libtiff's own tiffcp from this test's uncompressed TIFF (test/fixtures/images/README.md).
    for (const name of ['lzw', 'lzw-2', 'big-endian-lzw', 'packbits', 'zip']) {
      const { from, png } = converted(readFileSync(join(FIXTURES, `${name}.tif`)));
      expect(from).toBe('TIFF');
      expectPicture(png);
    }
  });

  it('refuses SVG, HEIC and AVIF by name with the conversion that fixes each, and what it cannot read saying why', () => {
    const svg = Buffer.from('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>');
    const iso = (brand: string) =>
      Buffer.concat([Buffer.from([0, 0, 0, 24]), Buffer.from(`ftyp${brand}`), Buffer.alloc(12)]);
    const refused = (bytes: Buffer) => {
      const checked = checkImage('image', bytes.toString('base64'));
      return 'refused' in checked ? checked.refused : '';
    };
    expect(refused(svg)).toMatch(/SVG.*render it to PNG first \(rsvg-convert/);
    expect(refused(iso('heic'))).toMatch(/HEIC.*heif-convert/);
    expect(refused(iso('avif'))).toMatch(/AVIF.*avifdec/);
    // A compressed bitmap, a cut-short one, and bytes of no image type.
    const rle = bmp(24);
    rle.writeUInt32LE(1, 30);
    expect(refused(rle)).toMatch(/BMP.*compressed bitmap.*convert it to PNG first/);
    expect(refused(bmp(24).subarray(0, 80))).toMatch(/BMP.*not a whole BMP/);
    expect(refused(Buffer.from('just some text'))).toMatch(/not PNG, JPEG, GIF or WebP/);
    // An SVG after comments and a doctype is told; a prolog of a thousand comments and no <svg is not
    // one, told in one pass (a pattern with a repeated group would take exponential time here).
    expect(refused(Buffer.from('<!-- a -->\n<!DOCTYPE svg>\n<svg width="1"/>'))).toMatch(/^\[image SVG/);
    expect(refused(Buffer.from(`${'<!---->'.repeat(580)}x`))).toMatch(/not PNG, JPEG, GIF or WebP/);
    // A TIFF whose strips claim more than the file holds, and one cut short: refused, never blank rows.
    const claims = tiff();
    claims.writeUInt32LE(10 * 1024 * 1024, 8 + 2 + 8 * 12 + 8);
    expect(refused(claims)).toMatch(/TIFF.*strips claim more than the file holds/);
    expect(refused(tiff().subarray(0, tiff().length - 10))).toMatch(/TIFF.*not a whole TIFF/);
    // Converting holds every pixel: a 25-megapixel bitmap is refused from its header, under the 50 a PNG may have.
    const wide = bmp(24).subarray(0, 54);
    wide.writeInt32LE(5000, 18);
    wide.writeInt32LE(5000, 22);
    expect(refused(wide)).toMatch(
      /5000×5000 pixels, not attached: an image converted to PNG may have at most 20 megapixels/,
    );
  });

  it('refuses a 60-megapixel PNG, and a BMP that says it is one, from the header alone', () => {
    // Nothing after the header: were it decoded, it would be refused as cut short instead.
    const checked = checkImage('image', pngHeaderOnly(7800, 7800).toString('base64'));
    expect(checked).toEqual({ refused: expect.stringMatching(/7800×7800 pixels, not attached: .*50 megapixels/) });
    const huge = bmp(24).subarray(0, 54);
    huge.writeInt32LE(7800, 18);
    huge.writeInt32LE(7800, 22);
    const big = checkImage('image', huge.toString('base64'));
    expect(big).toEqual({ refused: expect.stringMatching(/BMP.*7800×7800 pixels.*50 megapixels/) });
  });

  it('hands an image read_file reads to the model in each vendor’s shape, and says why one is refused', async () => {
    const root = tempWorkspace({ 'notes.txt': 'text\n' });
    writeFileSync(join(root, 'shot.bmp'), bmp(24));
    writeFileSync(join(root, 'logo.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>\n');
    // Text that starts like an image is text.
    writeFileSync(join(root, 'gif.txt'), 'GIF89a is a format\n');
    writeFileSync(
      join(root, 'photo.heic'),
      Buffer.concat([Buffer.from([0, 0, 0, 24]), Buffer.from('ftypheic'), Buffer.alloc(12)]),
    );
    const answers: Answer[] = [
      { toolCalls: [{ name: 'read_file', args: { path: 'shot.bmp' } }] },
      { toolCalls: [{ name: 'read_file', args: { path: 'logo.svg' } }] },
      { toolCalls: [{ name: 'read_file', args: { path: 'photo.heic' } }] },
      { toolCalls: [{ name: 'read_file', args: { path: 'gif.txt' } }] },
      { text: 'done' },
    ];
    for (const kind of ['openai', 'anthropic'] as const) {
      const store = await openStore();
      const { server, provider } = await serve(turns(answers));
      const spec = kind === 'openai' ? provider : { ...provider, kind: 'anthropic' as const, baseUrl: server.url };
      const result = await runWith(TaskContract.workspace('look', root), spec, store, Policy.default());
      expect(result.outcome.kind).toBe('finished');
      const observations = store.steps(result.runId).flatMap((step) => step.observations);
      expect(observations[0]?.content).toMatch(/shot\.bmp: \[image image\/png \(from BMP\), .* attached\]/);
      expect(observations[0]?.images?.[0]?.mimeType).toBe('image/png');
      // An SVG is text, its source: read as text.
      expect(observations[1]?.content).toContain('<svg');
      expect(observations[2]?.content).toMatch(/HEIC.*heif-convert/);
      expect(observations[3]?.content).toBe('GIF89a is a format\n');
      const data = observations[0]?.images?.[0]?.data as string;
      const request = JSON.stringify(server.calls[1]?.body);
      if (kind === 'openai') expect(request).toContain(`"url":"data:image/png;base64,${data}"`);
      else expect(request).toContain(`"source":{"type":"base64","media_type":"image/png","data":"${data}"}`);
    }
  });
});
