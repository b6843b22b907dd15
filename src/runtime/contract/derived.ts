/**
 * What is derived from a contract for the run's other parts: the system block's part for
 * the repository's guidance, and the key variables its commands must not inherit.
 */
import { keyVariables, type ProviderSpec } from '../provider.js';
import type { ContractData, InstructionFile } from './contract.js';

/** The system block's part for a repository's guidance: each file under its name, marked as the repository's own. */
export function guidanceBlock(files: readonly InstructionFile[]): string {
  return [
    'The repository carries its own guidance for agents working in it. Follow it where it does not conflict with the task or with what you may do:',
    // The text cannot close its own block: the markers stay the runtime's.
    ...files.map(
      (file) =>
        `<guidance source="${file.source.replace(/["<>\n]/g, '_')}">\n${file.text.replace(/<(\/?)guidance/gi, '<$1guidance\u200b')}\n</guidance>`,
    ),
  ].join('\n\n');
}

/**
 * The environment variables holding the keys of every model a contract's run may call (the
 * tree's, a review gate's, the escalation's): commands and the gate must not inherit them.
 */
export function contractSecrets(contract: ContractData, provider: ProviderSpec): string[] {
  const inherited = new Set(contract.inheritedEnv ?? []);
  return [
    ...(contract.scrubbedEnv ?? []).filter((name) => !inherited.has(name)),
    ...keyVariables(provider),
    ...(contract.verification.kind === 'review' ? keyVariables(contract.verification.provider) : []),
    ...(contract.escalation ? keyVariables(contract.escalation.provider) : []),
  ];
}
