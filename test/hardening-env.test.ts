/**
 * The environment a command gets is built from an allow-list: whatever the harness's
 * own variables are called, a command, the checker after a write and the command gate
 * (in the run and in retryGate) see only the allow-list and the names the contract
 * declared, and never the run's key variables, even when declared.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ErrorCode, Policy, retryGate, runWith, TaskContract, Verification } from '../dist/index.js';
import { tempStorePath } from './support/processes.js';
import { openStore, serve, setEnv, tempWorkspace, thrown, turns } from './support/workspace.js';

/** Variables of the harness that no command may see, under names no deny-list would catch. */
const HELD = {
  MYSERVICE_AUTH: 'svc-auth-7f3a91',
  ZEBRA: 'zebra-stripes-4410',
  DATABASE_URL: 'postgres://user:pa55w0rd@db/x',
  // The tree's own key variable, declared below: still withheld.
  IO_HARNESS_TEST_TREE_AUTH: 'sk-tree-c0ffee77',
};
const DECLARED = { IO_HARNESS_TEST_DECLARED: 'declared-visible-5521' };

function storeBytes(path: string): string {
  return [path, `${path}-wal`]
    .filter((file) => existsSync(file))
    .map((file) => readFileSync(file).toString('latin1'))
    .join('');
}

describe('an environment built from an allow-list', () => {
  it('gives commands, the checker and the gate none of the harness variables but the declared ones', async () => {
    // Set before the run starts: an agent's thread takes a copy of process.env when it is created.
    setEnv({ ...HELD, ...DECLARED });
    const root = tempWorkspace({ 'package.json': '{ "name": "tiny" }\n' });
    const path = tempStorePath();
    const store = await openStore(path);
    const { provider } = await serve(
      turns([
        { text: 'env', toolCalls: [{ name: 'exec', args: { argv: ['env'] } }] },
        { text: 'printenv', toolCalls: [{ name: 'exec', args: { argv: ['printenv'] } }] },
        { text: 'shell', toolCalls: [{ name: 'shell', args: { command: 'env | sort' } }] },
        { text: 'write', toolCalls: [{ name: 'write_file', args: { path: 'a.txt', content: 'a\n' } }] },
        { text: 'done' },
      ]),
    );
    const tree = { ...provider, apiKey: undefined, apiKeyEnv: 'IO_HARNESS_TEST_TREE_AUTH' };
    const printEnv = ['sh', '-c', 'env; exit 3'];
    const contract = TaskContract.workspace('look around', root)
      .withInheritedEnv(['IO_HARNESS_TEST_DECLARED', 'IO_HARNESS_TEST_TREE_AUTH'])
      .withToolchain({ node: { check: printEnv } })
      .withVerification(Verification.command(printEnv))
      .withRetries(0);
    const result = await runWith(contract, tree, store, Policy.permissive());
    expect(result.outcome.kind).toBe('gate-failed');
    expect(await retryGate(store, result.runId)).toMatchObject({ verdict: 'failed' });

    const observations = store.steps(result.runId).flatMap((step) => step.observations.map((o) => o.content));
    const outputs = store
      .events(result.runId)
      .filter((event) => event.type === 'gate-output')
      .map((event) => event.stdout);
    expect(outputs).toHaveLength(2);
    // Each command printed the environment it got: the declared name and the allow-list are there.
    const printed = [...observations.slice(0, 4), ...outputs];
    for (const text of printed) {
      expect(text).toContain(`IO_HARNESS_TEST_DECLARED=${DECLARED.IO_HARNESS_TEST_DECLARED}`);
      expect(text).toContain(`PATH=${process.env.PATH}`);
    }
    expect(observations[3]).toContain('check: sh -c env; exit 3 exited with status 3');
    const bytes = storeBytes(path);
    for (const [name, value] of Object.entries(HELD)) {
      for (const text of printed) {
        expect(text).not.toContain(value);
        expect(text).not.toContain(`${name}=`);
      }
      expect(bytes).not.toContain(value);
    }
    // The declaration is stored with the contract, so a resumed run keeps it.
    const stored = store.spec(result.runId) as { contract: { inheritedEnv?: string[] } };
    expect(stored.contract.inheritedEnv).toEqual(['IO_HARNESS_TEST_DECLARED', 'IO_HARNESS_TEST_TREE_AUTH']);
  });

  it('refuses a declaration that is not a variable name, saying what to pass', () => {
    const root = tempWorkspace();
    const contract = TaskContract.workspace('look around', root);
    for (const bad of ['DATABASE_URL=postgres://x', 'AWS_*', '1ST', '', 'A B']) {
      const error = thrown(() => contract.withInheritedEnv([bad]));
      expect(error.code).toBe(ErrorCode.InvalidArgument);
      expect(error.message).toContain(`withInheritedEnv: ${JSON.stringify(bad)} is not a variable name`);
    }
    expect(thrown(() => contract.withInheritedEnv('ZEBRA' as unknown as string[])).code).toBe(
      ErrorCode.InvalidArgument,
    );
    const kept = TaskContract.from(contract.withInheritedEnv(['ZEBRA', 'ZEBRA', 'ALPHA']).toJSON());
    expect(kept.toJSON().inheritedEnv).toEqual(['ALPHA', 'ZEBRA']);
  });
});
