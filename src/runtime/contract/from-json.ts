/**
 * A contract read from JSON (a file, a request body, a stored spec): its shape checked on
 * a strict zod schema first, so a misspelt key or a value of the wrong kind is named, then
 * rebuilt through the same builders as one written in code, which check the rest (the
 * root exists, the budget is sane). Main thread only: agent threads never load zod.
 */
import { z } from 'zod';
import { InvalidArgumentError, shownValue } from '../../errors.js';
import { type ContractData, DEFAULT_RETRIES, TaskContract, Verification } from './contract.js';

const count = (name: string, min: number) =>
  z.custom<number>((value) => typeof value === 'number' && Number.isInteger(value) && value >= min, {
    error: (issue) => `${name} must be a whole number of at least ${min}, got ${shownValue(issue.input)}`,
  });
const text = (name: string) =>
  z.custom<string>((value) => typeof value === 'string', {
    error: (issue) => `${name} must be a string, got ${shownValue(issue.input)}`,
  });
const strings = (name: string) =>
  z.custom<string[]>((value) => Array.isArray(value) && value.every((item) => typeof item === 'string'), {
    error: (issue) => `${name} must be an array of strings, got ${shownValue(issue.input)}`,
  });
const object = (name: string, example: string) =>
  z.custom<Record<string, unknown>>((value) => typeof value === 'object' && value !== null && !Array.isArray(value), {
    error: (issue) => `${name} must be an object, e.g. ${example}, got ${shownValue(issue.input)}`,
  });

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
      provider: object('verification.provider', '{ "kind": "openai", "model": "gpt-4.1" }'),
      rubric: text('verification.rubric'),
    }),
  ],
  { error: "verification.kind must be 'none', 'command' or 'review'" },
);

const contractSchema = z.strictObject({
  goal: text('goal'),
  mode: z
    .custom<'workspace' | 'file'>((value) => value === 'workspace' || value === 'file', {
      error: (issue) => `mode must be 'workspace' or 'file', got ${shownValue(issue.input)}`,
    })
    .optional(),
  root: text('root'),
  file: text('file').nullable().optional(),
  verification: verification.optional(),
  outputSchema: z
    .strictObject({ name: text('outputSchema.name'), schema: object('outputSchema.schema', '{ "type": "object" }') })
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
  toolchain: object('toolchain', '{ "node": { "test": ["npm", "test"] } }').nullable().optional(),
  inheritedEnv: strings('inheritedEnv').optional(),
  system: text('system').nullable().optional(),
  planGate: z
    .custom<boolean>((value) => typeof value === 'boolean', {
      error: (issue) => `planGate must be true or false, got ${shownValue(issue.input)}`,
    })
    .optional(),
  escalation: z
    .strictObject({
      provider: object('escalation.provider', '{ "kind": "openai", "model": "gpt-4.1" }'),
      afterGateFailures: count('escalation.afterGateFailures', 1),
    })
    .nullable()
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
    const problems = parsed.error.issues.map((issue) => {
      if (issue.code === 'unrecognized_keys') {
        const at = issue.path.length > 0 ? `${issue.path.join('.')} has` : 'a contract has';
        return `${at} no ${issue.keys.map((key) => JSON.stringify(key)).join(', ')}`;
      }
      return issue.message;
    });
    throw new InvalidArgumentError(`${where}: ${problems.join('; ')}.`);
  }
  const given = parsed.data;
  const data: ContractData = {
    goal: given.goal,
    mode: given.mode ?? (given.file ? 'file' : 'workspace'),
    root: given.root,
    file: given.file ?? null,
    verification: (given.verification ?? { kind: 'none' }) as ContractData['verification'],
    outputSchema: given.outputSchema ?? null,
    toolMask: given.toolMask ?? [],
    budget: given.budget ?? {},
    retries: given.retries ?? DEFAULT_RETRIES,
    leaseTtlMs: given.leaseTtlMs ?? null,
    toolchain: (given.toolchain ?? null) as ContractData['toolchain'],
    ...(given.inheritedEnv ? { inheritedEnv: given.inheritedEnv } : {}),
    system: given.system ?? null,
    planGate: given.planGate ?? false,
    ...(given.escalation ? { escalation: given.escalation as unknown as ContractData['escalation'] } : {}),
  };
  // The criterion through its own builders, which check what the shape cannot.
  const gate = data.verification;
  if (gate.kind === 'command') {
    data.verification = Verification.command(gate.argv, {
      expectExit: gate.expectExit,
      timeoutSecs: gate.timeoutMs / 1000,
      outputLimitBytes: gate.outputLimit,
    });
  } else if (gate.kind === 'review') {
    data.verification = Verification.review(gate.provider, gate.rubric);
  }
  if (data.mode === 'file' && data.file === null) {
    throw new InvalidArgumentError(`${where}: a contract of mode 'file' names its file, e.g. "file": "src/app.js".`);
  }
  return TaskContract.from(data);
}
