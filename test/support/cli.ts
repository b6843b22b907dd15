/** `npx io-harness` as a test runs it: the package's bin in a child process of its own, to its end. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { CallbackApprover, OpenAI, Policy, runWith, Session, type Store, TaskContract } from '../../dist/index.js';
import type { PostgresStore } from '../../dist/store/postgres/index.js';
import { assistantTurns, ScriptedModelServer } from '../../dist/testing/index.js';
import { later, setEnv } from './workspace.js';

export const BIN = fileURLToPath(new URL('../../bin/io-harness.mjs', import.meta.url));

export interface Ran {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI as a child process, to its end. */
export function cli(args: string[], env: Record<string, string> = {}, cwd = process.cwd()): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** The command's --json output, parsed; its stderr shown when it failed. */
export const json = <T>(ran: Ran): T => {
  expect(ran.stderr === '' || ran.status === 0, ran.stderr).toBe(true);
  return JSON.parse(ran.stdout) as T;
};

/**
 * What the command-line and copy tests read back, made by real runs on `store` over a model
 * on loopback: a workspace run that rewrote notes.txt in `repo`, one paused on an approval
 * (to run `node --version`), and a session's one turn. The model's key is read from
 * `apiKeyEnv`, set for the test (a process it starts that resumes the paused run inherits it).
 */
export async function workspaceRuns(store: Store | PostgresStore, repo: string, apiKeyEnv = 'CLI_TEST_MODEL_KEY') {
  setEnv({ [apiKeyEnv]: 'unused' });
  const server = await ScriptedModelServer.start((call) => {
    const task = String(call.body.messages.find((message) => message.role === 'user')?.content ?? '');
    const turn = assistantTurns(call);
    if (task.startsWith('edit'))
      return turn === 0
        ? { toolCalls: [{ name: 'write_file', args: { path: 'notes.txt', content: 'ship today\n' } }] }
        : { text: 'notes.txt says ship today' };
    if (task.startsWith('version'))
      return turn === 0 ? { toolCalls: [{ name: 'exec', args: { argv: ['node', '--version'] } }] } : { text: 'ran it' };
    return { text: 'hello' };
  });
  later(() => server.close());
  const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKeyEnv });
  const policy = Policy.default().layer('app').allowWrite('notes.txt');
  const edited = await runWith(TaskContract.workspace('edit the notes', repo), provider, store, policy);
  expect(edited.outcome.kind).toBe('finished');
  const paused = await runWith(
    TaskContract.workspace('version of node', repo),
    provider,
    store,
    Policy.default(),
    new CallbackApprover(() => 'defer'),
  );
  expect(paused.outcome.kind).toBe('paused');
  const session = await Session.open(store, repo);
  await session.turn('say hello', { provider, policy });
  return { provider, policy, edited, paused, session };
}
