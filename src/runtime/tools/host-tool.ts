/**
 * The embedder's own tools: `tool({ name, description, parameters, execute, effect })`.
 * A tool runs on the main thread, where it was declared; agents reach it over the host
 * channel. Its parameters are a zod schema (converted once to JSON Schema for the wire by
 * zod's own converter) or a JSON Schema; the arguments a model sends are validated here
 * before `execute` is called, and a bad call, a throw or an oversized result is an
 * observation the model reads, never an exception in the tree.
 *
 * This module is for the main thread only: agent threads never load zod.
 */
import { createRequire } from 'node:module';
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { Ajv2020 } from 'ajv/dist/2020.js';
import { toJSONSchema, z } from 'zod';
import { InvalidArgumentError } from '../../errors.js';
import { oneOf, problemsOf, quotedKeys } from '../edges.js';
import {
  attachedName,
  checkImage,
  type ImageAttachment,
  imageBytes,
  imageLine,
  MAX_IMAGES_PER_RESULT,
  MAX_RESULT_IMAGE_BYTES,
} from '../images.js';
import { ajvRegExp, LINEAR_PATTERN_ADVICE, LinearPatternError } from '../linear-regex.js';
import { BUILT_IN_TOOL_NAMES } from './names.js';
import { type ToolDefinitionData, type ToolEffect, type ToolFailure, toolFailure } from './tool.js';

export type { ToolDefinitionData, ToolEffect } from './tool.js';

/** What a tool's `execute` is told about the call. */
export interface ToolCallContext {
  rootId: string;
  runId: string;
  /** The calling agent's address in its tree. */
  address: string;
  callId: string;
  /** Fires when the tree is cancelled or the supervisor closes. */
  signal: AbortSignal;
}

/** A zod schema, as far as this module needs one (zod 4). */
interface ZodLike<Args> {
  safeParse(value: unknown): { success: true; data: Args } | { success: false; error: { issues: ZodIssue[] } };
  _zod: unknown;
}
interface ZodIssue {
  path: PropertyKey[];
  message: string;
}

export interface ToolDeclaration<Args = Record<string, unknown>> {
  /** Letters, digits, `_` and `-`, at most 64 characters; not a built-in tool's name. */
  name: string;
  /** What the tool does and when to use it, for the model. */
  description: string;
  /** A zod object schema, or a JSON Schema of an object. */
  parameters: ZodLike<Args> | Record<string, unknown>;
  /** `acts` (the default) or `reads`; see {@link ToolEffect}. */
  effect?: ToolEffect;
  /**
   * The family a run with tool tiers (`withToolTiers()`) offers it in only after the model
   * calls `expand_tools(family)`; absent, it is offered from the first step. Letters,
   * digits, `_` and `-`; `core` is the name of the tools offered from the start.
   */
  family?: string;
  /**
   * Runs the tool. A string result is the observation; a {@link ToolOutput} is its text
   * with images attached; anything else is sent as JSON.
   */
  execute(args: Args, context: ToolCallContext): unknown;
}

/** An image a tool hands back: its type, and its bytes (or their base64). */
export interface ToolImage {
  mimeType: string;
  data: string | Uint8Array;
}

/**
 * A tool's result with images: `return new ToolOutput('the page', { images: [{ mimeType:
 * 'image/png', data: png }] })`. The model reads the text and sees the images (PNG, JPEG,
 * GIF or WebP, at most 5 MiB and 8000 pixels a side, four a result; any other is a line of
 * the text saying why it is not attached). Images are kept in the trace with the observation.
 */
export class ToolOutput {
  readonly text: string;
  readonly images: readonly ToolImage[];
  constructor(text: string, options: { images?: readonly ToolImage[] } = {}) {
    if (typeof text !== 'string') throw new InvalidArgumentError('ToolOutput: text must be a string.');
    if (options.images !== undefined && !Array.isArray(options.images))
      throw new InvalidArgumentError('ToolOutput: images must be an array of { mimeType, data }.');
    this.text = text;
    this.images = options.images ?? [];
  }
}

/** What a call gives back: the observation's text, and the images it attaches. */
export interface ToolCallResult {
  content: string;
  isError: boolean;
  images?: ImageAttachment[];
  /** Set when the tool's function threw: its class, message and stack. */
  error?: ToolFailure;
}

/** The most characters of a tool's result an observation keeps; the rest is cut, saying so. */
export const MAX_TOOL_RESULT_CHARS = 32 * 1024;
/** An observation names at most this many problems with a call's arguments. */
const SHOWN_PROBLEMS = 10;

const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const FAMILY = /^[A-Za-z0-9_-]{1,32}$/;

/** A declaration's shape, checked before its schema is converted; the name's checks come first, so later messages can name it. */
const declarationSchema = z.strictObject({
  name: z.custom<string>((value) => typeof value === 'string' && NAME.test(value), {
    error: (issue) => `the name must be 1 to 64 letters, digits, _ or -, got ${JSON.stringify(issue.input)}`,
  }),
  description: z.custom<string>((value) => typeof value === 'string' && value.trim() !== '', {
    error: 'the description must be a non-empty string; the model reads it',
  }),
  parameters: z.custom<object>((value) => typeof value === 'object' && value !== null, {
    error: 'parameters must be a zod object schema or a JSON Schema object',
  }),
  effect: oneOf<ToolEffect>('effect', ['reads', 'acts'], "'reads' or 'acts'").optional(),
  family: z
    .custom<string>((value) => typeof value === 'string' && FAMILY.test(value) && value !== 'core', {
      error: (issue) =>
        `family must be 1 to 32 letters, digits, _ or - and not "core" (the tools offered from the start), got ${JSON.stringify(issue.input)}`,
    })
    .optional(),
  execute: z.custom<(...args: never[]) => unknown>((value) => typeof value === 'function', {
    error: 'execute must be a function',
  }),
});

function checkDeclaration(declaration: unknown): void {
  if (typeof declaration !== 'object' || declaration === null) {
    throw new InvalidArgumentError('tool() needs { name, description, parameters, execute }.');
  }
  const parsed = declarationSchema.safeParse(declaration);
  if (parsed.success) return;
  const name = (declaration as { name?: unknown }).name;
  const where = typeof name === 'string' && NAME.test(name) ? `tool(${name})` : 'tool()';
  const problems = problemsOf(
    parsed.error,
    (keys) =>
      `a tool has no ${quotedKeys(keys)} (it is declared with name, description, parameters, effect, family and execute${keys.includes('inputSchema') ? '; its schema goes in parameters' : ''})`,
  );
  throw new InvalidArgumentError(`${where}: ${problems.join('; ')}.`);
}

/**
 * One of the embedder's tools, declared with {@link tool} and checked: its wire definition
 * computed once, its validator compiled once. Named for where it runs, on the host (the
 * main thread) of the tree; the runtime's own tools are declarations of another type, run
 * on the agents' threads. Hand it to `Supervisor.start`, `run`, `runWith` or `resume` as `tools`.
 *
 * @example
 * const lookup: HostTool<{ id: string }> = tool({
 *   name: 'lookup_order',
 *   description: 'Looks up an order by its id.',
 *   parameters: z.object({ id: z.string() }),
 *   effect: 'reads',
 *   execute: ({ id }) => orders.get(id) ?? `no order ${id}`,
 * });
 */
export class HostTool<Args = Record<string, unknown>> {
  readonly definition: ToolDefinitionData;
  readonly #validate: (args: unknown) => { ok: true; value: unknown } | { ok: false; problems: string[] };
  readonly #execute: (args: Args, context: ToolCallContext) => unknown;

  constructor(declaration: ToolDeclaration<Args>) {
    checkDeclaration(declaration);
    const { name, description, parameters, execute } = declaration;
    const effect = declaration.effect ?? 'acts';
    if (BUILT_IN_TOOL_NAMES.has(name)) {
      throw new InvalidArgumentError(`tool(): ${name} is the name of a built-in tool; give yours another name.`);
    }
    const schema = isZod(parameters)
      ? zodToWire(name, parameters)
      : checkJsonSchema(name, parameters as Record<string, unknown>);
    this.definition = Object.freeze({
      name,
      description,
      parameters: schema,
      effect,
      ...(declaration.family ? { family: declaration.family } : {}),
    });
    this.#validate = isZod(parameters) ? zodValidator(parameters) : jsonValidator(name, schema);
    this.#execute = execute;
  }

  get name(): string {
    return this.definition.name;
  }

  /**
   * Calls the tool with what the model sent: validated first, its result bounded. Never
   * throws: a bad call and a failure are observations.
   */
  async call(args: unknown, context: ToolCallContext): Promise<ToolCallResult> {
    const name = this.definition.name;
    const checked = this.#validate(args);
    if (!checked.ok) return { content: this.#invalid(checked.problems), isError: true };
    let result: unknown;
    try {
      // zod's parse: its defaults and transforms applied.
      result = await this.#execute(checked.value as Args, context);
    } catch (error) {
      const failure = toolFailure(error);
      return {
        content: bounded(name, `${name} failed: ${failure.message}`),
        isError: true,
        error: failure,
      };
    }
    if (result instanceof ToolOutput) return withImages(name, result);
    let text: string;
    try {
      text = typeof result === 'string' ? result : result === undefined ? '(no result)' : JSON.stringify(result);
    } catch (error) {
      return {
        content: bounded(name, `${name} returned a value that is not JSON: ${(error as Error).message}`),
        isError: true,
      };
    }
    if (text === undefined) text = String(result);
    return { content: bounded(name, text), isError: false };
  }

  /** The observation a call with `args` gets when they are not valid for this tool, or null when they are. */
  check(args: unknown): string | null {
    const checked = this.#validate(args);
    return checked.ok ? null : this.#invalid(checked.problems);
  }

  /** What is wrong with a call's arguments: at most ten problems, then how many more. */
  #invalid(problems: string[]): string {
    const name = this.definition.name;
    const more = problems.length > SHOWN_PROBLEMS ? `; and ${problems.length - SHOWN_PROBLEMS} more` : '';
    return bounded(
      name,
      `the arguments to ${name} are not valid: ${problems.slice(0, SHOWN_PROBLEMS).join('; ')}${more}. Call it again with arguments that match its parameters.`,
    );
  }
}

/**
 * A result with images: each checked (the ones that are not attached become lines of the
 * text, saying why), at most {@link MAX_IMAGES_PER_RESULT} attached, the text bounded.
 */
function withImages(name: string, output: ToolOutput): ToolCallResult {
  const images: ImageAttachment[] = [];
  const lines: string[] = [];
  // Looked at up to a bound, so a result of ten thousand images costs what one of a few does.
  const looked = output.images.slice(0, IMAGES_LOOKED_AT);
  let total = 0;
  for (const given of looked) {
    const checked = checkImage(given?.mimeType, given?.data);
    if ('refused' in checked) {
      lines.push(checked.refused);
      continue;
    }
    const bytes = imageBytes(checked.image.data);
    const note =
      images.length >= MAX_IMAGES_PER_RESULT
        ? `not attached: a result attaches at most ${MAX_IMAGES_PER_RESULT} images`
        : total + bytes > MAX_RESULT_IMAGE_BYTES
          ? `not attached: a result attaches at most ${MAX_RESULT_IMAGE_BYTES / 1024 / 1024} MiB of images`
          : 'attached';
    if (note === 'attached') {
      images.push(checked.image);
      total += bytes;
    }
    lines.push(imageLine(attachedName(checked), bytes, note));
  }
  const rest = output.images.length - looked.length;
  if (rest > 0) lines.push(`[${rest} more images, not attached: a result attaches at most ${MAX_IMAGES_PER_RESULT}]`);
  // The lines about the images are kept whole; the text is cut to leave them room.
  const tail = lines.join('\n');
  const text = bounded(name, output.text, MAX_TOOL_RESULT_CHARS - tail.length - 1);
  const content = [text, tail].filter((part) => part !== '').join('\n');
  return { content, isError: false, ...(images.length > 0 ? { images } : {}) };
}

/** A result's images looked at before the rest are counted in one line. */
const IMAGES_LOOKED_AT = 16;

/** An observation of a tool, cut at {@link MAX_TOOL_RESULT_CHARS}, saying how much was cut. */
function bounded(name: string, text: string, limit = MAX_TOOL_RESULT_CHARS): string {
  if (text.length <= limit) return text;
  const cut = text.length - limit;
  return `${text.slice(0, limit)}\n(${cut} more characters of ${name}'s result were not kept)`;
}

/** Declares a tool of the embedder's own; hand it to `Supervisor.start`, `run`, `runWith` or `resume` as `tools`. */
export function tool<Args = Record<string, unknown>>(declaration: ToolDeclaration<Args>): HostTool<Args> {
  return new HostTool(declaration);
}

/** Checks a list of tools handed in as `tools`, and that no two share a name. */
export function checkTools(tools: unknown, where: string): HostTool<never>[] {
  if (tools === undefined) return [];
  if (!Array.isArray(tools)) throw new InvalidArgumentError(`${where}: tools must be an array of tool(...) values.`);
  const seen = new Set<string>();
  for (const item of tools) {
    if (!(item instanceof HostTool)) {
      throw new InvalidArgumentError(`${where}: every entry of tools must be made with tool({ ... }).`);
    }
    if (seen.has(item.name)) throw new InvalidArgumentError(`${where}: two tools are named ${item.name}.`);
    seen.add(item.name);
  }
  return tools as HostTool<never>[];
}

function isZod(value: object): value is ZodLike<never> {
  return '_zod' in value && typeof (value as { safeParse?: unknown }).safeParse === 'function';
}

function zodToWire(name: string, schema: ZodLike<unknown>): Record<string, unknown> {
  let converted: Record<string, unknown>;
  try {
    converted = toJSONSchema(schema as never) as Record<string, unknown>;
  } catch (error) {
    throw new InvalidArgumentError(
      `tool(${name}): its zod schema cannot be written as JSON Schema (${(error as Error).message}); use types JSON Schema can say.`,
    );
  }
  const { $schema: _dialect, ...wire } = converted;
  if (wire.type !== 'object') {
    throw new InvalidArgumentError(`tool(${name}): parameters must be an object schema (z.object({ ... })).`);
  }
  return wire;
}

function zodValidator(schema: ZodLike<unknown>) {
  return (args: unknown): { ok: true; value: unknown } | { ok: false; problems: string[] } => {
    const parsed = schema.safeParse(args);
    if (parsed.success) return { ok: true, value: parsed.data };
    return {
      ok: false,
      problems: parsed.error.issues.map((issue) => {
        const at = issue.path.length === 0 ? '(the arguments)' : issue.path.map(String).join('.');
        return `${at}: ${issue.message}`;
      }),
    };
  };
}

function checkJsonSchema(name: string, schema: Record<string, unknown>): Record<string, unknown> {
  if (schema.type !== 'object') {
    throw new InvalidArgumentError(`tool(${name}): a JSON Schema for parameters must have type "object".`);
  }
  try {
    return JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
  } catch (error) {
    throw new InvalidArgumentError(`tool(${name}): parameters is not JSON (${(error as Error).message}).`);
  }
}

let sharedAjv: Ajv2020 | null = null;

function newAjv(): Ajv2020 {
  // Patterns (`pattern`, `patternProperties`) run on RE2's linear-time engine: the arguments
  // are the model's, checked on the main thread, where a backtracking pattern would stop
  // every run of the process. See linear-regex.ts. Required with the first tool, not with
  // this module: a program with no tools of its own never loads ajv.
  const { Ajv2020: Validator } = createRequire(import.meta.url)(
    'ajv/dist/2020.js',
  ) as typeof import('ajv/dist/2020.js');
  return new Validator({
    allErrors: true,
    strictSchema: true,
    strictTypes: false,
    strictTuples: false,
    code: { regExp: ajvRegExp },
  });
}

function jsonValidator(name: string, schema: Record<string, unknown>) {
  // JSON Schema 2020-12, the dialect the vendors' tool definitions follow. An unknown
  // keyword is refused, not ignored: the model would be shown a constraint nothing checks.
  // One shared instance (building one costs milliseconds: a catalogue of 200 MCP tools paid
  // seconds), forgetting each schema once compiled; a schema with an $id gets one of its
  // own, so two tools may use one $id.
  sharedAjv ??= newAjv();
  const ajv = JSON.stringify(schema).includes('"$id"') ? newAjv() : sharedAjv;
  let validate: ValidateFunction;
  try {
    validate = ajv.compile(schema);
  } catch (error) {
    if (error instanceof LinearPatternError) {
      throw new InvalidArgumentError(`tool(${name}): in its parameters, ${error.message}. ${LINEAR_PATTERN_ADVICE}.`, {
        details: { tool: name, pattern: error.pattern },
      });
    }
    throw new InvalidArgumentError(
      `tool(${name}): parameters is not a usable JSON Schema (2020-12): ${(error as Error).message}.`,
    );
  } finally {
    if (ajv === sharedAjv) ajv.removeSchema(schema);
  }
  return (args: unknown): { ok: true; value: unknown } | { ok: false; problems: string[] } => {
    if (validate(args)) return { ok: true, value: args };
    return { ok: false, problems: (validate.errors ?? []).map(ajvProblem) };
  };
}

function ajvProblem(error: ErrorObject): string {
  const missing = error.keyword === 'required' ? (error.params as { missingProperty?: string }).missingProperty : null;
  const path = error.instancePath.replace(/^\//, '').split('/').filter(Boolean).join('.');
  const at = missing ? (path ? `${path}.${missing}` : missing) : path || '(the arguments)';
  return `${at}: ${missing ? 'is required' : error.message}`;
}
