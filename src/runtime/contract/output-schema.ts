/**
 * The shape a task contract can demand of a run's final answer: a JSON Schema over a
 * closed, stated keyword subset ({@link OUTPUT_SCHEMA_KEYWORDS}).
 *
 * Why closed: a validator that meets a keyword it does not know passes it through, and
 * the constraint it carries is then silently unchecked. So the schema is walked once, when
 * it is declared, and anything outside the subset, or a keyword holding a value of the
 * wrong kind, is refused by name and by JSON pointer before a run starts.
 *
 * This file deliberately does not import the validator: it is loaded wherever a contract is
 * declared, and a thread pays for every module it loads when it starts (see
 * docs/ARCHITECTURE.md, "Thread start cost"). The check itself lives in `output-check.ts`,
 * which the agent loop imports lazily only when a run declares a schema.
 */

import { InvalidArgumentError, OutputSchemaError } from '../../errors.js';
import { LINEAR_PATTERN_ADVICE, LinearPatternError, linearRegExp } from '../linear-regex.js';

/** A JSON Schema object. Once declared through {@link OutputSchema.of} it is deep-frozen. */
export type JsonSchema = { [key: string]: unknown };

/**
 * The keywords an OutputSchema may use, in the order the guide lists them. `$schema` is
 * accepted at the root only and is informational: the check applies the same rules
 * whatever draft it names.
 *
 * @example
 * OUTPUT_SCHEMA_KEYWORDS.includes('anyOf'); // true
 * OUTPUT_SCHEMA_KEYWORDS.includes('oneOf'); // false: refused by name
 */
export const OUTPUT_SCHEMA_KEYWORDS: readonly string[] = Object.freeze([
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
]);

const SUPPORTED = new Set(OUTPUT_SCHEMA_KEYWORDS);
const TYPES = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null']);
const NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const SUPPORTED_LIST = OUTPUT_SCHEMA_KEYWORDS.join(', ');

/** What to write instead of a refused keyword, where there is a better answer than "remove it". */
const INSTEAD = new Map<string, string>([
  ['$ref', 'inline the referenced schema where it is used'],
  ['$defs', 'inline each definition where it is used'],
  ['definitions', 'inline each definition where it is used'],
  ['oneOf', 'use anyOf'],
  ['allOf', 'merge the subschemas into one schema'],
  ['if', 'use anyOf over the alternatives'],
  ['then', 'use anyOf over the alternatives'],
  ['else', 'use anyOf over the alternatives'],
  ['format', 'use pattern to constrain the string'],
  ['patternProperties', 'name the properties, or give additionalProperties a schema'],
  ['prefixItems', 'use items with a single schema for every element'],
  ['dependentRequired', 'use anyOf over the allowed combinations of required properties'],
  ['dependentSchemas', 'use anyOf over the alternatives'],
  ['dependencies', 'use anyOf over the allowed combinations of required properties'],
]);

/**
 * A declared output schema: a deep-frozen copy of a schema that uses only the supported
 * subset, and the name the OpenAI wire sends as `response_format.json_schema.name`.
 *
 * @example
 * const answer = OutputSchema.of(
 *   {
 *     type: 'object',
 *     properties: { summary: { type: 'string', minLength: 1 }, risk: { enum: ['low', 'high'] } },
 *     required: ['summary', 'risk'],
 *     additionalProperties: false,
 *   },
 *   'review',
 * );
 * OutputSchema.of({ type: 'string', format: 'email' });
 * // throws OutputSchemaError: keyword "format" at /format is not supported ...
 */
/**
 * A zod schema (zod 4), as far as declaring an output needs one. zod is not imported here:
 * this module runs on the agents' threads too, and the schema's own `toJSONSchema` does the
 * conversion on the thread that declares it.
 */
export interface ZodOutputLike {
  _zod: { output: unknown };
  toJSONSchema(params?: Record<string, unknown>): unknown;
}

/**
 * What a run's answer shape may be given as: a zod schema (the answer typed by it), an
 * {@link OutputSchema}, or a plain JSON Schema (the answer `unknown`).
 */
export type OutputSchemaInput<Output = unknown> =
  | OutputSchema<Output>
  | (ZodOutputLike & { _zod: { output: Output } })
  | Record<string, unknown>;

/** The type a zod schema parses to (`z.output<typeof schema>`), without importing zod. */
export type ZodOutput<Schema> = Schema extends { _zod: { output: infer Parsed } } ? Parsed : unknown;

function isZod(value: unknown): value is ZodOutputLike {
  return (
    typeof value === 'object' &&
    value !== null &&
    '_zod' in value &&
    typeof (value as { toJSONSchema?: unknown }).toJSONSchema === 'function'
  );
}

export class OutputSchema<Output = unknown> {
  /**
   * The type of an answer that meets the schema: a zod schema's parsed type, `unknown` for
   * a JSON Schema. Types only: nothing is stored here.
   */
  declare readonly '~output'?: Output;
  /** The deep-frozen copy that was walked; mutating the schema passed in changes nothing here. */
  readonly schema: JsonSchema;
  /** `[a-zA-Z0-9_-]{1,64}`, because the OpenAI wire refuses any other `json_schema.name`. */
  readonly name: string;

  private constructor(schema: JsonSchema, name: string) {
    this.schema = schema;
    this.name = name;
    Object.freeze(this);
  }

  /**
   * Walks `schema` once and keeps a deep-frozen copy of it. Throws an `OutputSchemaError`
   * naming the keyword and the JSON pointer of the first thing outside the subset or of the
   * wrong kind, and an `InvalidArgumentError` for a name the OpenAI wire would refuse.
   *
   * A zod schema (zod 4) is written as JSON Schema by zod's own `toJSONSchema` first, and
   * then walked the same way; the result is typed by the zod schema, so a run's
   * `result.output` is too. What zod writes outside the subset (`format` for `.email()`,
   * say) is refused by keyword, as a hand-written schema's would be.
   *
   * @example
   * OutputSchema.of({ type: 'object', properties: { ok: { type: 'boolean' } } }).name; // 'output'
   * OutputSchema.of(z.object({ ok: z.boolean() }), 'verdict'); // OutputSchema<{ ok: boolean }>
   */
  static of<Schema extends ZodOutputLike>(schema: Schema, name?: string): OutputSchema<ZodOutput<Schema>>;
  static of(schema: unknown, name?: string): OutputSchema<unknown>;
  static of(schema: unknown, name = 'output'): OutputSchema<unknown> {
    if (typeof name !== 'string' || !NAME.test(name)) {
      throw new InvalidArgumentError(
        `output schema name ${JSON.stringify(name)} is not usable: it is sent as json_schema.name on the OpenAI wire, ` +
          'which takes 1 to 64 characters of letters, digits, "_" and "-". Pass a name such as "answer" or "review_result".',
      );
    }
    return new OutputSchema(walkRoot(isZod(schema) ? fromZod(schema) : schema), name);
  }

  /** The data form, for crossing a thread boundary; rebuild it with `OutputSchema.of(json.schema, json.name)`. */
  toJSON(): { name: string; schema: JsonSchema } {
    return { name: this.name, schema: this.schema };
  }
}

function fromZod(schema: ZodOutputLike): unknown {
  try {
    // What a valid answer looks like once parsed: zod's output side. The dialect marker zod
    // adds says nothing the checker or a vendor uses, and would be sent with every request.
    const written = schema.toJSONSchema({ io: 'output' });
    if (isPlainObject(written) && typeof written.$schema === 'string') {
      const { $schema: _dialect, ...rest } = written;
      return rest;
    }
    return written;
  } catch (error) {
    throw new InvalidArgumentError(
      `OutputSchema.of: the zod schema cannot be written as JSON Schema (${(error as Error).message}); use types JSON Schema can say (no transforms, dates or functions).`,
    );
  }
}

function walkRoot(schema: unknown): JsonSchema {
  if (!isPlainObject(schema)) {
    throw new OutputSchemaError(
      'schema',
      '/',
      `output schema at /: must be a JSON object (a JSON Schema such as { "type": "object", ... }), got ${kindOf(schema)}. ` +
        'Pass the schema object itself.',
    );
  }
  return walkSchema(schema, '', true, new Set());
}

/**
 * Checks one schema node and returns its frozen copy. `at` is the pointer of the node, ''
 * for the root; pointers in errors are `at + '/' + keyword`, so the root's keywords read
 * `/type` and the root itself `/`.
 */
function walkSchema(node: Record<string, unknown>, at: string, root: boolean, ancestors: Set<object>): JsonSchema {
  ancestors.add(node);
  const copy: JsonSchema = {};
  for (const keyword of Object.keys(node)) {
    const value = node[keyword];
    const pointer = `${at}/${escapeToken(keyword)}`;
    if (!SUPPORTED.has(keyword) || (keyword === '$schema' && !root)) refuseKeyword(keyword, pointer, root);
    set(copy, keyword, walkKeyword(keyword, value, pointer, ancestors));
  }
  checkRanges(node, at);
  checkRequiredDeclared(node, at);
  ancestors.delete(node);
  return Object.freeze(copy);
}

function walkKeyword(keyword: string, value: unknown, pointer: string, ancestors: Set<object>): unknown {
  const wrong = (expected: string): never => {
    throw new OutputSchemaError(
      keyword,
      pointer,
      `output schema keyword "${keyword}" at ${pointer}: must be ${expected}, got ${kindOf(value)}. ` +
        `Fix the value, or remove "${keyword}".`,
    );
  };
  switch (keyword) {
    case 'type':
      return typeValue(value, pointer, wrong);
    case 'properties': {
      if (!isPlainObject(value)) return wrong('an object mapping property names to schemas');
      const copy: JsonSchema = {};
      for (const name of Object.keys(value)) {
        const at = `${pointer}/${escapeToken(name)}`;
        set(copy, name, subschema(keyword, value[name], at, ancestors));
      }
      return Object.freeze(copy);
    }
    case 'required':
      return requiredValue(value, pointer, wrong);
    case 'additionalProperties':
      if (typeof value === 'boolean') return value;
      if (!isPlainObject(value)) return wrong('true, false or a schema object');
      return subschema(keyword, value, pointer, ancestors);
    case 'items':
      if (Array.isArray(value)) {
        throw new OutputSchemaError(
          keyword,
          pointer,
          `output schema keyword "items" at ${pointer}: the tuple form (an array of schemas) is not supported. ` +
            'Use items with a single schema that every element must match.',
        );
      }
      if (!isPlainObject(value)) return wrong('a schema object');
      return subschema(keyword, value, pointer, ancestors);
    case 'anyOf': {
      if (!Array.isArray(value) || value.length === 0) return wrong('a non-empty array of schemas');
      return Object.freeze(
        value.map((item: unknown, index) => subschema(keyword, item, `${pointer}/${index}`, ancestors)),
      );
    }
    case 'enum':
      if (!Array.isArray(value) || value.length === 0) return wrong('a non-empty array of the allowed values');
      return jsonCopy(keyword, value, pointer, ancestors);
    case 'examples':
      if (!Array.isArray(value)) return wrong('an array of example values');
      return jsonCopy(keyword, value, pointer, ancestors);
    case 'const':
    case 'default':
      return jsonCopy(keyword, value, pointer, ancestors);
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      if (typeof value !== 'number' || !Number.isFinite(value)) {
        return wrong(
          typeof value === 'boolean'
            ? 'a number (the draft-4 boolean form is not supported: give the bound itself)'
            : 'a finite number',
        );
      }
      return value;
    case 'multipleOf':
      if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) return wrong('a number greater than 0');
      return value;
    case 'minLength':
    case 'maxLength':
    case 'minItems':
    case 'maxItems':
    case 'minProperties':
    case 'maxProperties':
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) return wrong('a whole number, 0 or more');
      return value;
    case 'uniqueItems':
      if (typeof value !== 'boolean') return wrong('true or false');
      return value;
    case 'pattern':
      return patternValue(value, pointer, wrong);
    case 'description':
    case 'title':
    case '$schema':
      if (typeof value !== 'string') return wrong('a string');
      return value;
    default:
      // Unreachable: walkSchema refused every keyword outside the subset.
      return refuseKeyword(keyword, pointer, false);
  }
}

/** `type`: one of the types, or a non-empty array of them, each listed once. */
function typeValue(value: unknown, pointer: string, wrong: (expected: string) => never): unknown {
  const keyword = 'type';
  if (typeof value === 'string') {
    if (!TYPES.has(value)) wrong(`one of ${[...TYPES].join(', ')} (or an array of them)`);
    return value;
  }
  if (!Array.isArray(value) || value.length === 0)
    wrong(`one of ${[...TYPES].join(', ')} or a non-empty array of them`);
  const types = value as unknown[];
  types.forEach((type, index) => {
    if (typeof type !== 'string' || !TYPES.has(type)) {
      throw new OutputSchemaError(
        keyword,
        `${pointer}/${index}`,
        `output schema keyword "type" at ${pointer}/${index}: ${JSON.stringify(type)} is not a type; ` +
          `use one of ${[...TYPES].join(', ')}.`,
      );
    }
    if (types.indexOf(type) !== index) {
      throw new OutputSchemaError(
        keyword,
        `${pointer}/${index}`,
        `output schema keyword "type" at ${pointer}/${index}: "${type}" is listed twice; list each type once.`,
      );
    }
  });
  return Object.freeze([...types]);
}

/** `required`: property names, each listed once. */
function requiredValue(value: unknown, pointer: string, wrong: (expected: string) => never): unknown {
  const keyword = 'required';
  if (!Array.isArray(value)) return wrong('an array of property names');
  value.forEach((name: unknown, index) => {
    if (typeof name !== 'string') {
      throw new OutputSchemaError(
        keyword,
        `${pointer}/${index}`,
        `output schema keyword "required" at ${pointer}/${index}: must be a property name (a string), got ${kindOf(name)}.`,
      );
    }
    if (value.indexOf(name) !== index) {
      throw new OutputSchemaError(
        keyword,
        `${pointer}/${index}`,
        `output schema keyword "required" at ${pointer}/${index}: "${name}" is listed twice; list each property once.`,
      );
    }
  });
  return Object.freeze([...(value as string[])]);
}

/** `pattern`: a regular expression valid with the 'u' flag, which the linear-time engine the check runs on can run. */
function patternValue(value: unknown, pointer: string, wrong: (expected: string) => never): unknown {
  const keyword = 'pattern';
  if (typeof value !== 'string') return wrong('a regular expression, as a string');
  try {
    // The 'u' flag is how the check compiles it, so a pattern valid only without it is refused here.
    new RegExp(value, 'u');
  } catch (error) {
    throw new OutputSchemaError(
      keyword,
      pointer,
      `output schema keyword "pattern" at ${pointer}: ${JSON.stringify(value)} is not a valid regular expression ` +
        `(${(error as Error).message}). Fix the expression, or remove "pattern".`,
    );
  }
  try {
    // And compiled as the check runs it, on the linear-time engine, so one it cannot run is refused now.
    linearRegExp(value, 'u');
  } catch (error) {
    if (!(error instanceof LinearPatternError)) throw error;
    throw new OutputSchemaError(
      keyword,
      pointer,
      `output schema keyword "pattern" at ${pointer}: ${error.message}. ${LINEAR_PATTERN_ADVICE}.`,
    );
  }
  return value;
}

function subschema(keyword: string, value: unknown, pointer: string, ancestors: Set<object>): JsonSchema {
  if (!isPlainObject(value)) {
    throw new OutputSchemaError(
      keyword,
      pointer,
      `output schema keyword "${keyword}" at ${pointer}: must be a schema object, got ${kindOf(value)}. ` +
        'Write the schema as an object, e.g. { "type": "string" } (boolean schemas are only accepted as additionalProperties).',
    );
  }
  if (ancestors.has(value)) {
    throw new OutputSchemaError(
      keyword,
      pointer,
      `output schema keyword "${keyword}" at ${pointer}: the schema contains itself, so it is not JSON. Write it out as a finite tree.`,
    );
  }
  return walkSchema(value, pointer, false, ancestors);
}

function refuseKeyword(keyword: string, pointer: string, root: boolean): never {
  if (keyword === '$schema' && !root) {
    throw new OutputSchemaError(
      keyword,
      pointer,
      `output schema keyword "$schema" at ${pointer}: is accepted at the root only. Remove it here.`,
    );
  }
  const instead = INSTEAD.get(keyword);
  throw new OutputSchemaError(
    keyword,
    pointer,
    `output schema keyword "${keyword}" at ${pointer} is not supported, and it would go unchecked if passed through. ` +
      `${instead ? `Remove it and ${instead}, or` : 'Remove it, or'} express the constraint with the supported keywords: ${SUPPORTED_LIST}.`,
  );
}

const RANGES: readonly [string, string][] = [
  ['minimum', 'maximum'],
  ['minLength', 'maxLength'],
  ['minItems', 'maxItems'],
  ['minProperties', 'maxProperties'],
];

/** A lower bound above its upper bound can never be met: the run would only spend its retries finding that out. */
function checkRanges(node: Record<string, unknown>, at: string): void {
  for (const [low, high] of RANGES) {
    const min = node[low];
    const max = node[high];
    if (typeof min === 'number' && typeof max === 'number' && min > max) {
      throw new OutputSchemaError(
        low,
        `${at}/${low}`,
        `output schema keyword "${low}" at ${at}/${low}: ${min} is above ${high} ${max}, so no answer can satisfy it. ` +
          `Lower "${low}" or raise "${high}".`,
      );
    }
  }
}

/** With additionalProperties false, a required name that is not declared can never be present. */
function checkRequiredDeclared(node: Record<string, unknown>, at: string): void {
  if (node.additionalProperties !== false || !Array.isArray(node.required)) return;
  const properties = isPlainObject(node.properties) ? node.properties : {};
  node.required.forEach((name: string, index) => {
    if (!Object.hasOwn(properties, name)) {
      throw new OutputSchemaError(
        'required',
        `${at}/required/${index}`,
        `output schema keyword "required" at ${at}/required/${index}: "${name}" is required but not in properties, ` +
          'and additionalProperties is false, so no answer can satisfy it. Declare it under properties, or drop it from required.',
      );
    }
  });
}

/** Copies a data value (enum, const, default, examples) and refuses anything JSON cannot carry. */
function jsonCopy(keyword: string, value: unknown, pointer: string, ancestors: Set<object>): unknown {
  const notJson = (at: string, what: string): never => {
    throw new OutputSchemaError(
      keyword,
      at,
      `output schema keyword "${keyword}" at ${at}: holds ${what}, which is not a JSON value. ` +
        'Use only null, booleans, finite numbers, strings, arrays and plain objects.',
    );
  };
  const copy = (item: unknown, at: string): unknown => {
    if (item === null || typeof item === 'string' || typeof item === 'boolean') return item;
    if (typeof item === 'number') return Number.isFinite(item) ? item : notJson(at, String(item));
    if (Array.isArray(item) || isPlainObject(item)) {
      if (ancestors.has(item)) return notJson(at, 'a value that contains itself');
      ancestors.add(item);
      let out: unknown;
      if (Array.isArray(item)) {
        out = Object.freeze(item.map((element: unknown, index) => copy(element, `${at}/${index}`)));
      } else {
        const record: JsonSchema = {};
        for (const key of Object.keys(item)) set(record, key, copy(item[key], `${at}/${escapeToken(key)}`));
        out = Object.freeze(record);
      }
      ancestors.delete(item);
      return out;
    }
    return notJson(at, kindOf(item));
  };
  return copy(value, pointer);
}

/** Defines rather than assigns, so a property named `__proto__` stays a property. */
function set(target: JsonSchema, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** RFC 6901: `~` becomes `~0` and `/` becomes `~1`. */
function escapeToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object')
    return isPlainObject(value) ? 'an object' : `a ${value.constructor?.name ?? 'non-plain object'}`;
  if (typeof value === 'string') return `the string ${JSON.stringify(value)}`;
  if (typeof value === 'number' || typeof value === 'boolean') return `${typeof value} ${String(value)}`;
  return typeof value === 'undefined' ? 'undefined' : `a ${typeof value}`;
}
