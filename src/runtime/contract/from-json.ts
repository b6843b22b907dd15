/**
 * A contract read from JSON (a file, a request body, a stored spec): its shape checked on
 * a strict zod schema first, so a misspelt key or a value of the wrong kind is named, then
 * rebuilt through the same builders as one written in code, which check the rest (the
 * root exists, the budget is sane). Main thread only: agent threads never load zod.
 */
import { z } from 'zod';
import { InvalidArgumentError, shownValue } from '../../errors.js';
import { oneOf, plainObject, problemsOf, quotedKeys, strings, text, wholeNumber } from '../edges.js';
import type { LspServerData } from '../lsp/servers.js';
import type { ProviderSpec } from '../provider.js';
import { type ContractInput, TaskContract, Verification } from './contract.js';

const count = wholeNumber;

const verification = z.discriminatedUnion(
  'kind',
  [
    z.strictObject({ kind: z.literal('none') }),
    z.strictObject({
      kind: z.literal('command'),
      argv: strings('verification.argv'),
      expectExit: count('verification.expectExit', 0),
      timeoutMs: count('verification.timeoutMs', 1),
      outputLimit: count('verification.outputLimit', 1),
    }),
    z.strictObject({
      kind: z.literal('review'),
      provider: plainObject('verification.provider', '{ "kind": "openai", "model": "gpt-4.1" }'),
      rubric: text('verification.rubric'),
    }),
  ],
  { error: "verification.kind must be 'none', 'command' or 'review'" },
);

const contractSchema = z.strictObject({
  goal: text('goal'),
  mode: oneOf('mode', ['workspace', 'file'], "'workspace' or 'file'").optional(),
  root: text('root'),
  file: text('file').nullable().optional(),
  verification: verification.optional(),
  outputSchema: z
    .strictObject({
      name: text('outputSchema.name'),
      schema: plainObject('outputSchema.schema', '{ "type": "object" }'),
    })
    .nullable()
    .optional(),
  toolMask: strings('toolMask').optional(),
  budget: z
    .strictObject({
      steps: count('budget.steps', 1).optional(),
      tokens: count('budget.tokens', 1).optional(),
      wallSecs: z
        .custom<number>((value) => typeof value === 'number' && value > 0, {
          error: (issue) => `budget.wallSecs must be a number of seconds above 0, got ${shownValue(issue.input)}`,
        })
        .optional(),
    })
    .optional(),
  retries: count('retries', 0).optional(),
  leaseTtlMs: count('leaseTtlMs', 1).nullable().optional(),
  toolchain: plainObject('toolchain', '{ "node": { "test": ["npm", "test"] } }').nullable().optional(),
  inheritedEnv: strings('inheritedEnv').optional(),
  scrubbedEnv: strings('scrubbedEnv').optional(),
  // Checked again, file by file, by withInstructions.
  instructions: z.array(z.unknown()).optional(),
  bundleProblems: z.array(z.unknown()).optional(),
  system: text('system').nullable().optional(),
  planGate: z
    .custom<boolean>((value) => typeof value === 'boolean', {
      error: (issue) => `planGate must be true or false, got ${shownValue(issue.input)}`,
    })
    .optional(),
  toolTiers: z
    .custom<boolean>((value) => typeof value === 'boolean', {
      error: (issue) => `toolTiers must be true or false, got ${shownValue(issue.input)}`,
    })
    .optional(),
  git: z
    .custom<boolean>((value) => typeof value === 'boolean', {
      error: (issue) => `git must be true or false, got ${shownValue(issue.input)}`,
    })
    .optional(),
  // Checked server by server by withLsp.
  lsp: z
    .custom<LspServerData[]>((value) => Array.isArray(value), {
      error: (issue) =>
        `lsp must be a list of servers like [{ "command": ["typescript-language-server", "--stdio"], "extensions": [".ts"] }], got ${shownValue(issue.input)}`,
    })
    .optional(),
  // Checked again, option by option, by withWeb, withBrowser, withCodeAct, withContext and withMemory.
  web: plainObject('web', '{ "search": true, "allowedHosts": ["nodejs.org"] }').optional(),
  browser: plainObject('browser', '{ "timeoutSecs": 30 }').optional(),
  codeact: plainObject('codeact', '{ "languages": ["python"], "maxActs": 100 }').optional(),
  documents: plainObject('documents', '{ "formats": ["xlsx", "pdf"] }').optional(),
  context: plainObject('context', '{ "share": 0.8, "snip": true }').optional(),
  memory: plainObject('memory', '{ "cap": 64 }').optional(),
  escalation: z
    .strictObject({
      provider: plainObject('escalation.provider', '{ "kind": "openai", "model": "gpt-4.1" }'),
      afterGateFailures: count('escalation.afterGateFailures', 1),
    })
    .nullable()
    .optional(),
  sandbox: z
    .strictObject({
      access: z
        .custom<'read-only' | 'workspace-write' | 'full'>(
          (value) => value === 'read-only' || value === 'workspace-write' || value === 'full',
          {
            error: (issue) =>
              `sandbox.access must be "read-only", "workspace-write" or "full", got ${shownValue(issue.input)}`,
          },
        )
        .optional(),
      writableRoots: strings('sandbox.writableRoots').optional(),
      sharedCaches: z
        .boolean({ error: (issue) => `sandbox.sharedCaches must be true or false, got ${shownValue(issue.input)}` })
        .optional(),
      rung: z
        .custom<'bubblewrap' | 'landlock' | 'namespaces' | 'floor'>(
          (value) => value === 'bubblewrap' || value === 'landlock' || value === 'namespaces' || value === 'floor',
          {
            error: (issue) =>
              `sandbox.rung must be "bubblewrap", "landlock", "namespaces" or "floor", got ${shownValue(issue.input)}`,
          },
        )
        .nullable()
        .optional(),
      caps: z
        .strictObject({
          memoryBytes: count('sandbox.caps.memoryBytes', 1).optional(),
          cpuSecs: count('sandbox.caps.cpuSecs', 1).optional(),
          processes: count('sandbox.caps.processes', 1).optional(),
          fileBytes: count('sandbox.caps.fileBytes', 1).nullable().optional(),
          writtenBytes: count('sandbox.caps.writtenBytes', 1).nullable().optional(),
          outputBytes: count('sandbox.caps.outputBytes', 1).optional(),
          wallSecs: count('sandbox.caps.wallSecs', 1).optional(),
        })
        .optional(),
    })
    .optional(),
});

/**
 * Rebuilds a contract from JSON: the text of one, or the parsed value (what
 * `contract.toJSON()` gives, with every key but goal and root optional). Refuses, naming
 * every problem, a key a contract does not have or a value of the wrong kind.
 *
 * @example
 * const contract = contractFromJSON(readFileSync('contract.json', 'utf8'));
 */
export function contractFromJSON(json: unknown): TaskContract {
  const where = 'contractFromJSON';
  let value = json;
  if (typeof json === 'string') {
    try {
      value = JSON.parse(json);
    } catch (error) {
      throw new InvalidArgumentError(`${where}: the text is not JSON (${(error as Error).message}).`);
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidArgumentError(`${where}: a contract is a JSON object, got ${shownValue(value)}.`);
  }
  const parsed = contractSchema.safeParse(value);
  if (!parsed.success) {
    const problems = problemsOf(
      parsed.error,
      (keys, path) => `${path.length > 0 ? `${path.join('.')} has` : 'a contract has'} no ${quotedKeys(keys)}`,
    );
    throw new InvalidArgumentError(`${where}: ${problems.join('; ')}.`);
  }
  const given = parsed.data;
  if (given.mode === 'file' && !given.file) {
    throw new InvalidArgumentError(`${where}: a contract of mode 'file' names its file, e.g. "file": "src/app.js".`);
  }
  // The criterion through its own builders, which check what the shape cannot.
  const gate = given.verification;
  const verification =
    gate?.kind === 'command'
      ? Verification.command(gate.argv, {
          expectExit: gate.expectExit,
          timeoutSecs: gate.timeoutMs / 1000,
          outputLimitBytes: gate.outputLimit,
        })
      : gate?.kind === 'review'
        ? Verification.review(gate.provider as unknown as ProviderSpec, gate.rubric)
        : undefined;
  return TaskContract.from({
    ...given,
    ...(verification ? { verification } : {}),
    toolchain: given.toolchain as ContractInput['toolchain'],
    escalation: given.escalation as unknown as ContractInput['escalation'],
  } as ContractInput);
}
