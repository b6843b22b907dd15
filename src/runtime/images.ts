/**
 * Images a tool hands back (an MCP server's screenshot, a tool of the embedder's), as
 * attachments of its observation: checked once, when the result comes back, so nothing a
 * vendor would refuse reaches a request (a refused image would fail every later request
 * of the run, since the transcript carries it). Only what every vendor documents is
 * attached: PNG, JPEG, GIF and WebP, told by their bytes (the type a tool claims is not
 * trusted), at most {@link MAX_IMAGE_BYTES} and {@link MAX_IMAGE_SIDE} pixels a side, read
 * from the header; nothing is decoded. Anything else becomes a line of the observation's
 * text saying what it was and why it is not attached.
 */

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

/** What the observation's text says of an image: its type and size, and whether it is attached. */
export function imageLine(what: string, bytes: number, note: string): string {
  const size = bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MiB` : `${Math.ceil(bytes / 1024)} KiB`;
  return `[image ${what}, ${size}, ${note}]`;
}

/**
 * An image a tool returned, checked: the attachment, or why it is not one (said in a way
 * the model can act on). `declared` is the type the tool claimed, used only to name it.
 */
export function checkImage(declared: unknown, data: unknown): { image: ImageAttachment } | { refused: string } {
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
  if (found === null)
    return {
      refused: imageLine(
        claimed,
        bytes,
        'not attached: its bytes are not PNG, JPEG, GIF or WebP, the types models take (convert it to PNG first)',
      ),
    };
  if ('broken' in found) return { refused: imageLine(found.mimeType, bytes, `not attached: ${found.broken}`) };
  if (found.width > MAX_IMAGE_SIDE || found.height > MAX_IMAGE_SIDE)
    return {
      refused: imageLine(
        found.mimeType,
        bytes,
        `${found.width}×${found.height} pixels, not attached: a side may be at most ${MAX_IMAGE_SIDE} pixels (scale it down first)`,
      ),
    };
  return { image: { mimeType: found.mimeType, data: text } };
}

type Sniffed =
  | { mimeType: ImageAttachment['mimeType']; width: number; height: number }
  | { mimeType: ImageAttachment['mimeType']; broken: string };

/** The type an image's bytes are, and its size in pixels from its header; null when it is none of the four. */
function sniff(head: Buffer, base64: string): Sniffed | null {
  if (head.length >= 8 && head.subarray(0, 8).equals(PNG)) {
    if (head.length < 24 || head.toString('latin1', 12, 16) !== 'IHDR')
      return { mimeType: 'image/png', broken: 'it is not a whole PNG (no IHDR header)' };
    return { mimeType: 'image/png', width: head.readUInt32BE(16), height: head.readUInt32BE(20) };
  }
  if (head.length >= 6 && (head.toString('latin1', 0, 6) === 'GIF87a' || head.toString('latin1', 0, 6) === 'GIF89a')) {
    if (head.length < 10) return { mimeType: 'image/gif', broken: 'it is not a whole GIF' };
    return { mimeType: 'image/gif', width: head.readUInt16LE(6), height: head.readUInt16LE(8) };
  }
  if (head.length >= 12 && head.toString('latin1', 0, 4) === 'RIFF' && head.toString('latin1', 8, 12) === 'WEBP')
    return webpSize(head);
  if (head.length >= 3 && head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff)
    // A JPEG's size is in its frame header, which may come after large metadata: read it all (at most 5 MiB).
    return jpegSize(Buffer.from(base64, 'base64'));
  return null;
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
