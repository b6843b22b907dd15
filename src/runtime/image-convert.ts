/**
 * Images of the types no model takes but whose pixels are plain to read — BMP, ICO, TGA,
 * PNM (PBM, PGM, PPM) and baseline TIFF — read into RGBA and written again as PNG, so a
 * model is shown them (see ./images.ts, which decides when). Each reader takes the common
 * forms of its format and refuses the rest by name (a compressed BMP, a tiled TIFF, ...)
 * with what to convert it to; the size each declares is read first and held to the
 * caller's limits before a pixel is decoded. No dependency: each format here is a header
 * and rows of samples (TIFF's LZW and PackBits are a few lines; its Deflate is node's zlib).
 */
import { crc32, deflateSync, inflateSync } from 'node:zlib';

/** Pixels, four bytes each (red, green, blue, alpha), row after row from the top. */
export interface Rgba {
  width: number;
  height: number;
  data: Uint8Array;
}

/** The formats read here. */
export type ConvertibleFormat = 'BMP' | 'ICO' | 'TGA' | 'PNM' | 'TIFF';

/**
 * The most pixels an image converted here may have: its pixels are held four bytes each
 * while it is written again (80 MB at this cap), and a vendor scales a larger one down anyway.
 */
export const MAX_CONVERTED_PIXELS = 20_000_000;

/** Why an image was not read: said to the model, with what would make it readable. */
export class Unreadable extends Error {}

function fail(why: string): never {
  throw new Unreadable(why);
}

/** Which of the formats read here `bytes` are; TGA, which has no signature, only where `hint` names it. */
export function convertibleFormat(bytes: Buffer, hint: string): ConvertibleFormat | null {
  if (bytes.length >= 2 && bytes[0] === 0x42 && bytes[1] === 0x4d) return 'BMP';
  if (bytes.length >= 6 && bytes.readUInt32BE(0) === 0x00000100 && bytes.readUInt16LE(4) > 0) return 'ICO';
  if (bytes.length >= 3 && bytes[0] === 0x50 && bytes[1] !== undefined && bytes[1] >= 0x31 && bytes[1] <= 0x36) {
    const next = bytes[2] as number;
    if (next === 0x20 || next === 0x0a || next === 0x0d || next === 0x09 || next === 0x23) return 'PNM';
  }
  if (bytes.length >= 8 && (bytes.toString('latin1', 0, 4) === 'II*\0' || bytes.toString('latin1', 0, 4) === 'MM\0*'))
    return 'TIFF';
  const footer = bytes.length >= 26 ? bytes.toString('latin1', bytes.length - 18, bytes.length - 2) : '';
  if (footer === 'TRUEVISION-XFILE' || /(^|[./-])(x-)?(tga|targa)$/i.test(hint)) return 'TGA';
  return null;
}

/**
 * The width and height `bytes` of `format` declare, read from the header alone (an ICO's
 * largest entry's); throws {@link Unreadable} where the header is not whole.
 */
export function declaredSize(format: ConvertibleFormat, bytes: Buffer): { width: number; height: number } {
  switch (format) {
    case 'BMP':
      return bmpHeader(bytes, 14).size;
    case 'ICO': {
      // A bitmap's own header, not the directory's byte a side, says what would be decoded.
      const entry = icoEntry(bytes);
      if (entry.png) return { width: entry.width, height: entry.height };
      const size = bmpHeader(bytes, entry.offset).size;
      return { width: size.width, height: Math.floor(size.height / 2) };
    }
    case 'TGA':
      if (bytes.length < 18) fail('it is not a whole TGA');
      return { width: bytes.readUInt16LE(12), height: bytes.readUInt16LE(14) };
    case 'PNM': {
      const header = pnmHeader(bytes);
      return { width: header.width, height: header.height };
    }
    case 'TIFF': {
      const ifd = tiffDirectory(bytes);
      return { width: ifd.width, height: ifd.height };
    }
  }
}

/** The pixels of `bytes` of `format` (whose declared size the caller has held to its limits). */
export function decode(format: ConvertibleFormat, bytes: Buffer): Rgba {
  switch (format) {
    case 'BMP':
      return decodeDib(bytes, 14, bytes.readUInt32LE(10), false);
    case 'ICO':
      return decodeIco(bytes);
    case 'TGA':
      return decodeTga(bytes);
    case 'PNM':
      return decodePnm(bytes);
    case 'TIFF':
      return decodeTiff(bytes);
  }
}

/** `image` as a PNG: RGB where every pixel is opaque, else RGBA; 8 bits a sample, rows unfiltered. */
export function encodePng(image: Rgba): Buffer {
  const { width, height, data } = image;
  let opaque = true;
  for (let at = 3; at < data.length; at += 4) if (data[at] !== 255) opaque = false;
  const channels = opaque ? 3 : 4;
  const stride = width * channels + 1;
  const raw = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    let out = y * stride + 1;
    for (let x = 0, at = y * width * 4; x < width; x++, at += 4) {
      raw[out++] = data[at] as number;
      raw[out++] = data[at + 1] as number;
      raw[out++] = data[at + 2] as number;
      if (!opaque) raw[out++] = data[at + 3] as number;
    }
  }
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, opaque ? 2 : 6, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

function chunk(type: string, body: Buffer): Buffer {
  const out = Buffer.alloc(12 + body.length);
  out.writeUInt32BE(body.length, 0);
  out.write(type, 4, 'latin1');
  body.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + body.length)), 8 + body.length);
  return out;
}

/** Writes one pixel (no array made: these loops run once a pixel). */
function put(data: Uint8Array, at: number, r: number, g: number, b: number, a: number): void {
  data[at] = r;
  data[at + 1] = g;
  data[at + 2] = b;
  data[at + 3] = a;
}

function rgba(width: number, height: number): Rgba {
  return { width, height, data: new Uint8Array(width * height * 4) };
}

function need(bytes: Buffer, end: number, what: string): void {
  if (end > bytes.length) fail(`it is not a whole ${what}: it ends before its pixels do`);
}

// --- BMP (and the DIB inside an ICO) ---------------------------------------------------

function bmpHeader(bytes: Buffer, at: number) {
  need(bytes, at + 16, 'BMP');
  const headerSize = bytes.readUInt32LE(at);
  if (headerSize < 40) fail('it is an OS/2 bitmap, which is not read here: convert it to PNG first');
  need(bytes, at + 40, 'BMP');
  const width = bytes.readInt32LE(at + 4);
  const height = bytes.readInt32LE(at + 8);
  const bits = bytes.readUInt16LE(at + 14);
  const compression = bytes.readUInt32LE(at + 16);
  const colours = bytes.readUInt32LE(at + 32);
  if (width <= 0 || height === 0) fail(`it declares ${width}×${height} pixels`);
  return { headerSize, bits, compression, colours, topDown: height < 0, size: { width, height: Math.abs(height) } };
}

/** A DIB at `at` (its info header), pixels at `pixels`; `icon`: its height counts the AND mask's rows too. */
function decodeDib(bytes: Buffer, at: number, pixels: number, icon: boolean): Rgba {
  const header = bmpHeader(bytes, at);
  const { bits, compression } = header;
  const width = header.size.width;
  const height = icon ? Math.floor(header.size.height / 2) : header.size.height;
  if (height === 0) fail('it is an icon of no rows');
  if (compression !== 0 && !(compression === 3 && (bits === 16 || bits === 32)))
    fail(`it is a compressed bitmap (compression ${compression}), which is not read here: convert it to PNG first`);
  if (![1, 4, 8, 16, 24, 32].includes(bits)) fail(`it has ${bits} bits a pixel, which is not read here`);
  const palette: number[][] = [];
  if (bits <= 8) {
    const count = header.colours || 1 << bits;
    const from = at + header.headerSize + (compression === 3 ? 12 : 0);
    need(bytes, from + count * 4, 'BMP');
    for (let i = 0; i < count; i++) {
      const p = from + i * 4;
      palette.push([bytes[p + 2] as number, bytes[p + 1] as number, bytes[p] as number]);
    }
  }
  // Masks for 16 and 32 bits: given (BI_BITFIELDS), else 5-5-5 and 8-8-8.
  let masks = bits === 16 ? [0x7c00, 0x03e0, 0x001f, 0] : [0xff0000, 0xff00, 0xff, 0];
  if (compression === 3) {
    need(bytes, at + 52, 'BMP');
    masks = [
      bytes.readUInt32LE(at + 40),
      bytes.readUInt32LE(at + 44),
      bytes.readUInt32LE(at + 48),
      header.headerSize >= 56 ? bytes.readUInt32LE(at + 52) : 0,
    ];
  } else if (bits === 32 && (icon || header.headerSize >= 56)) masks[3] = 0xff000000;
  const stride = Math.floor((bits * width + 31) / 32) * 4;
  need(bytes, pixels + stride * height, 'BMP');
  const image = rgba(width, height);
  let anyAlpha = false;
  for (let row = 0; row < height; row++) {
    const y = header.topDown ? row : height - 1 - row;
    const line = pixels + row * stride;
    for (let x = 0; x < width; x++) {
      const out = (y * width + x) * 4;
      let r: number;
      let g: number;
      let b: number;
      let a = 255;
      if (bits <= 8) {
        const bit = x * bits;
        const value = ((bytes[line + (bit >> 3)] as number) >> (8 - bits - (bit & 7))) & ((1 << bits) - 1);
        [r, g, b] = (palette[value] ?? [0, 0, 0]) as [number, number, number];
      } else if (bits === 24) {
        const p = line + x * 3;
        [b, g, r] = [bytes[p] as number, bytes[p + 1] as number, bytes[p + 2] as number];
      } else {
        const value = bits === 16 ? bytes.readUInt16LE(line + x * 2) : bytes.readUInt32LE(line + x * 4);
        [r, g, b] = [field(value, masks[0]), field(value, masks[1]), field(value, masks[2])];
        if (masks[3]) {
          a = field(value, masks[3]);
          if (a !== 0) anyAlpha = true;
        }
      }
      put(image.data, out, r, g, b, a);
    }
  }
  // An alpha channel of zeros everywhere is one nobody wrote: opaque.
  if (masks[3] && !anyAlpha) for (let at = 3; at < image.data.length; at += 4) image.data[at] = 255;
  if (icon && bits !== 32) iconMask(bytes, pixels + stride * height, image);
  return image;
}

/** A masked field of a pixel, scaled to 8 bits. */
function field(value: number, mask: number | undefined): number {
  if (!mask) return 0;
  let shift = 0;
  while (((mask >>> shift) & 1) === 0 && shift < 32) shift++;
  const max = mask >>> shift;
  return Math.round((((value & mask) >>> shift) * 255) / max);
}

/** An icon's AND mask (one bit a pixel, rows bottom-up): a set bit is a transparent pixel. */
function iconMask(bytes: Buffer, at: number, image: Rgba): void {
  const stride = Math.floor((image.width + 31) / 32) * 4;
  if (at + stride * image.height > bytes.length) return;
  for (let row = 0; row < image.height; row++) {
    const y = image.height - 1 - row;
    for (let x = 0; x < image.width; x++)
      if (((bytes[at + row * stride + (x >> 3)] as number) >> (7 - (x & 7))) & 1)
        image.data[(y * image.width + x) * 4 + 3] = 0;
  }
}

// --- ICO ----------------------------------------------------------------------------------

/** The largest image of an icon: where it is, and its size (a PNG's from its own header). */
function icoEntry(bytes: Buffer): { width: number; height: number; offset: number; length: number; png: boolean } {
  const count = bytes.readUInt16LE(4);
  need(bytes, 6 + count * 16, 'ICO');
  let best: { width: number; height: number; offset: number; length: number; png: boolean } | null = null;
  for (let i = 0; i < count; i++) {
    const at = 6 + i * 16;
    const offset = bytes.readUInt32LE(at + 12);
    const length = bytes.readUInt32LE(at + 8);
    need(bytes, offset + Math.min(length, 24), 'ICO');
    const png = bytes.readUInt32BE(offset) === 0x89504e47;
    const width = png ? bytes.readUInt32BE(offset + 16) : (bytes[at] as number) || 256;
    const height = png ? bytes.readUInt32BE(offset + 20) : (bytes[at + 1] as number) || 256;
    if (!best || width * height > best.width * best.height) best = { width, height, offset, length, png };
  }
  return best ?? fail('it is an icon with no image in it');
}

function decodeIco(bytes: Buffer): Rgba {
  const entry = icoEntry(bytes);
  if (entry.png) fail('its largest image is a PNG: it is handed on as one, not read here');
  const info = entry.offset;
  const header = bmpHeader(bytes, info);
  const palette = header.bits <= 8 ? (header.colours || 1 << header.bits) * 4 : 0;
  // Masks given (BI_BITFIELDS) after a 40-byte header come before the pixels.
  const masks = header.compression === 3 && header.headerSize === 40 ? 12 : 0;
  return decodeDib(bytes, info, info + header.headerSize + masks + palette, true);
}

/** An icon's largest image, where it is a PNG: its bytes, to be handed on as they are. */
export function icoPng(bytes: Buffer): Buffer | null {
  const entry = icoEntry(bytes);
  return entry.png ? bytes.subarray(entry.offset, entry.offset + entry.length) : null;
}

// --- TGA ----------------------------------------------------------------------------------

function decodeTga(bytes: Buffer): Rgba {
  need(bytes, 18, 'TGA');
  const idLength = bytes[0] as number;
  const mapType = bytes[1] as number;
  const type = bytes[2] as number;
  const mapStart = bytes.readUInt16LE(3);
  const mapLength = bytes.readUInt16LE(5);
  const mapBits = bytes[7] as number;
  const width = bytes.readUInt16LE(12);
  const height = bytes.readUInt16LE(14);
  const bits = bytes[16] as number;
  const descriptor = bytes[17] as number;
  const kind = type & 7;
  if (![1, 2, 3].includes(kind) || (type & ~8) !== kind)
    fail(`it is a TGA of type ${type}, which is not read here: convert it to PNG first`);
  if (kind === 1 ? bits !== 8 : kind === 3 ? bits !== 8 : ![15, 16, 24, 32].includes(bits))
    fail(`it is a TGA of ${bits} bits a pixel, which is not read here: convert it to PNG first`);
  if (kind === 1 && (mapType !== 1 || ![15, 16, 24, 32].includes(mapBits)))
    fail('it is a colour-mapped TGA without a colour map of 15, 16, 24 or 32 bits: convert it to PNG first');
  let at = 18 + idLength;
  const palette: number[][] = [];
  if (mapType === 1) {
    const size = Math.ceil(mapBits / 8);
    need(bytes, at + mapLength * size, 'TGA');
    for (let i = 0; i < mapLength; i++) palette[mapStart + i] = tgaColour(bytes, at + i * size, mapBits);
    at += mapLength * size;
  }
  const size = Math.ceil(bits / 8);
  const count = width * height;
  const samples = Buffer.alloc(count * size);
  if (type & 8) {
    // Run-length packets: a header byte, then one pixel repeated or raw pixels.
    let filled = 0;
    while (filled < samples.length) {
      need(bytes, at + 1, 'TGA');
      const packet = bytes[at++] as number;
      const n = ((packet & 0x7f) + 1) * size;
      if (packet & 0x80) {
        need(bytes, at + size, 'TGA');
        for (let k = 0; k < n && filled < samples.length; k += size, filled += size)
          for (let b = 0; b < size; b++) samples[filled + b] = bytes[at + b] as number;
        at += size;
      } else {
        need(bytes, at + n, 'TGA');
        // Byte by byte: most packets are a pixel or a few, where a copy call costs more than it moves.
        const end = Math.min(n, samples.length - filled);
        for (let k = 0; k < end; k++) samples[filled + k] = bytes[at + k] as number;
        filled += n;
        at += n;
      }
    }
  } else {
    need(bytes, at + samples.length, 'TGA');
    bytes.copy(samples, 0, at, at + samples.length);
  }
  const image = rgba(width, height);
  const topDown = (descriptor & 0x20) !== 0;
  const rightToLeft = (descriptor & 0x10) !== 0;
  for (let row = 0, i = 0; row < height; row++) {
    const y = topDown ? row : height - 1 - row;
    for (let column = 0; column < width; column++, i++) {
      const out = (y * width + (rightToLeft ? width - 1 - column : column)) * 4;
      const p = i * size;
      if (kind === 2 && bits !== 16)
        put(
          image.data,
          out,
          samples[p + 2] as number,
          samples[p + 1] as number,
          samples[p] as number,
          bits === 32 ? (samples[p + 3] as number) : 255,
        );
      else {
        const v = kind === 2 ? 0 : (samples[i] as number);
        const [r = 0, g = 0, b = 0, a = 255] =
          kind === 1 ? (palette[v] ?? []) : kind === 3 ? [v, v, v] : tgaColour(samples, p, bits);
        put(image.data, out, r, g, b, a);
      }
    }
  }
  // No alpha bits declared, or an alpha channel of zeros everywhere: nobody wrote one, so opaque.
  if (bits === 32 || (kind === 1 && mapBits === 32)) {
    let written = (descriptor & 0x0f) !== 0;
    if (written) {
      written = false;
      for (let at = 3; at < image.data.length && !written; at += 4) if (image.data[at] !== 0) written = true;
    }
    if (!written) for (let at = 3; at < image.data.length; at += 4) image.data[at] = 255;
  }
  return image;
}

function tgaColour(bytes: Buffer, at: number, bits: number): number[] {
  if (bits === 16 || bits === 15) {
    const v = bytes.readUInt16LE(at);
    const five = (c: number) => (c << 3) | (c >> 2);
    return [five((v >> 10) & 31), five((v >> 5) & 31), five(v & 31), 255];
  }
  return [
    bytes[at + 2] as number,
    bytes[at + 1] as number,
    bytes[at] as number,
    bits === 32 ? (bytes[at + 3] as number) : 255,
  ];
}

// --- PNM ----------------------------------------------------------------------------------

function pnmHeader(bytes: Buffer): { kind: number; width: number; height: number; max: number; at: number } {
  const kind = (bytes[1] as number) - 0x30;
  const fields: number[] = [];
  let at = 2;
  const wanted = kind === 1 || kind === 4 ? 2 : 3;
  while (fields.length < wanted) {
    while (at < bytes.length && /\s/.test(String.fromCharCode(bytes[at] as number))) at++;
    if (bytes[at] === 0x23) {
      while (at < bytes.length && bytes[at] !== 0x0a) at++;
      continue;
    }
    let text = '';
    while (at < bytes.length && (bytes[at] as number) >= 0x30 && (bytes[at] as number) <= 0x39 && text.length < 10)
      text += String.fromCharCode(bytes[at++] as number);
    if (text === '') fail('it is not a whole PNM: its header is cut short');
    fields.push(Number(text));
  }
  const [width = 0, height = 0, max = 1] = fields;
  if (width === 0 || height === 0 || max === 0 || max > 65535)
    fail(`it declares ${width}×${height} pixels of at most ${max}`);
  // One whitespace byte ends the header of a binary PNM.
  return { kind, width, height, max, at: at + 1 };
}

function decodePnm(bytes: Buffer): Rgba {
  const { kind, width, height, max, at } = pnmHeader(bytes);
  const image = rgba(width, height);
  const count = width * height;
  const channels = kind === 3 || kind === 6 ? 3 : 1;
  const scale = (v: number) => Math.round((Math.min(v, max) * 255) / max);
  if (kind <= 3) {
    // Plain: samples as decimal numbers (bits as 0 and 1, touching or not).
    const text = bytes.toString('latin1', at - 1).replace(/#[^\n]*/g, ' ');
    const values = kind === 1 ? text.replace(/[^01]/g, '').split('').map(Number) : text.trim().split(/\s+/).map(Number);
    if (kind !== 1 && values.some((v) => !Number.isInteger(v) || v < 0))
      fail('it is a plain PNM with a sample that is not a whole number from 0');
    if (values.length < count * channels) fail('it is not a whole PNM: it ends before its pixels do');
    for (let i = 0; i < count; i++) {
      const v = values.slice(i * channels, i * channels + channels) as number[];
      const c = kind === 1 ? ((v[0] as number) ? 0 : 255) : -1;
      image.data.set(
        kind === 1
          ? [c, c, c, 255]
          : channels === 1
            ? [scale(v[0] as number), scale(v[0] as number), scale(v[0] as number), 255]
            : [scale(v[0] as number), scale(v[1] as number), scale(v[2] as number), 255],
        i * 4,
      );
    }
    return image;
  }
  if (kind === 4) {
    const stride = Math.ceil(width / 8);
    need(bytes, at + stride * height, 'PNM');
    for (let y = 0; y < height; y++)
      for (let x = 0; x < width; x++) {
        const c = ((bytes[at + y * stride + (x >> 3)] as number) >> (7 - (x & 7))) & 1 ? 0 : 255;
        image.data.set([c, c, c, 255], (y * width + x) * 4);
      }
    return image;
  }
  const wide = max > 255 ? 2 : 1;
  need(bytes, at + count * channels * wide, 'PNM');
  const plain = wide === 1 && max === 255;
  const sample = (i: number) =>
    plain ? (bytes[at + i] as number) : scale(wide === 2 ? bytes.readUInt16BE(at + i * 2) : (bytes[at + i] as number));
  for (let i = 0; i < count; i++) {
    if (channels === 1) {
      const v = sample(i);
      put(image.data, i * 4, v, v, v, 255);
    } else put(image.data, i * 4, sample(i * 3), sample(i * 3 + 1), sample(i * 3 + 2), 255);
  }
  return image;
}

// --- TIFF ---------------------------------------------------------------------------------

interface TiffDirectory {
  width: number;
  height: number;
  tags: Map<number, number[]>;
  little: boolean;
}

/** The most bytes a TIFF's samples may unpack to. */
const MAX_UNPACKED_BYTES = 128 * 1024 * 1024;

const TAG_TYPE_SIZE: Record<number, number> = { 1: 1, 2: 1, 3: 2, 4: 4, 6: 1, 7: 1, 8: 2, 9: 4, 16: 8 };

/** The first image directory of a TIFF, its numeric tags read (at most 4,096 values each). */
function tiffDirectory(bytes: Buffer): TiffDirectory {
  const little = bytes[0] === 0x49;
  const u16 = (at: number) => (little ? bytes.readUInt16LE(at) : bytes.readUInt16BE(at));
  const u32 = (at: number) => (little ? bytes.readUInt32LE(at) : bytes.readUInt32BE(at));
  const first = u32(4);
  need(bytes, first + 2, 'TIFF');
  const count = u16(first);
  need(bytes, first + 2 + count * 12, 'TIFF');
  const tags = new Map<number, number[]>();
  for (let i = 0; i < count; i++) {
    const at = first + 2 + i * 12;
    const tag = u16(at);
    const type = u16(at + 2);
    const n = u32(at + 4);
    const size = TAG_TYPE_SIZE[type];
    // Strip offsets and counts can be many (one a row); each value is held to the file's bytes below.
    if (size === undefined || n > (tag === 273 || tag === 279 ? 1 << 20 : 4096)) continue;
    const from = n * size <= 4 ? at + 8 : u32(at + 8);
    need(bytes, from + n * size, 'TIFF');
    const values: number[] = [];
    for (let k = 0; k < n; k++) {
      const p = from + k * size;
      values.push(size === 1 ? (bytes[p] as number) : size === 2 ? u16(p) : u32(p));
    }
    tags.set(tag, values);
  }
  const width = tags.get(256)?.[0] ?? 0;
  const height = tags.get(257)?.[0] ?? 0;
  if (width === 0 || height === 0) fail('it is a TIFF with no image size');
  return { width, height, tags, little };
}

function decodeTiff(bytes: Buffer): Rgba {
  const { width, height, tags, little } = tiffDirectory(bytes);
  const one = (tag: number, fallback: number) => tags.get(tag)?.[0] ?? fallback;
  const compression = one(259, 1);
  const photometric = one(262, 1);
  const samples = one(277, 1);
  const bits = tags.get(258) ?? [1];
  const predictor = one(317, 1);
  const refuse = (what: string) => fail(`it is a TIFF ${what}, which is not read here: convert it to PNG first`);
  if (tags.has(322)) refuse('in tiles');
  if (one(284, 1) !== 1) refuse('with its channels in separate planes');
  if (![1, 5, 8, 32946, 32773].includes(compression)) refuse(`compressed with scheme ${compression} (JPEG, say)`);
  if (![0, 1, 2, 3].includes(photometric)) refuse(`in colour space ${photometric} (CMYK, YCbCr or Lab)`);
  const depth = bits[0] as number;
  if (bits.some((b) => b !== depth) || ![1, 8, 16].includes(depth) || (depth === 1 && samples !== 1))
    refuse(`of ${bits.join('/')} bits a sample`);
  const offsets = tags.get(273) ?? [];
  const counts = tags.get(279) ?? [];
  if (photometric === 3 && depth === 16) refuse('with a palette of 16-bit indices');
  // Each byte of the file is unpacked once at most: strips that overlap, or claim more than
  // the file holds, would let a small file cost any amount of work.
  if (counts.length !== offsets.length || counts.reduce((sum, n) => sum + n, 0) > bytes.length)
    fail('it is a TIFF whose strips claim more than the file holds');
  const rowsPerStrip = Math.min(one(278, height), height);
  const rowBytes = Math.ceil((width * samples * depth) / 8);
  // A few megabytes compressed can say a great deal: what is unpacked is bounded before it is.
  if (rowBytes * height > MAX_UNPACKED_BYTES)
    fail(
      `it is a TIFF of ${rowBytes * height} bytes unpacked, above ${MAX_UNPACKED_BYTES / 1024 / 1024} MiB: scale it down first`,
    );
  const raw = Buffer.alloc(rowBytes * height);
  let filled = 0;
  offsets.forEach((offset, i) => {
    const length = counts[i] ?? 0;
    need(bytes, offset + length, 'TIFF');
    const strip = bytes.subarray(offset, offset + length);
    const want = Math.min(rowsPerStrip * rowBytes, raw.length - filled);
    const plain =
      compression === 1
        ? strip
        : compression === 5
          ? lzw(strip, want)
          : compression === 32773
            ? packBits(strip, want)
            : inflateSync(strip, { maxOutputLength: Math.max(want, 1) });
    const got = Math.min(plain.length, want);
    plain.copy(raw, filled, 0, got);
    filled += got;
    // A strip that gives less than its rows is a file cut short, not blank rows.
    if (got < want) fail('it is not a whole TIFF: a strip ends before its rows do');
  });
  if (filled < raw.length) fail('it is not a whole TIFF: it ends before its pixels do');
  const wide = depth === 16 ? 2 : 1;
  if (predictor === 2 && depth === 8)
    for (let y = 0; y < height; y++)
      for (let x = samples; x < width * samples; x++) {
        const at = y * rowBytes + x;
        raw[at] = ((raw[at] as number) + (raw[at - samples] as number)) & 0xff;
      }
  else if (predictor !== 1) refuse(`with predictor ${predictor}`);
  const map = tags.get(320);
  const image = rgba(width, height);
  const sample = (y: number, i: number): number => {
    if (depth === 1) return (((raw[y * rowBytes + (i >> 3)] as number) >> (7 - (i & 7))) & 1) * 255;
    const at = y * rowBytes + i * wide;
    return wide === 2 ? (little ? raw.readUInt16LE(at) : raw.readUInt16BE(at)) >> 8 : (raw[at] as number);
  };
  if (photometric === 2 && samples < 3) refuse('in RGB with fewer than three samples');
  if (photometric === 3 && !map) refuse('with a palette it does not hold');
  const n = 1 << depth;
  // An extra sample is alpha only where ExtraSamples says so (1 associated, 2 unassociated).
  const alphaSample = [1, 2].includes(tags.get(338)?.[0] ?? 0);
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) {
      const i = x * samples;
      const out = (y * width + x) * 4;
      if (photometric === 2) {
        const a = samples >= 4 && alphaSample ? sample(y, i + 3) : 255;
        put(image.data, out, sample(y, i), sample(y, i + 1), sample(y, i + 2), a);
      } else if (photometric === 3) {
        const v = depth === 1 ? sample(y, i) / 255 : (raw[y * rowBytes + i] as number);
        put(image.data, out, (map?.[v] ?? 0) >> 8, (map?.[n + v] ?? 0) >> 8, (map?.[2 * n + v] ?? 0) >> 8, 255);
      } else {
        const v = photometric === 0 ? 255 - sample(y, i) : sample(y, i);
        put(image.data, out, v, v, v, samples >= 2 && alphaSample ? sample(y, i + 1) : 255);
      }
    }
  return image;
}

/** The codes every LZW table starts with: the 256 bytes, then clear and end. */
const LZW_ROOTS: readonly Buffer[] = [
  ...Array.from({ length: 256 }, (_, i) => Buffer.from([i])),
  Buffer.alloc(0),
  Buffer.alloc(0),
];

/** TIFF's LZW (codes of 9 to 12 bits, most significant first, widened one code early), up to `want` bytes. */
function lzw(input: Buffer, want: number): Buffer {
  const out = Buffer.alloc(want);
  let length = 0;
  let table: Buffer[] = [];
  const reset = () => {
    table = LZW_ROOTS.slice();
  };
  reset();
  let width = 9;
  let bitPos = 0;
  let previous: Buffer | null = null;
  const total = input.length * 8;
  while (bitPos + width <= total && length < want) {
    let code = 0;
    for (let k = 0; k < width; k++, bitPos++)
      code = (code << 1) | (((input[bitPos >> 3] as number) >> (7 - (bitPos & 7))) & 1);
    if (code === 257) break;
    if (code === 256) {
      reset();
      width = 9;
      previous = null;
      continue;
    }
    let entry: Buffer;
    if (code < table.length) entry = table[code] as Buffer;
    else if (code === table.length && previous) entry = Buffer.concat([previous, previous.subarray(0, 1)]);
    else fail('it is a TIFF whose LZW data is broken');
    const copied = Math.min(entry.length, want - length);
    entry.copy(out, length, 0, copied);
    length += copied;
    // A full table (4,096 codes) takes no more until a clear code: it cannot grow past what codes name.
    if (previous && table.length < 4096) table.push(Buffer.concat([previous, entry.subarray(0, 1)]));
    previous = entry;
    if (table.length + 1 >= 1 << width && width < 12) width++;
  }
  return out.subarray(0, length);
}

/** PackBits runs, up to `want` bytes. */
function packBits(input: Buffer, want: number): Buffer {
  const out = Buffer.alloc(want);
  let length = 0;
  let at = 0;
  while (at < input.length && length < want) {
    const n = ((input[at++] as number) << 24) >> 24;
    if (n >= 0) {
      const copied = Math.min(n + 1, want - length, input.length - at);
      input.copy(out, length, at, at + copied);
      length += copied;
      at += n + 1;
    } else if (n !== -128) {
      const copied = Math.min(1 - n, want - length);
      out.fill(input[at++] as number, length, length + copied);
      length += copied;
    }
  }
  return out.subarray(0, length);
}
