/**
 * What a language server answers, as built-in tools of a workspace run whose contract
 * names one (`withLsp`): `lsp_definition`, `lsp_references`, `lsp_symbols`, `lsp_hover`
 * and `lsp_rename`. The model names a file (by its path in the workspace) and a place in
 * it (1-based line and column); the server for that file's extension is asked.
 *
 * The path is a read check before the server is told anything of it, and the server's
 * start is an exec check of its argv (the command rules, the approver when the policy
 * asks), recorded with the first question for it. What an answer names in a file the
 * policy does not let be read outright is withheld, and counted. `lsp_rename` changes
 * nothing: it answers with one unified diff per file, for `patch_file`, and only for
 * files inside the workspace the policy lets be read.
 */
import { relative as relativeTo } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ArgumentSchema } from '../../arguments.js';
import { LspUnavailable } from '../../lsp/client.js';
import type { RunLanguageServers } from '../../lsp/run-servers.js';
import { checkArgv } from '../../policy/commands/index.js';
import { unifiedDiff } from '../../workspace/diffs.js';
import type { WorkspaceSession } from '../../workspace/session.js';
import type { StepContext, ToolResult } from '../tool.js';
import type { WorkspaceToolDeclaration } from './workspace.js';

export type LspToolName = 'lsp_definition' | 'lsp_references' | 'lsp_symbols' | 'lsp_hover' | 'lsp_rename';

/** The most bytes of a file a question may be about (the server is sent the whole text). */
const MAX_FILE_BYTES = 4 * 1024 * 1024;
/** The most locations one answer lists. */
const MAX_LOCATIONS = 200;
/** The most characters of a hover's text. */
const MAX_HOVER_CHARS = 8_000;
/** The most characters of a line's text or a symbol's name shown. */
const MAX_LINE_CHARS = 200;
/** The most characters of any one answer. */
const MAX_ANSWER_CHARS = 64_000;
/** The most files, and edits, a rename may change before it is refused as too wide to show. */
const MAX_RENAME_FILES = 100;
const MAX_RENAME_EDITS = 10_000;

const PATH: ArgumentSchema = {
  type: 'string',
  minLength: 1,
  maxLength: 4096,
  description: 'The file, relative to the workspace root.',
};
const LINE: ArgumentSchema = { type: 'integer', minimum: 1, description: 'The line, counting from 1.' };
const COLUMN: ArgumentSchema = {
  type: 'integer',
  minimum: 1,
  description: 'The column of a character of the name, counting from 1.',
};
const AT: ArgumentSchema = {
  type: 'object',
  properties: { path: PATH, line: LINE, column: COLUMN },
  required: ['path', 'line', 'column'],
  additionalProperties: false,
};

interface Position {
  line: number;
  character: number;
}
interface Range {
  start: Position;
  end: Position;
}
interface Location {
  uri: string;
  range: Range;
}
interface LocationLink {
  targetUri: string;
  targetSelectionRange?: Range;
  targetRange: Range;
}
interface TextEdit {
  range: Range;
  newText: string;
}

/** The five tools, declared. */
export const LSP_TOOLS: Record<LspToolName, WorkspaceToolDeclaration> = {
  lsp_definition: {
    description:
      "Where the name at a place in a file is defined, as the project's language server finds it: path:line:column of each definition.",
    parameters: AT,
    kind: 'reads',
    run: (session, args, call) =>
      question(session, args, call, 'textDocument/definition', atOf(args), async (answer, file) =>
        locations(session, call, file, toLocations(answer), 'definition'),
      ),
  },
  lsp_references: {
    description:
      'Every place the name at a place in a file is used (its declaration too), as path:line:column: the text of the line.',
    parameters: AT,
    kind: 'reads',
    run: (session, args, call) =>
      question(
        session,
        args,
        call,
        'textDocument/references',
        { ...atOf(args), context: { includeDeclaration: true } },
        async (answer, file) => locations(session, call, file, toLocations(answer), 'reference'),
      ),
  },
  lsp_symbols: {
    description: 'The symbols a file declares (functions, classes, methods, variables), nested, each with its line.',
    parameters: {
      type: 'object',
      properties: { path: PATH },
      required: ['path'],
      additionalProperties: false,
    },
    kind: 'reads',
    run: (session, args, call) =>
      question(session, args, call, 'textDocument/documentSymbol', {}, async (answer, file) => symbols(answer, file)),
  },
  lsp_hover: {
    description:
      'What the language server says of the name at a place in a file: its type, signature and documentation.',
    parameters: AT,
    kind: 'reads',
    run: (session, args, call) =>
      question(session, args, call, 'textDocument/hover', atOf(args), async (answer) => hover(answer)),
  },
  lsp_rename: {
    description:
      'Renames the name at a place in a file everywhere the language server finds it. Changes nothing: it answers with one unified diff per file, each to apply with patch_file.',
    parameters: {
      type: 'object',
      properties: {
        path: PATH,
        line: LINE,
        column: COLUMN,
        new_name: { type: 'string', minLength: 1, maxLength: 256, description: 'The new name.' },
      },
      required: ['path', 'line', 'column', 'new_name'],
      additionalProperties: false,
    },
    kind: 'reads',
    run: (session, args, call) =>
      question(session, args, call, 'textDocument/rename', { ...atOf(args), newName: args.new_name }, async (answer) =>
        renamed(session, call, answer),
      ),
  },
};

/** The LSP position of the model's 1-based line and column. */
function atOf(args: Record<string, unknown>): { position: Position } {
  return { position: { line: (args.line as number) - 1, character: (args.column as number) - 1 } };
}

/** The file a question is about: its path in the workspace, where it is, and its text. */
interface Asked {
  relative: string;
  absolute: string;
  text: string;
}

/**
 * One question about the file at `args.path`: the path checked as a read, the server's
 * start as a command, the file's text read and sent, the server asked, and its answer
 * made into what the model reads by `answer`.
 */
async function question(
  session: WorkspaceSession,
  args: Record<string, unknown>,
  call: StepContext,
  method: string,
  params: Record<string, unknown>,
  answer: (value: unknown, file: Asked) => Promise<ToolResult>,
): Promise<ToolResult> {
  const servers = session.lsp;
  if (!servers) return { content: 'this run has no language server.', isError: true };
  const resolved = session.workspace.resolve(args.path as string);
  if (!resolved.ok) return resolved.result;
  const relative = resolved.relative;
  const index = servers.indexFor(relative);
  if (index < 0)
    return {
      content: `no language server of this run answers for ${relative}; they answer for ${servers.extensions.join(', ')} files.`,
      isError: true,
    };
  const refused = await call.authorize({ kind: 'read', path: relative });
  if (refused) return refused;
  if (servers.whyNot) return { content: servers.whyNot, isError: true };
  const client = servers.client(index);
  const started = await startChecked(session, servers, index, call);
  if (started) return started;
  if (servers.whyNot) return { content: servers.whyNot, isError: true };
  const current = session.workspace.current(relative);
  if (!current.ok) return current.result;
  if (current.content === null) return { content: `there is no file ${relative}.`, isError: true };
  if (current.content.length > MAX_FILE_BYTES)
    return {
      content: `${relative} is ${current.content.length} bytes, above the ${MAX_FILE_BYTES} a language server question may send; use grep.`,
      isError: true,
    };
  const file = { relative, absolute: resolved.absolute, text: current.content.toString('utf8') };
  try {
    // An answer can span files: the server is told of every file it was sent as it is now first.
    await client.refresh((absolute) => (absolute === file.absolute ? file.text : textOf(session, absolute)));
    const value = await client.ask<unknown>(method, file.absolute, file.text, params);
    const result = await answer(value, file);
    return result.content.length > MAX_ANSWER_CHARS
      ? {
          ...result,
          content: `${result.content.slice(0, MAX_ANSWER_CHARS)}\n(the answer was cut at ${MAX_ANSWER_CHARS} characters)`,
        }
      : result;
  } catch (error) {
    if (error instanceof LspUnavailable) return { content: error.message, isError: true };
    const message = (error as { message?: string }).message ?? String(error);
    return { content: `the language server ${client.name} could not answer: ${message}`, isError: true };
  }
}

/** The text of a workspace file as it is now (by name, no link followed), or null. */
function textOf(session: WorkspaceSession, absolute: string): string | null {
  const shown = relativeTo(session.contract.root, absolute);
  if (shown === '' || shown.startsWith('..')) return null;
  const current = session.workspace.current(shown);
  return current.ok && current.content !== null && current.content.length <= MAX_FILE_BYTES
    ? current.content.toString('utf8')
    : null;
}

/** At most {@link MAX_LINE_CHARS} of `text`. */
function clipped(text: string): string {
  return text.length > MAX_LINE_CHARS ? `${text.slice(0, MAX_LINE_CHARS)}…` : text;
}

/** Server `index`'s start as the command it is, decided and recorded at its first question; null when it may start. */
async function startChecked(
  session: WorkspaceSession,
  servers: RunLanguageServers,
  index: number,
  call: StepContext,
): Promise<ToolResult | null> {
  const client = servers.client(index);
  if (client.authorized) return null;
  if (call.planning) {
    const reason = `${client.name} is started at the first question for it, which waits for an approved plan: this run is in its planning phase; use grep and read_file, then call submit_plan.`;
    return { content: reason, isError: true, refusal: { rule: 'plan-gate', reason } };
  }
  const argv = servers.server(index).command;
  const root = session.contract.root;
  const refused = await call.authorizeCommand({ kind: 'exec', argv, cwd: root }, checkArgv(argv, session.policy, root));
  if (refused) return refused;
  client.authorized = true;
  return null;
}

/** `answer` (a Location, a list of them, or of LocationLinks) as locations. */
function toLocations(answer: unknown): Location[] {
  const list = Array.isArray(answer) ? answer : answer ? [answer] : [];
  return list.flatMap((item: Location | LocationLink) => {
    if (item && typeof item === 'object' && 'targetUri' in item)
      return [{ uri: item.targetUri, range: item.targetSelectionRange ?? item.targetRange }];
    if (item && typeof item === 'object' && 'uri' in item && 'range' in item) return [item];
    return [];
  });
}

/** Where a URI the server named is: its path for the model (workspace-relative inside it), or null when it is not a file. */
function placeOf(session: WorkspaceSession, uri: string): { shown: string; absolute: string; inside: boolean } | null {
  if (!uri.startsWith('file:')) return null;
  let absolute: string;
  try {
    absolute = fileURLToPath(uri);
  } catch {
    return null;
  }
  const inside = relativeTo(session.contract.root, absolute);
  const within = inside !== '' && !inside.startsWith('..') && !inside.startsWith('/');
  return { shown: within ? inside : absolute, absolute, inside: within };
}

/** Locations, each as path:line:column (and its line's text), those the policy does not let be read withheld. */
async function locations(
  session: WorkspaceSession,
  call: StepContext,
  file: Asked,
  found: Location[],
  what: 'definition' | 'reference',
): Promise<ToolResult> {
  const lines: string[] = [];
  let withheld = 0;
  const texts = new Map<string, string[] | null>([[file.relative, linesOf(file.text)]]);
  for (const location of found.slice(0, MAX_LOCATIONS)) {
    const place = placeOf(session, location.uri);
    if (!place || call.decide({ kind: 'read', path: place.inside ? place.shown : place.absolute }) !== 'allow') {
      withheld++;
      continue;
    }
    const line = location.range.start.line;
    let text: string | undefined;
    if (place.inside) {
      if (!texts.has(place.shown)) {
        const current = session.workspace.current(place.shown);
        texts.set(
          place.shown,
          current.ok && current.content && current.content.length <= MAX_FILE_BYTES
            ? linesOf(current.content.toString('utf8'))
            : null,
        );
      }
      text = texts.get(place.shown)?.[line]?.trim();
    }
    lines.push(`${place.shown}:${line + 1}:${location.range.start.character + 1}${text ? `: ${clipped(text)}` : ''}`);
  }
  const more = found.length > MAX_LOCATIONS ? found.length - MAX_LOCATIONS : 0;
  const notes = [
    ...(withheld > 0 ? [`${withheld} ${what}${withheld === 1 ? '' : 's'} withheld by the policy`] : []),
    ...(more > 0 ? [`${more} more not listed`] : []),
  ];
  if (lines.length === 0)
    return {
      content: `no ${what} found${notes.length > 0 ? ` (${notes.join('; ')})` : ''}.`,
      isError: false,
    };
  return { content: [...lines, ...(notes.length > 0 ? [`(${notes.join('; ')})`] : [])].join('\n'), isError: false };
}

const SYMBOL_KINDS = [
  '',
  'file',
  'module',
  'namespace',
  'package',
  'class',
  'method',
  'property',
  'field',
  'constructor',
  'enum',
  'interface',
  'function',
  'variable',
  'constant',
  'string',
  'number',
  'boolean',
  'array',
  'object',
  'key',
  'null',
  'enum member',
  'struct',
  'event',
  'operator',
  'type parameter',
];

interface SymbolNode {
  name: string;
  kind: number;
  range?: Range;
  selectionRange?: Range;
  location?: Location;
  children?: SymbolNode[];
}

/** A file's symbols, nested by indentation, each `kind name (line N)`. */
async function symbols(answer: unknown, file: Asked): Promise<ToolResult> {
  const lines: string[] = [];
  const walk = (nodes: SymbolNode[], depth: number) => {
    for (const node of nodes) {
      if (lines.length >= MAX_LOCATIONS) return;
      const range = node.selectionRange ?? node.range ?? node.location?.range;
      const at = range ? ` (line ${range.start.line + 1})` : '';
      lines.push(`${'  '.repeat(depth)}${SYMBOL_KINDS[node.kind] ?? 'symbol'} ${clipped(String(node.name))}${at}`);
      if (Array.isArray(node.children)) walk(node.children, depth + 1);
    }
  };
  walk(Array.isArray(answer) ? (answer as SymbolNode[]) : [], 0);
  return { content: lines.length > 0 ? lines.join('\n') : `${file.relative} declares no symbols.`, isError: false };
}

/** A hover's text: its markup or marked strings, joined. */
async function hover(answer: unknown): Promise<ToolResult> {
  const contents = (answer as { contents?: unknown } | null)?.contents;
  const part = (item: unknown): string =>
    typeof item === 'string'
      ? item
      : item && typeof item === 'object' && 'value' in item
        ? String((item as { value: unknown }).value)
        : '';
  const text = (Array.isArray(contents) ? contents.map(part).join('\n\n') : part(contents)).trim();
  if (text === '') return { content: 'the language server has nothing to say about that place.', isError: false };
  return {
    content: text.length > MAX_HOVER_CHARS ? `${text.slice(0, MAX_HOVER_CHARS)}\n(shortened)` : text,
    isError: false,
  };
}

/** Where each line of `text` starts, its breaks as LSP counts them: \r\n, \n and a lone \r. */
function lineStarts(text: string): number[] {
  const starts = [0];
  for (let at = 0; at < text.length; at++) {
    const code = text.charCodeAt(at);
    if (code === 13 && text.charCodeAt(at + 1) === 10) at++;
    if (code === 10 || code === 13) starts.push(at + 1);
  }
  return starts;
}

/** The lines of `text`, broken as {@link lineStarts} breaks them, without their breaks. */
function linesOf(text: string): string[] {
  const starts = lineStarts(text);
  return starts.map((start, index) => text.slice(start, starts[index + 1] ?? text.length).replace(/\r?\n$|\r$/, ''));
}

/**
 * The offset in `text` of an LSP position (the character a UTF-16 index, as JavaScript's);
 * null when it is not in the text (a line past its end, a negative number), which no
 * patch may be made from.
 */
function offsetOf(text: string, starts: readonly number[], position: Position): number | null {
  const { line, character } = position;
  if (!Number.isInteger(line) || !Number.isInteger(character) || line < 0 || character < 0) return null;
  const start = starts[line];
  if (start === undefined) return null;
  const next = starts[line + 1];
  const end = next === undefined ? text.length : next - (text[next - 2] === '\r' && text[next - 1] === '\n' ? 2 : 1);
  // Past the line's end is its end, as the protocol says.
  return Math.min(start + character, end);
}

/** `edits` applied to `text` (each on the text as it was), or null when one is outside it or two overlap. */
function applied(text: string, edits: readonly TextEdit[]): string | null {
  const starts = lineStarts(text);
  const placed: { start: number; end: number; newText: string; order: number }[] = [];
  for (const [order, edit] of edits.entries()) {
    const start = offsetOf(text, starts, edit.range.start);
    const end = offsetOf(text, starts, edit.range.end);
    if (start === null || end === null || end < start || typeof edit.newText !== 'string') return null;
    placed.push({ start, end, newText: edit.newText, order });
  }
  // In the text's order; edits at one place keep the order the server gave them.
  placed.sort((a, b) => a.start - b.start || a.end - b.end || a.order - b.order);
  const parts: string[] = [];
  let at = 0;
  for (const edit of placed) {
    if (edit.start < at) return null;
    parts.push(text.slice(at, edit.start), edit.newText);
    at = edit.end;
  }
  parts.push(text.slice(at));
  return parts.join('');
}

/** A rename's edits as one unified diff per file, for patch_file; files outside the workspace or unreadable withheld. */
async function renamed(session: WorkspaceSession, call: StepContext, answer: unknown): Promise<ToolResult> {
  const edit = (answer ?? {}) as {
    changes?: Record<string, TextEdit[]>;
    documentChanges?: ({ textDocument: { uri: string }; edits: TextEdit[] } | { kind: string; uri?: string })[];
  };
  const byUri = new Map<string, TextEdit[]>();
  const operations: string[] = [];
  // documentChanges where the server sent them (this client says it takes them), else changes: never both.
  if (!edit.documentChanges)
    for (const [uri, edits] of Object.entries(edit.changes ?? {}))
      byUri.set(uri, [...(byUri.get(uri) ?? []), ...edits]);
  for (const change of edit.documentChanges ?? []) {
    if ('textDocument' in change)
      byUri.set(change.textDocument.uri, [...(byUri.get(change.textDocument.uri) ?? []), ...change.edits]);
    else operations.push(`${change.kind} ${change.uri ?? ''}`.trim());
  }
  if (byUri.size === 0) return { content: 'the language server found nothing to rename there.', isError: true };
  const edits = [...byUri.values()].reduce((sum, list) => sum + list.length, 0);
  if (byUri.size > MAX_RENAME_FILES || edits > MAX_RENAME_EDITS)
    return {
      content: `the rename would change ${edits} places in ${byUri.size} files, more than the ${MAX_RENAME_EDITS} places in ${MAX_RENAME_FILES} files one answer shows; rename in parts, or with edit_file.`,
      isError: true,
    };
  const patches: string[] = [];
  let withheld = 0;
  for (const [uri, edits] of [...byUri.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const place = placeOf(session, uri);
    if (!place?.inside || call.decide({ kind: 'read', path: place.shown }) !== 'allow') {
      withheld++;
      continue;
    }
    const current = session.workspace.current(place.shown);
    if (!current.ok || current.content === null) {
      withheld++;
      continue;
    }
    const before = current.content.toString('utf8');
    const after = applied(before, edits);
    if (after === null)
      return {
        content: `the language server's rename does not fit ${place.shown} as it is now (an edit outside the file, or two that overlap); nothing was changed. Ask again.`,
        isError: true,
      };
    patches.push(`path: ${place.shown}\n${unifiedDiff(place.shown, before, after)}`);
  }
  const notes = [
    ...(withheld > 0
      ? [
          `${withheld} file${withheld === 1 ? '' : 's'} the rename also changes ${withheld === 1 ? 'is' : 'are'} withheld (outside the workspace, or not readable under the policy): the rename is not complete without ${withheld === 1 ? 'it' : 'them'}`,
        ]
      : []),
    ...(operations.length > 0
      ? [`the server also asked for file operations this tool does not make: ${operations.join(', ')}`]
      : []),
  ];
  const head = `Apply each patch with patch_file (path and patch as given); nothing has been changed yet. ${patches.length} file${patches.length === 1 ? '' : 's'}:`;
  return {
    content: [head, ...patches, ...(notes.length > 0 ? [`(${notes.join('; ')})`] : [])].join('\n\n'),
    isError: false,
  };
}
