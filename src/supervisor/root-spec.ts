/**
 * A new tree's root as run() is given it: checked before anything is stored, and the spec
 * stored for it (keys never stored: a spec names the variable a key is read from). Also the
 * providers a tree's runs will call, whose secrets this process holds before any is written.
 */

import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError } from '../errors.js';
import type { AgentDefinition } from '../runtime/agents.js';
import { type Ceilings, validateBudget } from '../runtime/budget.js';
import { type ContractData, TaskContract } from '../runtime/contract/contract.js';
import { OutputSchema } from '../runtime/contract/output-schema.js';
import { fileCode, keepCode, withLinks } from '../runtime/exec/containment/harness-code.js';
import { Policy } from '../runtime/policy/policy.js';
import { keyVariables, type ProviderSpec, redactSpec, specModel } from '../runtime/provider.js';
import { checkProviderSpec } from '../runtime/providers/builders.js';
import { holdSecrets, providerSecrets } from '../runtime/secrets.js';
import type { SkillData } from '../runtime/skills.js';
import { refuseWebFor } from '../runtime/web/web.js';
import { briefingFor } from '../runtime/workspace/session.js';
import type { RunSpec } from '../store/records.js';
import { RELEASE } from './fingerprint.js';
import type { RunOptions } from './supervisor.js';
import type { StoredTool } from './tree-host.js';

/** What run() was given for the root, checked. */
export interface CheckedRoot {
  task: string;
  /** The provider as handed in, keys included. */
  provider: ProviderSpec;
  /** The contract as data, for a workspace run. */
  data: ContractData | null;
  ceilings: Ceilings;
  /** The tree's policy: the one given, the default for a workspace run, none otherwise. */
  policy: Policy | null;
  /** A plain run's answer shape, walked (a contract's is in `data`). */
  outputSchema: { name: string; schema: Record<string, unknown> } | null;
}

/** The task, contract, policy, provider and ceilings run() was given, checked in that order. */
export function checkRoot(options: RunOptions): CheckedRoot {
  const contract = options?.contract ?? null;
  if (contract !== null && !(contract instanceof TaskContract)) {
    throw new InvalidArgumentError('run(): contract must be a TaskContract, e.g. TaskContract.workspace(goal, root).');
  }
  const task = options?.task ?? contract?.goal;
  if (typeof task !== 'string' || task.length === 0) {
    throw new InvalidArgumentError('run() needs a task: a non-empty string saying what the root agent is to do.');
  }
  if (options.policy !== undefined && !(options.policy instanceof Policy)) {
    throw new InvalidArgumentError(
      'run(): policy must be a Policy, e.g. Policy.default().layer("app").allowExec("npm test*").',
    );
  }
  const provider = checkProviderSpec(options.provider, 'run()');
  const data = contract?.toJSON() ?? null;
  if (data?.verification.kind === 'review') checkReviewer(data.verification.provider, provider);
  if (data?.escalation) checkEscalation(data);
  // Each model the tree may call must be able to carry the web settings, checked before anything is stored.
  refuseWebFor(provider, data?.web, 'run()');
  if (data?.escalation) refuseWebFor(data.escalation.provider, data.web, 'run() (the escalation provider)');
  const ceilings = validateBudget(
    data
      ? {
          ...options.budget,
          ...(data.budget.steps === undefined ? {} : { steps: data.budget.steps }),
          ...(data.budget.tokens === undefined ? {} : { tokens: data.budget.tokens }),
          ...(data.budget.wallSecs === undefined ? {} : { wallMs: Math.round(data.budget.wallSecs * 1000) }),
        }
      : options.budget,
    'run()',
  );
  const policy = options.policy ?? (contract ? Policy.default() : null);
  return { task, provider, data, ceilings, policy, outputSchema: plainShape(options, contract !== null) };
}

/** A plain run's `outputSchema`, walked now: a bad schema fails here, before anything is stored. */
function plainShape(options: RunOptions, contracted: boolean): CheckedRoot['outputSchema'] {
  const given = options.outputSchema;
  if (given === undefined) return null;
  if (contracted)
    throw new InvalidArgumentError(
      "run(): outputSchema is for a run without a contract; a contract says its answer's shape with contract.withOutputSchema(schema).",
    );
  const declared = given instanceof OutputSchema ? given : OutputSchema.of(given);
  const { name, schema } = declared.toJSON();
  return { name, schema: schema as Record<string, unknown> };
}

/** The root's spec as stored: what a resume, in this process or another, rebuilds the tree from. */
export function rootSpec(
  options: RunOptions,
  root: CheckedRoot,
  found: { skills: SkillData[]; agents: AgentDefinition[]; tools: StoredTool[] },
): RunSpec {
  const { data, policy } = root;
  const { skills, agents, tools } = found;
  return {
    // Keys stay in memory: the stored spec names the variable, never the key.
    provider: redactSpec(root.provider),
    system: options.system ?? data?.system ?? undefined,
    session: options.session,
    ...(options.history && options.history.length > 0 ? { history: options.history } : {}),
    ...(options.spawn === false ? { spawn: false } : {}),
    ...(skills.length > 0 ? { skills } : {}),
    ...(agents.length > 0 ? { agents } : {}),
    ...(options.reply === true ? { reply: true } : {}),
    ...(root.outputSchema ? { outputSchema: root.outputSchema } : {}),
    ...(data ? { contract: redactContract(data), briefing: briefingFor(data) } : {}),
    ...(policy ? { policy: policy.toJSON() } : {}),
    ...(tools.length > 0 ? { tools } : {}),
    release: RELEASE,
  };
}

/** The providers a contract names besides the tree's: its review gate's and its escalation's. */
export function contractProviders(data: ContractData | null | undefined): ProviderSpec[] {
  if (!data) return [];
  return [
    ...(data.verification.kind === 'review' ? [data.verification.provider] : []),
    ...(data.escalation ? [data.escalation.provider] : []),
  ];
}

/**
 * Holds the secrets of each spec in this thread (and, through the forwarding set up at
 * boot, in the store actor) before anything a run of them says is written: keys given or
 * read from their variables, credential headers, base URL credentials. And keeps the code
 * a spec names by path from runs.
 */
export function holdProviderSecrets(specs: readonly (ProviderSpec | null | undefined)[]): void {
  for (const spec of specs)
    if (spec && typeof spec === 'object') {
      holdSecrets(providerSecrets(spec));
      keepProviderCode(spec);
    }
}

/**
 * Keeps from runs the file of code a spec names by path (a module provider, an AI SDK
 * provider given as a file), which each agent's thread imports later, with the directory it
 * is in and the places its packages are found: no run may change them (see
 * src/runtime/exec/containment/harness-code.ts).
 */
function keepProviderCode(spec: ProviderSpec): void {
  if (spec.kind === 'fallback') for (const inner of spec.providers) keepProviderCode(inner);
  // A path, made absolute as the import makes it (from the working directory): a module
  // provider's is always one (but for a URL of another scheme); an AI SDK provider's when
  // it starts with a slash or file: (else it names a package, found in a kept node_modules).
  const named =
    spec.kind === 'module'
      ? spec.module
      : spec.kind === 'ai-sdk' && /^(\/|file:)/.test(spec.package)
        ? spec.package
        : null;
  if (named === null || (/^[a-z]+:/i.test(named) && !named.startsWith('file:'))) return;
  keepCode(withLinks(fileCode(named.startsWith('file:') ? fileURLToPath(named) : resolve(named))));
}

/** A contract as stored: a review gate's provider without its key. */
function redactContract(data: ContractData): ContractData {
  if (data.verification.kind !== 'review') return data;
  return { ...data, verification: { ...data.verification, provider: redactSpec(data.verification.provider) } };
}

/** An escalation needs a gate whose failures it counts, and retries left to use the stronger model. */
function checkEscalation(data: ContractData): void {
  const escalation = data.escalation;
  if (!escalation) return;
  if (data.verification.kind === 'none') {
    throw new InvalidArgumentError(
      'withEscalation moves to a stronger model after gate failures, and this contract has no gate: add withVerification(Verification.command(...)) or drop the escalation.',
    );
  }
  if (escalation.afterGateFailures > data.retries) {
    throw new InvalidArgumentError(
      `withEscalation: with ${data.retries} ${data.retries === 1 ? 'retry' : 'retries'} the run ends gate-failed before the stronger model gets a turn (it escalates after ${escalation.afterGateFailures} gate failures), so it would never escalate; raise withRetries to at least ${escalation.afterGateFailures} (the stronger model then has one try at the gate, and one more for each retry above that).`,
    );
  }
  if (data.verification.kind === 'review') checkReviewer(data.verification.provider, escalation.provider);
  // Found missing now, not after the gate failures that were paid for to get there.
  for (const name of keyVariables(escalation.provider)) {
    if (!process.env[name]) {
      throw new InvalidArgumentError(
        `withEscalation: the stronger model reads its key from ${name}, which is not set in this process; set it before run() (the agent threads take the environment when they start).`,
      );
    }
  }
}

/** A review gate refuses to review the model that wrote the change. */
function checkReviewer(reviewer: ProviderSpec, writer: ProviderSpec): void {
  const a = specModel(reviewer);
  if (a !== null && a === specModel(writer)) {
    throw new InvalidArgumentError(
      `Verification.review: the reviewer is the model that writes the change (${a}); a review by the same model proves little. Give the review another model.`,
    );
  }
}
