/**
 * Images at the door: a file `read_file` is asked for, a tool's screenshot, an image a tool
 * hands back (an MCP server's, the embedder's), as attachments of its observation: checked
 * once, when it comes in, so nothing a vendor would refuse reaches a request (a refused
 * image would fail every later request of the run, since the transcript carries it). What
 * every vendor documents is attached as it is: PNG, JPEG, GIF and WebP, told by their
 * bytes (the type a tool claims is not trusted). BMP, ICO, TGA, PNM and TIFF are read and
 * written again as PNG (./image-convert.ts). SVG, HEIC and AVIF are refused by name, with
 * the conversion that fixes each. Every image is held to {@link MAX_IMAGE_BYTES},
 * {@link MAX_IMAGE_SIDE} pixels a side and {@link MAX_IMAGE_PIXELS}, read from its header
 * before anything is decoded. What is not attached becomes a line of the observation's
 * text saying what it was and why.
 */
import {
  convertibleFormat,
  declaredSize,
  decode,
  encodePng,
  icoPng,
  MAX_CONVERTED_PIXELS,
  Unreadable,
} from './image-convert.js';

/** An image attached to an observation: its type as its bytes say, and the bytes as base64. */
export interface ImageAttachment {
  mimeType: 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';
  /** Base64 (RFC 4648, no line breaks). */
  data: string;
}

/** The most one image may hold: the smaller of the vendors' limits (Anthropic's 5 MB). */
export const MAX_IMAGE_BYTES = 5 * 1024 * 1024;
/** The longest side, in pixels, an image may have (Anthropic refuses a request with a longer one). */
export const MAX_IMAGE_SIDE = 8000;
/** The most pixels an image may have, read from its header before anything is decoded. */
export const MAX_IMAGE_PIXELS = 50_000_000;
/** The most images one tool result attaches; the rest are lines of its text. */
export const MAX_IMAGES_PER_RESULT = 4;
/** The most image bytes one tool result attaches: under what a request carries, so the latest result's always fit. */
export const MAX_RESULT_IMAGE_BYTES = 10 * 1024 * 1024;
/** The most images one request carries: the latest ones of the transcript. */
export const MAX_IMAGES_SHOWN = 8;
/** The most image bytes one request carries (the vendors bound a whole request at about 32 MB of base64). */
export const MAX_SHOWN_IMAGE_BYTES = 15 * 1024 * 1024;

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The bytes an image of `data.length` base64 characters decodes to. */
export function imageBytes(data: string): number {
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
  return Math.floor((data.length * 3) / 4) - padding;
}

/** What an attached image is called in its line: its type, and what it was converted from. */
export function attachedName(checked: { image: ImageAttachment; from?: string }): string {
  return checked.from ? `${checked.image.mimeType} (from ${checked.from})` : checked.image.mimeType;
}

/** What the observation's text says of an image: its type and size, and whether it is attached. */
export function imageLine(what: string, bytes: number, note: string): string {
  const size = bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MiB` : `${Math.ceil(bytes / 1024)} KiB`;
  return `[image ${what}, ${size}, ${note}]`;
}

/** An image checked: the attachment (`from`: the format it was converted from), or why it is not one. */
export type CheckedImage = { image: ImageAttachment; from?: string } | { refused: string };

/**
 * An image that came in, checked: the attachment, or why it is not one (said in a way the
 * model can act on). `declared` is the type the tool claimed (or the file's name), used to
 * name it and to tell a TGA, which has no signature.
 */
export function checkImage(declared: unknown, data: unknown): CheckedImage {
  const claimed = typeof declared === 'string' && declared.length <= 100 ? declared : 'of no stated type';
  let text: string;
  if (typeof data === 'string') text = data;
  else if (data instanceof Uint8Array)
    text = Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64');
  else return { refused: `[image ${claimed}, not attached: it came without its bytes]` };
  // Bounded before anything is read: a hostile server's 100 MB image costs one length check.
  const bytes = imageBytes(text);
  if (bytes > MAX_IMAGE_BYTES)
    return {
      refused: imageLine(claimed, bytes, `not attached: an image may be at most ${MAX_IMAGE_BYTES / 1024 / 1024} MiB`),
    };
  if (text.length % 4 !== 0 || !BASE64.test(text))
    return { refused: `[image ${claimed}, not attached: its bytes are not base64]` };
  const head = Buffer.from(text.slice(0, 64 * 1024), 'base64');
  const found = sniff(head, text);
  if (found === null) return converted(claimed, Buffer.from(text, 'base64'));
  if ('broken' in found) return { refused: imageLine(found.mimeType, bytes, `not attached: ${found.broken}`) };
  const tooLarge = sizeRefusal(found.width, found.height);
  if (tooLarge) return { refused: imageLine(found.mimeType, bytes, tooLarge) };
  return { image: { mimeType: found.mimeType, data: text } };
}

/** Why an image of `width`×`height` is not attached, or null when its size is fine. */
function sizeRefusal(width: number, height: number): string | null {
  if (width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE)
    return `${width}×${height} pixels, not attached: a side may be at most ${MAX_IMAGE_SIDE} pixels (scale it down first)`;
  if (width * height > MAX_IMAGE_PIXELS)
    return `${width}×${height} pixels, not attached: an image may have at most ${MAX_IMAGE_PIXELS / 1_000_000} megapixels (scale it down first)`;
  return null;
}

/** The types refused by name: none is pixels a reader here can take, and each has a converter. */
const NAMED: readonly { name: string; test: (bytes: Buffer) => boolean; fix: string }[] = [
  {
    name: 'SVG',
    test: isSvg,
    fix: 'it is drawn, not pixels: render it to PNG first (rsvg-convert -o out.png in.svg)',
  },
  {
    name: 'HEIC',
    test: (bytes) => isoBrand(bytes, ['heic', 'heix', 'heim', 'heis', 'hevc', 'hevx', 'mif1', 'msf1']),
    fix: 'convert it to JPEG or PNG first (heif-convert in.heic out.jpg)',
  },
  {
    name: 'AVIF',
    test: (bytes) => isoBrand(bytes, ['avif', 'avis']),
    fix: 'convert it to PNG first (avifdec in.avif out.png)',
  },
];

/**
 * Whether `bytes` are an SVG: `<svg` first, after whitespace, an XML declaration, comments
 * and a doctype, skipped by a linear scan of the first 4 KiB (a pattern with a repeated
 * group could take exponential time on a crafted prolog).
 */
function isSvg(bytes: Buffer): boolean {
  const text = bytes.toString('utf8', 0, 4096);
  let at = 0;
  for (;;) {
    while (at < text.length && /\s/.test(text[at] as string)) at++;
    const skip = text.startsWith('<?', at)
      ? '?>'
      : text.startsWith('<!--', at)
        ? '-->'
        : text.startsWith('<!', at)
          ? '>'
          : null;
    if (skip === null) break;
    const end = text.indexOf(skip, at + 2);
    if (end < 0) return false;
    at = end + skip.length;
  }
  return /^<svg[\s>/]/i.test(text.slice(at, at + 5));
}

/** Whether `bytes` start an ISO media file (`ftyp`) whose major brand is one of `brands`. */
function isoBrand(bytes: Buffer, brands: readonly string[]): boolean {
  return (
    bytes.length >= 12 && bytes.toString('latin1', 4, 8) === 'ftyp' && brands.includes(bytes.toString('latin1', 8, 12))
  );
}

/**
 * An image none of the four: an icon's PNG as it is, one of the formats read here as a
 * PNG (its size checked from its header first), a named type refused with its fix, or
 * anything else refused.
 */
function converted(claimed: string, bytes: Buffer): CheckedImage {
  const named = NAMED.find((type) => type.test(bytes));
  if (named) return { refused: imageLine(named.name, bytes.length, `not attached: ${named.fix}`) };
  const format = convertibleFormat(bytes, claimed);
  if (format === null)
    return {
      refused: imageLine(
        claimed,
        bytes.length,
        'not attached: its bytes are not PNG, JPEG, GIF or WebP, the types models take, nor BMP, ICO, TGA, PNM or TIFF, which are converted (convert it to PNG first)',
      ),
    };
  try {
    const size = declaredSize(format, bytes);
    const tooLarge = sizeRefusal(size.width, size.height);
    if (tooLarge) return { refused: imageLine(format, bytes.length, tooLarge) };
    const inner = format === 'ICO' ? icoPng(bytes) : null;
    if (inner) {
      const checked = checkImage('image/png', inner.toString('base64'));
      return 'image' in checked ? { image: checked.image, from: format } : checked;
    }
    if (size.width * size.height > MAX_CONVERTED_PIXELS)
      return {
        refused: imageLine(
          format,
          bytes.length,
          `${size.width}×${size.height} pixels, not attached: an image converted to PNG may have at most ${MAX_CONVERTED_PIXELS / 1_000_000} megapixels (scale it down first)`,
        ),
      };
    const png = encodePng(decode(format, bytes));
    if (png.length > MAX_IMAGE_BYTES)
      return {
        refused: imageLine(
          format,
          bytes.length,
          `not attached: as a PNG it is ${png.length} bytes, above ${MAX_IMAGE_BYTES / 1024 / 1024} MiB (scale it down first)`,
        ),
      };
    return { image: { mimeType: 'image/png', data: png.toString('base64') }, from: format };
  } catch (problem) {
    // A reader's refusal says why; anything else a broken file made it trip on is said as that.
    const why =
      problem instanceof Unreadable
        ? problem.message
        : `it could not be read (${problem instanceof Error ? problem.message : String(problem)})`;
    return { refused: imageLine(format, bytes.length, `not attached: ${why}`) };
  }
}

type Sniffed =
  | { mimeType: ImageAttachment['mimeType']; width: number; height: number }
  | { mimeType: ImageAttachment['mimeType']; broken: string };

/** The type an image's bytes are, and its size in pixels from its header; null when it is none of the four. */
function sniff(head: Buffer, base64: string): Sniffed | null {
  switch (signature(head)) {
    case 'image/png':
      if (head.length < 24 || head.toString('latin1', 12, 16) !== 'IHDR')
        return { mimeType: 'image/png', broken: 'it is not a whole PNG (no IHDR header)' };
      return { mimeType: 'image/png', width: head.readUInt32BE(16), height: head.readUInt32BE(20) };
    case 'image/gif':
      if (head.length < 10) return { mimeType: 'image/gif', broken: 'it is not a whole GIF' };
      return { mimeType: 'image/gif', width: head.readUInt16LE(6), height: head.readUInt16LE(8) };
    case 'image/webp':
      return webpSize(head);
    case 'image/jpeg':
      // A JPEG's size is in its frame header, which may come after large metadata: read it all (at most 5 MiB).
      return jpegSize(Buffer.from(base64, 'base64'));
    case null:
      return null;
  }
}

/** Which of the four `head` starts as, by its signature alone. */
function signature(head: Buffer): ImageAttachment['mimeType'] | null {
  if (head.length >= 8 && head.subarray(0, 8).equals(PNG)) return 'image/png';
  const six = head.toString('latin1', 0, 6);
  if (six === 'GIF87a' || six === 'GIF89a') return 'image/gif';
  if (head.length >= 12 && head.toString('latin1', 0, 4) === 'RIFF' && head.toString('latin1', 8, 12) === 'WEBP')
    return 'image/webp';
  if (head.length >= 3 && head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return 'image/jpeg';
  return null;
}

/**
 * Whether `head` (a file's first bytes; `name`, its name, tells a TGA) is an image this
 * module decides on: one of the four, a type it converts, or HEIC or AVIF, which it
 * refuses by name. An SVG is not counted: it is text, its source.
 */
export function isImage(head: Buffer, name: string): boolean {
  return (
    signature(head) !== null ||
    convertibleFormat(head, name) !== null ||
    NAMED.some((type) => type.name !== 'SVG' && type.test(head))
  );
}

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function webpSize(head: Buffer): Sniffed {
  const broken = { mimeType: 'image/webp' as const, broken: 'it is not a whole WebP' };
  if (head.length < 30) return broken;
  const chunk = head.toString('latin1', 12, 16);
  if (chunk === 'VP8X')
    return { mimeType: 'image/webp', width: head.readUIntLE(24, 3) + 1, height: head.readUIntLE(27, 3) + 1 };
  if (chunk === 'VP8L') {
    const bits = head.readUInt32LE(21);
    return { mimeType: 'image/webp', width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
  }
  if (chunk === 'VP8 ')
    return { mimeType: 'image/webp', width: head.readUInt16LE(26) & 0x3fff, height: head.readUInt16LE(28) & 0x3fff };
  return broken;
}

/** The size in a JPEG's first frame header (SOF0 to SOF15, bar DHT, JPG and DAC). */
function jpegSize(bytes: Buffer): Sniffed {
  let at = 2;
  while (at + 4 <= bytes.length) {
    if (bytes[at] !== 0xff) break;
    const marker = bytes[at + 1] as number;
    // Fill bytes and markers without a length.
    if (marker === 0xff) {
      at++;
      continue;
    }
    if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      at += 2;
      continue;
    }
    const length = bytes.readUInt16BE(at + 2);
    if (length < 2) break;
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      if (at + 9 > bytes.length) break;
      return { mimeType: 'image/jpeg', height: bytes.readUInt16BE(at + 5), width: bytes.readUInt16BE(at + 7) };
    }
    // The image data starts with no frame header seen: not a JPEG a model can read.
    if (marker === 0xda) break;
    at += 2 + length;
  }
  return { mimeType: 'image/jpeg', broken: 'it is not a whole JPEG (no frame header)' };
}

/**
 * Which tool entries of a transcript have their images sent: the latest, newest first, up
 * to {@link MAX_IMAGES_SHOWN} images and {@link MAX_SHOWN_IMAGE_BYTES} bytes, an entry's
 * images all or none. The same transcript always gives the same answer, so a request is
 * the same bytes on a resume; an entry whose images are left out says so in its text.
 */
export function shownImages<T extends { role: string; images?: readonly ImageAttachment[] }>(
  transcript: readonly T[],
): Set<T> {
  const shown = new Set<T>();
  let count = 0;
  let bytes = 0;
  for (let index = transcript.length - 1; index >= 0; index--) {
    const entry = transcript[index] as T;
    const images = entry.role === 'tool' ? entry.images : undefined;
    if (!images || images.length === 0) continue;
    const size = images.reduce((sum, image) => sum + imageBytes(image.data), 0);
    if (count + images.length > MAX_IMAGES_SHOWN || bytes + size > MAX_SHOWN_IMAGE_BYTES) break;
    count += images.length;
    bytes += size;
    shown.add(entry);
  }
  return shown;
}

/** What a tool entry whose images are left out of a request says in their place: older than the latest, or a provider that takes none. */
export function imagesNotShown(count: number, sent: boolean): string {
  const what = count === 1 ? 'its image is' : `its ${count} images are`;
  return sent
    ? `[${what} no longer sent: a request carries only the latest ${MAX_IMAGES_SHOWN} images]`
    : `[${what} not sent: this model is given text only]`;
}
