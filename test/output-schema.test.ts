import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { checkOutput } from '../dist/runtime/contract/output-check.js';
import { OUTPUT_SCHEMA_KEYWORDS, OutputSchema } from '../dist/runtime/contract/output-schema.js';

/** Runs `fn`, which must throw, and returns what it threw. */
function thrown(fn: () => unknown): { name: string; code: string; keyword: string; pointer: string; message: string } {
  try {
    fn();
  } catch (error) {
    return error as { name: string; code: string; keyword: string; pointer: string; message: string };
  }
  throw new Error('expected a throw');
}

const review = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  title: 'Review',
  type: 'object',
  properties: {
    summary: { type: 'string', minLength: 1, maxLength: 500, description: 'one paragraph' },
    risk: { enum: ['low', 'medium', 'high'] },
    score: { type: 'number', minimum: 0, maximum: 10, multipleOf: 0.5 },
    count: { type: 'integer', exclusiveMinimum: 0, exclusiveMaximum: 100 },
    tags: {
      type: 'array',
      items: { type: 'string', pattern: '^[a-z-]+$' },
      minItems: 0,
      maxItems: 5,
      uniqueItems: true,
    },
    owner: { anyOf: [{ type: 'string' }, { type: 'null' }], default: null },
    meta: {
      type: 'object',
      additionalProperties: { type: ['string', 'number'] },
      minProperties: 0,
      maxProperties: 3,
      examples: [{ a: 1 }],
    },
    version: { const: 1 },
  },
  required: ['summary', 'risk'],
  additionalProperties: false,
};

describe('OutputSchema.of', () => {
  it('accepts a nested schema using the whole subset, keeps an equal copy and the default name', () => {
    const declared = OutputSchema.of(review);
    expect(declared.schema).toEqual(review);
    expect(declared.schema).not.toBe(review);
    expect(declared.name).toBe('output');
    expect(declared.toJSON()).toEqual({ name: 'output', schema: review });
    expect(JSON.parse(JSON.stringify(declared))).toEqual({ name: 'output', schema: review });
  });

  it('states its subset', () => {
    expect([...OUTPUT_SCHEMA_KEYWORDS].sort()).toEqual(
      [
        'type',
        'properties',
        'required',
        'additionalProperties',
        'items',
        'enum',
        'const',
        'minimum',
        'maximum',
        'exclusiveMinimum',
        'exclusiveMaximum',
        'multipleOf',
        'minLength',
        'maxLength',
        'pattern',
        'minItems',
        'maxItems',
        'uniqueItems',
        'minProperties',
        'maxProperties',
        'anyOf',
        'description',
        'title',
        'default',
        'examples',
        '$schema',
      ].sort(),
    );
    expect(Object.isFrozen(OUTPUT_SCHEMA_KEYWORDS)).toBe(true);
  });

  it('keeps a deep-frozen copy: mutating the input afterwards changes nothing', () => {
    const input = structuredClone(review);
    const declared = OutputSchema.of(input);
    input.properties.summary.maxLength = 1;
    input.required.push('score');
    input.properties.risk.enum.push('unknown');
    (input.properties as Record<string, unknown>).extra = { type: 'string' };
    expect(declared.schema).toEqual(review);
    expect(Object.isFrozen(declared)).toBe(true);
    expect(Object.isFrozen(declared.schema)).toBe(true);
    const properties = declared.schema.properties as Record<string, Record<string, unknown>>;
    expect(Object.isFrozen(properties)).toBe(true);
    expect(Object.isFrozen(properties.risk!.enum)).toBe(true);
    expect(Object.isFrozen(declared.schema.required)).toBe(true);
    expect(() => {
      (declared.schema as Record<string, unknown>).type = 'array';
    }).toThrow(TypeError);
  });

  it('keeps a property named __proto__ as a property', () => {
    const input = JSON.parse('{"type":"object","properties":{"__proto__":{"type":"string"}}}');
    const declared = OutputSchema.of(input);
    const properties = declared.schema.properties as Record<string, unknown>;
    expect(Object.hasOwn(properties, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(properties)).toBe(Object.prototype);
  });

  const refused: [string, unknown, string, string][] = [
    ['$ref at the root', { $ref: '#/$defs/x' }, '$ref', '/$ref'],
    ['$defs', { type: 'object', $defs: { x: { type: 'string' } } }, '$defs', '/$defs'],
    ['oneOf', { oneOf: [{ type: 'string' }, { type: 'number' }] }, 'oneOf', '/oneOf'],
    ['allOf', { allOf: [{ type: 'string' }] }, 'allOf', '/allOf'],
    ['not', { not: { type: 'string' } }, 'not', '/not'],
    // Parsed, because an object literal with a `then` key reads as a thenable to the linter.
    ['if', JSON.parse('{"if":{"type":"string"},"then":{"minLength":1}}'), 'if', '/if'],
    ['then after a valid keyword', JSON.parse('{"type":"string","then":{"minLength":1}}'), 'then', '/then'],
    ['else', { else: {} }, 'else', '/else'],
    [
      'patternProperties',
      { type: 'object', patternProperties: { '^a': {} } },
      'patternProperties',
      '/patternProperties',
    ],
    [
      'format in a property',
      { properties: { name: { type: 'string', format: 'email' } } },
      'format',
      '/properties/name/format',
    ],
    ['dependentRequired', { dependentRequired: { a: ['b'] } }, 'dependentRequired', '/dependentRequired'],
    ['unevaluatedProperties', { unevaluatedProperties: false }, 'unevaluatedProperties', '/unevaluatedProperties'],
    ['contains under items', { type: 'array', items: { contains: { type: 'string' } } }, 'contains', '/items/contains'],
    ['prefixItems', { type: 'array', prefixItems: [{ type: 'string' }] }, 'prefixItems', '/prefixItems'],
    ['$id', { $id: 'https://example.com/s' }, '$id', '/$id'],
    [
      'format deep in anyOf',
      {
        type: 'object',
        properties: {
          items: { type: 'array', items: { anyOf: [{ type: 'string' }, { type: 'string', format: 'uri' }] } },
        },
      },
      'format',
      '/properties/items/items/anyOf/1/format',
    ],
    [
      'under additionalProperties',
      { type: 'object', additionalProperties: { type: 'string', contentEncoding: 'base64' } },
      'contentEncoding',
      '/additionalProperties/contentEncoding',
    ],
    ['$schema below the root', { properties: { a: { $schema: 'x' } } }, '$schema', '/properties/a/$schema'],
    ['a property name needing escapes', { properties: { 'a/b~c': { $ref: '#' } } }, '$ref', '/properties/a~1b~0c/$ref'],
  ];
  it.each(refused)('refuses %s by name and pointer', (_label, schema, keyword, pointer) => {
    const error = thrown(() => OutputSchema.of(schema));
    expect(error.name).toBe('OutputSchemaError');
    expect(error.code).toBe('OUTPUT_SCHEMA_UNSUPPORTED');
    expect(error.keyword).toBe(keyword);
    expect(error.pointer).toBe(pointer);
    expect(error.message).toContain(`"${keyword}"`);
    expect(error.message).toContain(pointer);
    expect(error.message).toMatch(/Remove it/);
  });

  it('says what to write instead where there is an answer, and lists the subset', () => {
    expect(thrown(() => OutputSchema.of({ oneOf: [{}] })).message).toContain('use anyOf');
    expect(thrown(() => OutputSchema.of({ $ref: '#' })).message).toContain('inline the referenced schema');
    const message = thrown(() => OutputSchema.of({ not: {} })).message;
    for (const keyword of OUTPUT_SCHEMA_KEYWORDS) expect(message).toContain(keyword);
  });

  const wrongKind: [string, unknown, string, string][] = [
    ['a string schema', 'object', 'schema', '/'],
    ['an array schema', [{ type: 'string' }], 'schema', '/'],
    ['a null schema', null, 'schema', '/'],
    ['an unknown type', { type: 'text' }, 'type', '/type'],
    ['an unknown type in a list', { type: ['string', 'date'] }, 'type', '/type/1'],
    ['an empty type list', { type: [] }, 'type', '/type'],
    ['required not an array', { required: 'a' }, 'required', '/required'],
    ['required holding a number', { required: ['a', 2] }, 'required', '/required/1'],
    ['required listing a name twice', { required: ['a', 'a'] }, 'required', '/required/1'],
    [
      'required naming an undeclared property with additionalProperties false',
      { type: 'object', properties: { a: {} }, required: ['a', 'b'], additionalProperties: false },
      'required',
      '/required/1',
    ],
    ['properties an array', { properties: [] }, 'properties', '/properties'],
    ['a property that is not a schema', { properties: { a: 'string' } }, 'properties', '/properties/a'],
    ['a boolean property schema', { properties: { a: true } }, 'properties', '/properties/a'],
    ['additionalProperties a string', { additionalProperties: 'no' }, 'additionalProperties', '/additionalProperties'],
    ['items in tuple form', { items: [{ type: 'string' }] }, 'items', '/items'],
    ['items a boolean', { items: true }, 'items', '/items'],
    ['an empty enum', { enum: [] }, 'enum', '/enum'],
    ['enum not an array', { enum: 'a' }, 'enum', '/enum'],
    ['minimum a string', { minimum: '1' }, 'minimum', '/minimum'],
    [
      'exclusiveMinimum in the draft-4 boolean form',
      { minimum: 0, exclusiveMinimum: true },
      'exclusiveMinimum',
      '/exclusiveMinimum',
    ],
    ['maximum infinite', { maximum: Number.POSITIVE_INFINITY }, 'maximum', '/maximum'],
    ['multipleOf zero', { multipleOf: 0 }, 'multipleOf', '/multipleOf'],
    ['minLength negative', { minLength: -1 }, 'minLength', '/minLength'],
    ['maxItems fractional', { maxItems: 1.5 }, 'maxItems', '/maxItems'],
    ['minLength above maxLength', { minLength: 5, maxLength: 2 }, 'minLength', '/minLength'],
    ['minimum above maximum', { properties: { n: { minimum: 3, maximum: 1 } } }, 'minimum', '/properties/n/minimum'],
    ['an invalid pattern', { properties: { a: { pattern: '([a-z]' } } }, 'pattern', '/properties/a/pattern'],
    ['a pattern that is not a string', { pattern: /a/ }, 'pattern', '/pattern'],
    ['uniqueItems a string', { uniqueItems: 'yes' }, 'uniqueItems', '/uniqueItems'],
    ['anyOf empty', { anyOf: [] }, 'anyOf', '/anyOf'],
    ['anyOf holding a non-schema', { anyOf: [{}, 3] }, 'anyOf', '/anyOf/1'],
    ['description a number', { description: 3 }, 'description', '/description'],
    ['$schema a number', { $schema: 7 }, '$schema', '/$schema'],
    ['const holding a non-JSON value', { const: { when: new Date(0) } }, 'const', '/const/when'],
    ['default holding NaN', { default: [1, Number.NaN] }, 'default', '/default/1'],
    ['examples not an array', { examples: 'x' }, 'examples', '/examples'],
  ];
  it.each(wrongKind)('refuses %s by keyword and pointer', (_label, schema, keyword, pointer) => {
    const error = thrown(() => OutputSchema.of(schema));
    expect(error.name).toBe('OutputSchemaError');
    expect(error.keyword).toBe(keyword);
    expect(error.pointer).toBe(pointer);
    expect(error.message).toContain(pointer);
    if (keyword !== 'schema') expect(error.message).toContain(`"${keyword}"`);
  });

  it('refuses a schema that contains itself instead of looping', () => {
    const schema: Record<string, unknown> = { type: 'object', properties: {} };
    (schema.properties as Record<string, unknown>).self = schema;
    const error = thrown(() => OutputSchema.of(schema));
    expect(error.keyword).toBe('properties');
    expect(error.pointer).toBe('/properties/self');
  });

  it('takes a name the OpenAI wire accepts, and refuses any other', () => {
    expect(OutputSchema.of({}, 'review_result-2').name).toBe('review_result-2');
    expect(OutputSchema.of({}, 'a'.repeat(64)).name).toHaveLength(64);
    for (const name of ['', 'a'.repeat(65), 'has space', 'dotted.name', 'ünï', 'a/b']) {
      const error = thrown(() => OutputSchema.of({}, name));
      expect(error.name).toBe('InvalidArgumentError');
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.message).toContain('1 to 64');
    }
  });

  it('keeps the walker free of ajv, so declaring a schema does not load the validator', () => {
    const source = readFileSync(new URL('../dist/runtime/contract/output-schema.js', import.meta.url), 'utf8');
    expect(source).not.toMatch(/from ['"]ajv['"]|import\(['"]ajv['"]\)/);
  });
});

describe('checkOutput', () => {
  const schema = OutputSchema.of(review).schema;

  it('passes a valid answer and returns the parsed value', () => {
    const answer = { summary: 'fine', risk: 'low', tags: ['a', 'b-c'], owner: null, meta: { x: 1 }, version: 1 };
    expect(checkOutput(schema, `  ${JSON.stringify(answer)}\n`)).toEqual({ ok: true, value: answer });
  });

  it('fails a missing required property with a readable error', () => {
    expect(checkOutput(schema, '{"risk":"low"}')).toEqual({
      ok: false,
      errors: ["/: must have required property 'summary'"],
    });
  });

  it('fails a wrong type and an enum miss at their instance pointers, listing the allowed values', () => {
    const result = checkOutput(schema, '{"summary":3,"risk":"severe"}');
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors).toContain('/summary: must be string');
    expect(result.errors).toContain('/risk: must be equal to one of the allowed values: "low", "medium", "high"');
  });

  it('reports every problem at once, and names an extra property and a const', () => {
    const result = checkOutput(schema, '{"summary":"","risk":"low","extra":true,"version":2,"tags":["A"]}');
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors).toEqual(
      expect.arrayContaining([
        "/: must NOT have additional properties: 'extra'",
        '/summary: must NOT have fewer than 1 characters',
        '/version: must be equal to constant: 1',
        '/tags/0: must match pattern "^[a-z-]+$"',
      ]),
    );
  });

  it('accepts one fenced block that is the whole answer', () => {
    const value = { summary: 's', risk: 'high' };
    expect(checkOutput(schema, `\`\`\`json\n${JSON.stringify(value, null, 2)}\n\`\`\``)).toEqual({ ok: true, value });
    expect(checkOutput(schema, `\n\`\`\`\n${JSON.stringify(value)}\n\`\`\`\n`)).toEqual({ ok: true, value });
    expect(checkOutput(schema, `\`\`\`JSON\r\n${JSON.stringify(value)}\r\n\`\`\``)).toEqual({ ok: true, value });
  });

  it('refuses prose, prose around a fence, two fences, and a fence of another language', () => {
    const value = JSON.stringify({ summary: 's', risk: 'high' });
    for (const text of [
      `Here is the review: ${value}`,
      `Here it is:\n\`\`\`json\n${value}\n\`\`\``,
      `\`\`\`json\n${value}\n\`\`\`\n\`\`\`json\n${value}\n\`\`\``,
      `\`\`\`yaml\n${value}\n\`\`\``,
      '',
    ]) {
      const result = checkOutput(schema, text);
      expect(result.ok).toBe(false);
      if (result.ok) continue;
      expect(result.errors).toHaveLength(1);
      expect(result.errors[0]).toMatch(
        /^the answer is not JSON: .+\. Answer with a single JSON value and nothing else\.$/s,
      );
    }
  });

  it('validates scalars and uses "/" for the answer itself', () => {
    const enumSchema = OutputSchema.of({ enum: ['yes', 'no'] }).schema;
    expect(checkOutput(enumSchema, '"yes"')).toEqual({ ok: true, value: 'yes' });
    expect(checkOutput(enumSchema, '"maybe"')).toEqual({
      ok: false,
      errors: ['/: must be equal to one of the allowed values: "yes", "no"'],
    });
  });

  it('gives the same verdicts for an equal schema that is a different object', () => {
    const copy = JSON.parse(JSON.stringify(schema));
    expect(checkOutput(copy, '{"risk":"low"}')).toEqual(checkOutput(schema, '{"risk":"low"}'));
  });

  it('walks a schema it is given directly, so an unsupported keyword is refused rather than half-checked', () => {
    const error = thrown(() => checkOutput({ type: 'string', format: 'email' }, '"a"'));
    expect(error.name).toBe('OutputSchemaError');
    expect(error.pointer).toBe('/format');
  });
});
