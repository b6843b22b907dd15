/**
 * Helpers the workspace tests share: a cleanup list run after each test, temp workspaces,
 * stores, the scripted model server answering turn by turn, a driver process run to its
 * end, and catching an error to look at its code.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, expect } from 'vitest';
import { type HarnessError, type HttpProviderSpec, Store, Supervisor } from '../../dist/index.js';
import { assistantTurns, type ModelScript, ScriptedModelServer } from '../../dist/testing/index.js';
import { Driver, type DriverConfig, tempStorePath } from './processes.js';

type Step = () => Promise<void> | void;
const steps: Step[] = [];

/** Runs `step` after the current test, newest first. */
export function later(step: Step): void {
  steps.push(step);
}

// Every step runs, even after one that throws (a close that failed must not leave a variable
// of the environment set for the next test); what they threw is thrown after.
afterEach(async () => {
  const errors: unknown[] = [];
  for (const step of steps.splice(0).reverse()) {
    try {
      await step();
    } catch (error) {
      errors.push(error);
    }
  }
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) throw new AggregateError(errors, `${errors.length} steps after the test failed`);
});

/** Sets variables of this process's environment for the test, put back as they were after it. */
export function setEnv(values: Record<string, string>): void {
  for (const [name, value] of Object.entries(values)) {
    const before = process.env[name];
    process.env[name] = value;
    later(() => {
      if (before === undefined) delete process.env[name];
      else process.env[name] = before;
    });
  }
}

/** A temp directory holding `files`, removed after the test. */
export function tempWorkspace(files: Record<string, string> = {}, prefix = 'io-harness-ws-'): string {
  const root = mkdtempSync(join(tmpdir(), prefix));
  later(() => rmSync(root, { recursive: true, force: true }));
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, name)), { recursive: true });
    writeFileSync(join(root, name), content);
  }
  return root;
}

export async function openStore(path = tempStorePath()): Promise<Store> {
  const store = await Store.open(path);
  later(() => store.close());
  return store;
}

export type Answer = Awaited<ReturnType<ModelScript>>;

/** Answers from a list by turn; the last repeats. */
export function turns(list: Answer[]): ModelScript {
  return (call) => list[Math.min(assistantTurns(call), list.length - 1)] as Answer;
}

/** The task of the agent a call comes from: its first user turn (OpenAI wire). */
export function taskOf(call: Parameters<ModelScript>[0]): string {
  const messages = (call.body as { messages: { role: string; content: unknown }[] }).messages;
  return String(messages.find((message) => message.role === 'user')?.content ?? '');
}

/** The scripted model server on loopback, and an OpenAI-wire provider for it. */
export async function serve(
  script: ModelScript,
  model = 'gpt-scripted',
): Promise<{ server: ScriptedModelServer; provider: HttpProviderSpec }> {
  const server = await ScriptedModelServer.start(script);
  later(() => server.close());
  return {
    server,
    provider: { kind: 'openai', model, baseUrl: `${server.url}/v1`, apiKey: 'k', retry: { baseDelayMs: 1 } },
  };
}

/** A driver process run to its exit. */
export async function drive(config: DriverConfig): Promise<Driver> {
  const driver = new Driver(config);
  await driver.exited;
  return driver;
}

export function thrown(fn: () => unknown): HarnessError {
  try {
    fn();
  } catch (error) {
    return error as HarnessError;
  }
  throw new Error('expected an error');
}

/** {@link thrown} for a call that may answer with a promise (a PostgreSQL store's): its error, thrown or rejected. */
export async function failure(fn: () => unknown): Promise<HarnessError> {
  try {
    await fn();
  } catch (error) {
    return error as HarnessError;
  }
  throw new Error('expected an error');
}

/**
 * Runs `code` (an ES module's text) in a node process of its own, to its exit, and returns
 * what it printed. A file, not --input-type=module -e: the worker threads it starts
 * inherit the process's flags. `started` is told its pid.
 */
export async function runScript(code: string, started: (pid: number) => void = () => undefined): Promise<string> {
  const file = join(tempWorkspace(), 'script.mjs');
  writeFileSync(file, code);
  const child = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'pipe'] });
  started(child.pid as number);
  let out = '';
  child.stdout.on('data', (chunk) => {
    out += chunk;
  });
  child.stderr.on('data', (chunk) => {
    out += chunk;
  });
  await once(child, 'exit');
  return out;
}

/** A store and a supervisor on it, both closed after the test. */
export async function supervisorOnStore(options: Parameters<typeof Supervisor.start>[1] = {}) {
  const store = await Store.open(tempStorePath());
  const supervisor = await Supervisor.start(store, options);
  later(async () => {
    await supervisor.close();
    store.close();
  });
  return { store, supervisor };
}

/**
 * Drives a tree to its end in a driver process: killed with SIGKILL at `killAt` (a store
 * write, as the driver's `killAt` names it) and resumed in a second process, or run whole
 * when `killAt` is null. Asserts that it finished; returns the tree's root id.
 */
export async function driveKilledOrWhole(
  base: Omit<DriverConfig, 'mode' | 'killAt' | 'rootId'>,
  killAt: string | null,
): Promise<string> {
  const first = new Driver({ ...base, mode: 'run', ...(killAt ? { killAt } : {}) } as DriverConfig);
  later(() => {
    first.child.kill('SIGKILL');
  });
  const exited = await first.exited;
  if (killAt) {
    expect(exited.signal).toBe('SIGKILL');
    const second = new Driver({ ...base, mode: 'resume', rootId: first.rootId as string } as DriverConfig);
    await second.exited;
    expect(second.result?.status, second.stderr).toBe('finished');
  } else expect(first.result?.status, first.stderr).toBe('finished');
  return first.rootId as string;
}

/** The requests a scripted model logged, one JSON line each (see scripts/context.mjs). */
export function loggedRequests<T = { fold: boolean; messages: { role: string; content: unknown }[] }>(
  log: string,
): T[] {
  return readFileSync(log, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as T);
}
