/** The template lane's bytes are exactly what its WebAssembly text compiles to, and they load here. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain script with no declarations; what it exports is checked below.
import { compileLane, laneModule } from '../scripts/build-lane.mjs';
import { scanTemplateRun } from '../src/runtime/providers/sse.js';
import { TEMPLATE_LANE } from '../src/runtime/providers/template-lane.js';

describe('the template lane', () => {
  it('holds the bytes template-lane.wat compiles to, so the module can be rebuilt and read', async () => {
    const bytes: Buffer = await compileLane();
    expect(Buffer.from(TEMPLATE_LANE, 'base64').equals(bytes)).toBe(true);
    const generated = readFileSync(new URL('../src/runtime/providers/template-lane.ts', import.meta.url), 'utf8');
    expect(generated).toBe(laneModule(bytes));
  });

  it('compiles and runs on this runtime (WebAssembly with SIMD)', () => {
    const lead = Buffer.from('data: {"t":"');
    const tail = Buffer.from('"}\n\n');
    const body = Buffer.from('data: {"t":"one"}\n\ndata: {"t":"two"}\n\ndata: {"u":1}\n\n');
    expect(scanTemplateRun(body, 0, lead, tail)).toEqual({
      end: body.indexOf('data: {"u"'),
      text: 'onetwo',
      escaped: false,
    });
  });
});
