/**
 * Contracts read from JSON: the shape is checked on a strict zod schema (a key a contract
 * does not have is named, a value of the wrong kind says what it must be), then rebuilt
 * through the same builders as a contract written in code.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { contractFromJSON, HarnessError, InvalidArgumentError, TaskContract, Verification } from '../dist/index.js';

let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'io-harness-contract-json-'));
});
afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

function refused(json: unknown, code = 'INVALID_ARGUMENT'): string {
  try {
    contractFromJSON(json);
  } catch (error) {
    expect(HarnessError.isInstance(error) && error.code).toBe(code);
    if (code === 'INVALID_ARGUMENT') expect(error).toBeInstanceOf(InvalidArgumentError);
    return (error as Error).message;
  }
  throw new Error('the contract was accepted');
}

describe('contracts from JSON', () => {
  it('rebuild the contract they were written from, and fill what they leave out as the builders do', () => {
    const written = TaskContract.workspace('the tests fail; fix them', root)
      .withVerification(Verification.command(['node', '--test'], { timeoutSecs: 30 }))
      .withBudget({ steps: 40, tokens: 100_000 })
      .withRetries(1)
      .withToolMask(['exec']);
    expect(contractFromJSON(JSON.stringify(written.toJSON())).toJSON()).toEqual(written.toJSON());
    expect(contractFromJSON({ goal: 'fix it', root }).toJSON()).toEqual(
      TaskContract.workspace('fix it', root).toJSON(),
    );
  });

  it('name a key a contract does not have, at any depth, and every wrong value at once', () => {
    expect(refused({ goal: 'fix it', root, budjet: { steps: 5 } })).toBe(
      'contractFromJSON: a contract has no "budjet".',
    );
    expect(refused({ goal: 'fix it', root, budget: { step: 5 } })).toBe('contractFromJSON: budget has no "step".');
    const several = refused({ goal: 7, root, retries: -1, budget: { steps: 0 }, verification: { kind: 'shell' } });
    expect(several).toContain('goal must be a string, got 7');
    expect(several).toContain('retries must be a whole number of at least 0, got -1');
    expect(several).toContain('budget.steps must be a whole number of at least 1, got 0');
    expect(several).toContain("verification.kind must be 'none', 'command' or 'review'");
  });

  it('check what the shape cannot through the builders, and refuse text that is not JSON', () => {
    expect(
      refused({
        goal: 'fix it',
        root,
        verification: { kind: 'command', argv: [], expectExit: 0, timeoutMs: 1000, outputLimit: 4096 },
      }),
    ).toMatch(/Verification\.command needs an argv/);
    expect(refused({ goal: 'fix it', root: join(root, 'missing') }, 'WORKSPACE_NOT_FOUND')).toMatch(/does not exist/);
    expect(refused('{ "goal": "fix it", ')).toMatch(/^contractFromJSON: the text is not JSON/);
    expect(refused([1, 2])).toBe('contractFromJSON: a contract is a JSON object, got [1,2].');
  });
});
