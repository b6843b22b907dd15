/**
 * The check of a run's final answer against its declared {@link OutputSchema}.
 *
 * Why here and not at the vendor: OpenAI-shaped wires are sent the schema as
 * `response_format` with `strict: false`, Anthropic's wire is sent nothing, and no vendor's
 * word is taken for it. Every final answer is parsed and validated here, with ajv.
 *
 * This is the only module that loads ajv, which is a noticeable share of a thread's start
 * cost; the agent loop imports it lazily, only when a run declares a schema. The walker in
 * `output-schema.ts` stays free of it.
 */

import { createRequire } from 'node:module';
import type { Ajv, ErrorObject, ValidateFunction } from 'ajv';
import { ajvRegExp } from '../linear-regex.js';
import { type JsonSchema, OutputSchema } from './output-schema.js';

export type { JsonSchema } from './output-schema.js';

/** The outcome of {@link checkOutput}: the parsed value, or readable errors to re-prompt with. */
export type OutputCheck = { ok: true; value: unknown } | { ok: false; errors: string[] };

// ajv is CommonJS. Its named `Ajv` export is found by Node's CommonJS export detection and
// typed as the class, which the default import under NodeNext is not (it types as the namespace).
let ajv: Ajv | undefined;
/** Compiled validators by schema object: a declared schema is frozen, so identity is enough. */
const byObject = new WeakMap<object, ValidateFunction>();
/** Compiled validators by schema text, for equal schemas arriving as distinct objects (e.g. across a thread boundary). */
const byText = new Map<string, ValidateFunction>();
const BY_TEXT_LIMIT = 64;

/**
 * Parses `text` as a single JSON value and validates it against `schema`.
 *
 * The text is accepted trimmed, or as one fenced block (```json ... ``` or ``` ... ```)
 * when the whole text is just that block, because models often fence JSON even when told
 * not to. Anything else that does not parse is a failure whose error says to answer with
 * JSON alone. Validation errors read `<instance pointer>: <what is wrong>`, with `/` for the
 * answer itself, so they can be sent back to the model as they are.
 *
 * The schema is walked with {@link OutputSchema.of} the first time it is seen (so a schema
 * outside the subset throws `OutputSchemaError` rather than being half-checked), then
 * compiled once and cached.
 *
 * @example
 * const schema = OutputSchema.of({
 *   type: 'object',
 *   properties: { summary: { type: 'string' } },
 *   required: ['summary'],
 * }).schema;
 * checkOutput(schema, '```json\n{"summary":"ok"}\n```'); // { ok: true, value: { summary: 'ok' } }
 * checkOutput(schema, '{}'); // { ok: false, errors: ["/: must have required property 'summary'"] }
 * checkOutput(schema, 'Sure! Here it is.'); // { ok: false, errors: ['the answer is not JSON: ...'] }
 */
export function checkOutput(schema: JsonSchema, text: string): OutputCheck {
  const parsed = parseAnswer(text);
  if (!parsed.ok) return parsed;
  const validate = validatorFor(schema);
  if (validate(parsed.value)) return { ok: true, value: parsed.value };
  return { ok: false, errors: formatErrors(validate.errors ?? []) };
}

function parseAnswer(text: string): OutputCheck {
  const trimmed = text.trim();
  const fenced = /^```([^\n`]*)\r?\n([\s\S]*?)\r?\n?```$/.exec(trimmed);
  const info = fenced?.[1]?.trim().toLowerCase();
  const body = fenced && (info === '' || info === 'json') && !fenced[2]!.includes('```') ? fenced[2]! : trimmed;
  try {
    return { ok: true, value: JSON.parse(body) };
  } catch (error) {
    return {
      ok: false,
      errors: [
        `the answer is not JSON: ${(error as Error).message}. Answer with a single JSON value and nothing else.`,
      ],
    };
  }
}

function validatorFor(schema: JsonSchema): ValidateFunction {
  const known = byObject.get(schema);
  if (known) return known;
  const text = JSON.stringify(schema);
  let validate: ValidateFunction | undefined = byText.get(text);
  if (validate === undefined) {
    // Walk even a schema that was declared already: it is cheap once, and it means a schema
    // passed here directly cannot carry a keyword ajv would treat differently from the guide.
    const declared = OutputSchema.of(schema).schema;
    // `$schema` is informational (the subset means the same under every draft), and ajv
    // would refuse to compile a draft URI it has no meta-schema for.
    const { $schema: _ignored, ...rest } = declared;
    // A `pattern` runs on RE2's linear-time engine: the answer is the model's text, and on
    // the main thread (supervisor/output.ts) a backtracking pattern would stall every run.
    // Required on the first check, not with the module: a program that never checks an answer never loads ajv.
    ajv ??= new (createRequire(import.meta.url)('ajv') as typeof import('ajv')).Ajv({
      allErrors: true,
      strict: false,
      code: { regExp: ajvRegExp },
    });
    validate = ajv.compile(rest);
    if (byText.size >= BY_TEXT_LIMIT) byText.delete(byText.keys().next().value!);
    byText.set(text, validate);
  }
  // Only a frozen schema (a declared one) can be cached by identity; any other may change under us.
  if (Object.isFrozen(schema)) byObject.set(schema, validate);
  return validate;
}

function formatErrors(errors: readonly ErrorObject[]): string[] {
  const lines = errors.map((error) => `${error.instancePath || '/'}: ${describe(error)}`);
  return [...new Set(lines)];
}

function describe(error: ErrorObject): string {
  const message = error.message ?? `fails "${error.keyword}"`;
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'enum':
      return `${message}: ${(params.allowedValues as unknown[]).map((value) => JSON.stringify(value)).join(', ')}`;
    case 'const':
      return `${message}: ${JSON.stringify(params.allowedValue)}`;
    case 'additionalProperties':
      return `${message}: '${String(params.additionalProperty)}'`;
    default:
      return message;
  }
}
