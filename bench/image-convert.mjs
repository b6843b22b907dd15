// node bench/image-convert.mjs — what converting an image a model cannot take costs: a
// 512×512 picture as BMP (24 bits), TGA (32 bits, run-length), PPM (P6) and TIFF (RGB,
// uncompressed), each checked and converted to PNG by checkImage (as read_file and a
// tool's result do), beside the part no converter can skip, measured in the same run:
// deflating the picture's raw rows (what writing any PNG of it costs), and a PNG of it
// checked and attached as it is. BENCH_ROUNDS (30) each after 5 unmeasured; medians.
import { performance } from 'node:perf_hooks';
import { deflateSync } from 'node:zlib';
import { checkImage } from '../dist/runtime/images.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 30);
const SIDE = 512;

/** A picture with some detail (gradients and a pattern), as RGB rows. */
const rgb = Buffer.alloc(SIDE * SIDE * 3);
for (let y = 0; y < SIDE; y++)
  for (let x = 0; x < SIDE; x++) rgb.set([x & 0xff, y & 0xff, (x ^ y) & 0xff], (y * SIDE + x) * 3);

function bmp() {
  const stride = SIDE * 3;
  const header = Buffer.alloc(54);
  header.write('BM', 0, 'latin1');
  header.writeUInt32LE(54 + stride * SIDE, 2);
  header.writeUInt32LE(54, 10);
  header.writeUInt32LE(40, 14);
  header.writeInt32LE(SIDE, 18);
  header.writeInt32LE(-SIDE, 22);
  header.writeUInt16LE(1, 26);
  header.writeUInt16LE(24, 28);
  const pixels = Buffer.alloc(stride * SIDE);
  for (let i = 0; i < SIDE * SIDE; i++) pixels.set([rgb[i * 3 + 2], rgb[i * 3 + 1], rgb[i * 3]], i * 3);
  return Buffer.concat([header, pixels]);
}

function tga() {
  const header = Buffer.alloc(18);
  header[2] = 10;
  header.writeUInt16LE(SIDE, 12);
  header.writeUInt16LE(SIDE, 14);
  header[16] = 32;
  header[17] = 0x28;
  const body = [];
  for (let i = 0; i < SIDE * SIDE; i++) body.push(0, rgb[i * 3 + 2], rgb[i * 3 + 1], rgb[i * 3], 255);
  return Buffer.concat([header, Buffer.from(body)]);
}

function ppm() {
  return Buffer.concat([Buffer.from(`P6\n${SIDE} ${SIDE}\n255\n`), rgb]);
}

function tiff() {
  const entries = [
    [256, 3, 1, SIDE],
    [257, 3, 1, SIDE],
    [258, 3, 3, 0],
    [259, 3, 1, 1],
    [262, 3, 1, 2],
    [273, 4, 1, 0],
    [277, 3, 1, 3],
    [278, 3, 1, SIDE],
    [279, 4, 1, rgb.length],
  ];
  const bitsAt = 8 + 2 + entries.length * 12 + 4;
  const dataAt = bitsAt + 6;
  const out = Buffer.alloc(dataAt + rgb.length);
  out.write('II*\0', 0, 'latin1');
  out.writeUInt32LE(8, 4);
  out.writeUInt16LE(entries.length, 8);
  entries.forEach(([tag, type, count, value], i) => {
    const at = 10 + i * 12;
    out.writeUInt16LE(tag, at);
    out.writeUInt16LE(type, at + 2);
    out.writeUInt32LE(count, at + 4);
    const v = tag === 258 ? bitsAt : tag === 273 ? dataAt : value;
    if (type === 3 && count === 1) out.writeUInt16LE(v, at + 8);
    else out.writeUInt32LE(v, at + 8);
  });
  out.set([8, 0, 8, 0, 8, 0], bitsAt);
  rgb.copy(out, dataAt);
  return out;
}

const raw = Buffer.alloc((SIDE * 3 + 1) * SIDE);
for (let y = 0; y < SIDE; y++) rgb.copy(raw, y * (SIDE * 3 + 1) + 1, y * SIDE * 3, (y + 1) * SIDE * 3);
const asPng = checkImage('image', bmp().toString('base64'));
if (!('image' in asPng)) throw new Error(asPng.refused);
const png = asPng.image.data;

const cases = {
  'deflate the raw rows (baseline)': () => deflateSync(raw),
  'a PNG, checked and attached as it is': () => checkImage('image', png),
  ...Object.fromEntries(
    Object.entries({ BMP: bmp(), TGA: tga(), PPM: ppm(), TIFF: tiff() }).map(([name, bytes]) => {
      const base64 = bytes.toString('base64');
      return [
        `${name} (${(bytes.length / 1024).toFixed(0)} KiB) converted to PNG`,
        () => {
          const out = checkImage(name === 'TGA' ? 'image/x-tga' : 'image', base64);
          if (!('image' in out)) throw new Error(out.refused);
        },
      ];
    }),
  ),
};

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const results = [];
for (const [name, run] of Object.entries(cases)) {
  for (let i = 0; i < 5; i++) run();
  const times = [];
  for (let i = 0; i < ROUNDS; i++) {
    const at = performance.now();
    run();
    times.push(performance.now() - at);
  }
  results.push([name, median(times)]);
}
const base = results[0][1];
console.log(`${SIDE}×${SIDE}, ${ROUNDS} rounds, medians`);
for (const [name, ms] of results)
  console.log(`${name.padEnd(44)} ${ms.toFixed(2).padStart(8)} ms  ${(ms / base).toFixed(2)}×`);
