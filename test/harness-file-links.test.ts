/**
 * The harness's own file operations follow no link a command planted: a directory swapped
 * for a link to `.git` between a check and an act (by a real process racing the file tools
 * and the rewinds, over thousands of swaps, and deterministically at each component) never
 * carries a write or a delete into `.git`, and every refusal names its rule.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  HarnessError,
  type HttpProviderSpec,
  Policy,
  rewind,
  rewindRun,
  runWith,
  type Store,
  TaskContract,
} from '../dist/index.js';
import { type FileChange, Workspace } from '../dist/runtime/workspace/files.js';
import { assistantTurns, type ModelScript, ScriptedModelServer } from '../dist/testing/index.js';
import { later, openStore, tempWorkspace } from './support/workspace.js';

/** What a fake repository's `.git` holds: files whose names a run's writes into `docs/` could land on. */
const GIT_FILES: Record<string, string> = {
  '.git/HEAD': 'ref: refs/heads/main\n',
  '.git/config': '[core]\n\tbare = false\n',
  '.git/description': 'the repository\n',
  '.git/hooks/pre-commit': '#!/bin/sh\nexit 0\n',
  '.git/c/f.txt': 'inside git\n',
};

/** Every entry under `base`, links not followed: its kind and, for a file, a hash of its bytes. */
function listing(base: string): Record<string, string> {
  const out: Record<string, string> = {};
  const visit = (directory: string, prefix: string) => {
    for (const name of readdirSync(directory).sort()) {
      const path = join(directory, name);
      const relative = prefix ? `${prefix}/${name}` : name;
      const stats = lstatSync(path);
      if (stats.isSymbolicLink()) out[relative] = `link ${readlinkSync(path)}`;
      else if (stats.isDirectory()) {
        out[relative] = 'dir';
        visit(path, relative);
      } else out[relative] = `file ${createHash('sha256').update(readFileSync(path)).digest('hex')}`;
    }
  };
  visit(base, '');
  return out;
}

function repository(files: Record<string, string> = {}): string {
  return realpathSync(tempWorkspace({ ...GIT_FILES, ...files }, 'io-harness-links-'));
}

/** `name` (a directory of root) moved aside and a link to `target` put in its place. */
function swapForLink(root: string, name: string, target: string): void {
  renameSync(join(root, name), join(root, `${name}.real`));
  symlinkSync(target, join(root, name));
}

/** The error `fn` throws, or a failure when it throws none. */
function thrownBy(fn: () => unknown): HarnessError {
  try {
    fn();
  } catch (error) {
    if (HarnessError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

async function rejectionOf(fn: () => unknown): Promise<HarnessError> {
  try {
    await fn();
  } catch (error) {
    if (HarnessError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

function planned(workspace: Workspace, path: string, content: string): FileChange {
  const plan = workspace.planWrite({ path, content });
  if (!plan.ok) throw new Error(`not planned: ${plan.result.content}`);
  return plan.change;
}

describe('a link swapped in between the check and the act', () => {
  it('at the first component: the write is refused, naming the rule, and .git is untouched', () => {
    const root = repository({ 'docs/config': 'the docs config\n' });
    const before = listing(join(root, '.git'));
    const workspace = new Workspace({ root });
    const change = planned(workspace, 'docs/config', 'written by the run\n');
    swapForLink(root, 'docs', '.git');
    const error = thrownBy(() => workspace.apply(change));
    expect(error.details.rule).toBe('fs.link-in-path');
    expect(listing(join(root, '.git'))).toEqual(before);
    expect(readFileSync(join(root, 'docs.real/config'), 'utf8')).toBe('the docs config\n');
  });

  it('at a middle component: no directory is made in .git and nothing is written there', () => {
    const root = repository({ 'a/b/c/keep.txt': 'kept\n' });
    const before = listing(join(root, '.git'));
    const workspace = new Workspace({ root });
    const change = planned(workspace, 'a/b/c/f.txt', 'written by the run\n');
    const newDirectory = planned(workspace, 'a/b/d/new.txt', 'written by the run\n');
    swapForLink(root, 'a/b', '../.git');
    expect(thrownBy(() => workspace.apply(change)).details.rule).toBe('fs.link-in-path');
    expect(thrownBy(() => workspace.apply(newDirectory)).details.rule).toBe('fs.link-in-path');
    expect(listing(join(root, '.git'))).toEqual(before);
  });

  it('at the last component: the link is neither written through nor replaced', () => {
    const root = repository({ 'docs/config': 'the docs config\n' });
    const before = listing(join(root, '.git'));
    const workspace = new Workspace({ root });
    const change = planned(workspace, 'docs/config', 'written by the run\n');
    rmSync(join(root, 'docs/config'));
    symlinkSync('../.git/config', join(root, 'docs/config'));
    expect(thrownBy(() => workspace.apply(change)).details.rule).toBe('fs.link-in-path');
    expect(listing(join(root, '.git'))).toEqual(before);
    expect(lstatSync(join(root, 'docs/config')).isSymbolicLink()).toBe(true);
    // A delete through a link swapped in at the last component removes nothing it leads to.
    const deletion: FileChange = { path: 'docs/config', before: 'the docs config\n', after: null, diff: '' };
    expect(thrownBy(() => workspace.apply(deletion)).details.rule).toBe('fs.link-in-path');
    expect(listing(join(root, '.git'))).toEqual(before);
  });

  it('to outside the workspace: refused as a link in the path, nothing written outside', () => {
    const root = repository({ 'docs/notes.txt': 'notes\n' });
    const outside = tempWorkspace({ 'notes.txt': 'outside\n' });
    const workspace = new Workspace({ root });
    const change = planned(workspace, 'docs/notes.txt', 'written by the run\n');
    swapForLink(root, 'docs', outside);
    expect(thrownBy(() => workspace.apply(change)).details.rule).toBe('fs.link-in-path');
    expect(readFileSync(join(outside, 'notes.txt'), 'utf8')).toBe('outside\n');
    expect(readdirSync(outside)).toEqual(['notes.txt']);
  });
});

describe('protected names are checked on the resolved target', () => {
  it('docs -> .git: writing docs/config is refused, naming .git', () => {
    const root = repository();
    symlinkSync('.git', join(root, 'docs'));
    const before = listing(join(root, '.git'));
    const workspace = new Workspace({ root });
    const plan = workspace.planWrite({ path: 'docs/config', content: '[core]\n\thooksPath = /tmp/evil\n' });
    expect(plan.ok).toBe(false);
    if (!plan.ok) {
      expect(plan.result.refusal?.rule).toBe('fs.protected-path .git');
      expect(plan.result.content).toContain('.git');
    }
    const edit = workspace.planEdit({ path: 'docs/config', old_string: 'bare', new_string: 'evil' });
    expect(edit.ok || edit.result.refusal?.rule).toBe('fs.protected-path .git');
    // Applied directly, the change is refused at the act too.
    const change: FileChange = { path: 'docs/config', before: null, after: 'evil\n', diff: '' };
    expect(thrownBy(() => workspace.apply(change)).details.rule).toMatch(/^fs\./);
    expect(listing(join(root, '.git'))).toEqual(before);
  });

  it('a link into .git (hooks -> .git/hooks): writing through it is refused, naming .git', () => {
    const root = repository();
    symlinkSync('.git/hooks', join(root, 'hooks'));
    const before = listing(join(root, '.git'));
    const workspace = new Workspace({ root });
    const plan = workspace.planWrite({ path: 'hooks/pre-commit', content: '#!/bin/sh\ncurl evil\n' });
    expect(plan.ok || plan.result.refusal?.rule).toBe('fs.protected-path .git');
    const created = workspace.planWrite({ path: 'hooks/post-checkout', content: '#!/bin/sh\ncurl evil\n' });
    expect(created.ok || created.result.refusal?.rule).toBe('fs.protected-path .git');
    expect(listing(join(root, '.git'))).toEqual(before);
  });
});

/** A run that writes `docs/config` (which existed) and creates `docs/HEAD` and `docs/description`. */
async function runWritingDocs(root: string, store: Store, turns: ModelScript): Promise<string> {
  const server = await ScriptedModelServer.start(turns);
  later(() => server.close());
  const provider: HttpProviderSpec = { kind: 'openai', model: 'm', baseUrl: `${server.url}/v1`, apiKey: 'k' };
  const result = await runWith(TaskContract.workspace('write the docs', root), provider, store, Policy.permissive());
  expect(result.outcome.kind).toBe('finished');
  return result.runId;
}

describe('rewinds through a swapped directory', () => {
  it('neither restores into .git nor deletes from it: refused, naming the rule', async () => {
    const root = repository({ 'docs/config': 'the docs config\n' });
    const store = await openStore();
    const runId = await runWritingDocs(
      root,
      store,
      (call) =>
        (assistantTurns(call) === 0
          ? {
              text: 'writing',
              toolCalls: [
                { name: 'write_file', args: { path: 'docs/config', content: 'changed\n' } },
                { name: 'write_file', args: { path: 'docs/HEAD', content: 'created\n' } },
                { name: 'write_file', args: { path: 'docs/description', content: 'created\n' } },
              ],
            }
          : { text: 'done' }) as Awaited<ReturnType<ModelScript>>,
    );
    const before = listing(join(root, '.git'));
    swapForLink(root, 'docs', '.git');
    const whole = await rejectionOf(() => rewindRun(root, store, runId));
    expect(whole.code).toBe('REWIND_CONFLICT');
    expect(whole.details.rule).toBe('fs.link-in-path');
    const one = await rejectionOf(() => rewind(root, store, runId, 'docs/HEAD'));
    expect(one.details.rule).toBe('fs.link-in-path');
    expect(listing(join(root, '.git'))).toEqual(before);
    // Put back as it was, the rewind goes through.
    rmSync(join(root, 'docs'));
    renameSync(join(root, 'docs.real'), join(root, 'docs'));
    await rewindRun(root, store, runId);
    expect(readFileSync(join(root, 'docs/config'), 'utf8')).toBe('the docs config\n');
    expect(existsSync(join(root, 'docs/HEAD'))).toBe(false);
    expect(listing(join(root, '.git'))).toEqual(before);
  });
});

/**
 * A process that swaps `docs` for a link (to `.git`, or another target) and back as fast as it can, until a
 * stop file appears, printing how many swaps it has made; it leaves `docs` a directory.
 */
const SWAPPER = `
import { existsSync, lstatSync, renameSync, symlinkSync, unlinkSync } from 'node:fs';
const [root, stopFile, target = '.git'] = process.argv.slice(2);
process.chdir(root);
let swaps = 0;
let moved = 0;
const kind = (path) => { try { return lstatSync(path); } catch { return null; } };
const settle = () => {
  const docs = kind('docs');
  if (docs?.isSymbolicLink()) unlinkSync('docs');
  else if (docs?.isDirectory() && kind('docs-real')) renameSync('docs', 'made-while-missing-' + moved++);
  try { renameSync('docs-real', 'docs'); swaps++; } catch {}
};
process.stdout.write('ready\\n');
for (let round = 0; ; round++) {
  if (round % 50 === 0) {
    if (existsSync(stopFile)) break;
    process.stdout.write('swaps ' + swaps + '\\n');
  }
  try { renameSync('docs', 'docs-real'); } catch {}
  try { symlinkSync(target, 'docs'); swaps++; } catch {}
  settle();
}
settle();
process.stdout.write('done ' + swaps + '\\n');
`;

class Swapper {
  readonly child: ChildProcess;
  swaps = 0;
  readonly ready: Promise<void>;
  readonly done: Promise<number>;
  readonly #stopFile: string;

  /** `target`: what the link leads to (`.git` unless said). */
  constructor(root: string, target = '.git') {
    const scripts = tempWorkspace({ 'swapper.mjs': SWAPPER });
    this.#stopFile = join(scripts, 'stop');
    this.child = spawn(process.execPath, [join(scripts, 'swapper.mjs'), root, this.#stopFile, target], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    later(() => {
      if (this.child.exitCode === null) this.child.kill('SIGKILL');
    });
    let buffered = '';
    let started: () => void = () => undefined;
    let finished: (swaps: number) => void = () => undefined;
    this.ready = new Promise((resolve) => {
      started = resolve;
    });
    this.done = new Promise((resolve) => {
      finished = resolve;
    });
    this.child.stdout?.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        if (line === 'ready') started();
        const [word, count] = line.split(' ');
        if (word === 'swaps' || word === 'done') this.swaps = Number(count);
        if (word === 'done') finished(this.swaps);
      }
    });
  }

  stop(): Promise<number> {
    writeFileSync(this.#stopFile, '');
    return this.done;
  }
}

describe('a background process swapping docs for a link to .git in a tight loop', () => {
  it('lands nothing in .git while the file tools write and rewinds restore, over at least 1,000 swaps', async () => {
    const root = repository({ 'docs/config': 'the docs config\n', 'docs/HEAD': 'the docs head\n' });
    const before = listing(join(root, '.git'));
    const store = await openStore();
    const swapper = new Swapper(root);
    await swapper.ready;

    // Steps of 30 writes each into docs/, on names .git holds and on new ones: at least ten,
    // and on until the swapper has swapped 1,000 times while they wrote.
    const names = ['config', 'HEAD', 'description', ...Array.from({ length: 27 }, (_, i) => `note-${i}.txt`)];
    let steps = 0;
    const runId = await runWritingDocs(root, store, (call) => {
      const turn = assistantTurns(call);
      if ((turn >= 10 && swapper.swaps >= 1000) || turn >= 40)
        return { text: 'done' } as Awaited<ReturnType<ModelScript>>;
      steps = Math.max(steps, turn + 1);
      return {
        text: `turn ${turn}`,
        toolCalls: names.map((name) => ({
          name: 'write_file',
          args: { path: `docs/${name}`, content: `turn ${turn} wrote ${name}\n` },
        })),
      } as Awaited<ReturnType<ModelScript>>;
    });

    const swapsWhileWriting = swapper.swaps;
    expect(swapsWhileWriting).toBeGreaterThanOrEqual(1000);
    expect(listing(join(root, '.git'))).toEqual(before);
    // Every call the run made either wrote, or was refused with a named rule; none ended the run.
    const refusals = new Map(
      (await store.events(runId)).flatMap((event) =>
        event.type === 'refusal' ? [[event.callId, event] as const] : [],
      ),
    );
    let answered = 0;
    for (const step of await store.steps(runId)) {
      for (const observation of step.observations) {
        answered++;
        if (!observation.isError) continue;
        expect(refusals.get(observation.callId)?.rule ?? `no rule: ${observation.content}`).toMatch(
          /^(fs\.link-in-path|fs\.path-moved|fs\.protected-path \.git|deny-write \*\*\/\.git)$/,
        );
      }
    }
    expect(answered).toBe(steps * names.length);

    // Rewinds while the swapping goes on, until it has swapped at least 1,000 times more.
    let rewinds = 0;
    let refusedRewinds = 0;
    while (rewinds < 50 || swapper.swaps < swapsWhileWriting + 1000) {
      rewinds++;
      // A SQLite store answers at once: let the swapper's count come in between rewinds.
      await new Promise((resolve) => setImmediate(resolve));
      try {
        await rewindRun(root, store, runId);
      } catch (error) {
        if (!HarnessError.isInstance(error) || error.code !== 'REWIND_CONFLICT') throw error;
        expect(error.details.rule).toMatch(/^fs\.(link-in-path|path-moved|protected-path \.git)$/);
        refusedRewinds++;
      }
    }
    const swaps = await swapper.stop();
    expect(swaps).toBeGreaterThanOrEqual(swapsWhileWriting + 1000);
    expect(listing(join(root, '.git'))).toEqual(before);

    // With nothing racing it, the rewind goes through, and still lands nothing in .git.
    await rewindRun(root, store, runId);
    expect(existsSync(join(root, 'docs/note-0.txt'))).toBe(false);
    expect(listing(join(root, '.git'))).toEqual(before);
    expect(rewinds).toBeGreaterThanOrEqual(refusedRewinds);
  }, 120_000);
});

describe('reads through a swapped directory', () => {
  it('reads only the path the policy decided: one that resolves elsewhere now is refused', () => {
    const root = repository({ 'docs/api.env': 'nothing here\n', 'secrets/api.env': 'KEY=sk-live-4711\n' });
    const workspace = new Workspace({ root });
    const decided = workspace.resolve('docs/api.env');
    expect(decided.ok).toBe(true);
    swapForLink(root, 'docs', 'secrets');
    const read = workspace.read({ path: 'docs/api.env' }, (decided as { relative: string }).relative);
    expect(read.isError).toBe(true);
    expect(read.refusal?.rule).toBe('fs.path-moved');
    expect(read.content).not.toContain('sk-live-4711');
  });

  it('grep reads a listed file only where the listing found it: through a link swapped in since, it is not read', async () => {
    const { readRegular } = await import('../dist/runtime/workspace/search.js');
    const root = repository({ 'docs/api.env': 'nothing here\n', 'secrets/api.env': 'KEY=sk-live-4711\n' });
    const listed = join(root, 'docs', 'api.env');
    expect(readRegular(listed, 1024, true)).toMatchObject({ bytes: Buffer.from('nothing here\n') });
    swapForLink(root, 'docs', 'secrets');
    expect(readRegular(listed, 1024, true)).toEqual({ problem: 'moved', size: 0 });
  });

  it('never hands the model a file the policy denies while a process swaps the directory it reads or greps, over 1,000 swaps', async () => {
    const root = repository({ 'docs/api.env': 'nothing here\n', 'secrets/api.env': 'KEY=sk-live-4711\n' });
    const store = await openStore();
    const swapper = new Swapper(root, 'secrets');
    await swapper.ready;
    const server = await ScriptedModelServer.start((call) => {
      const turn = assistantTurns(call);
      if ((turn >= 10 && swapper.swaps >= 1000) || turn >= 40) return { text: 'done' };
      return {
        text: `turn ${turn}`,
        toolCalls: Array.from({ length: 30 }, (_, i) =>
          i % 2 === 0
            ? { name: 'read_file', args: { path: 'docs/api.env' } }
            : { name: 'grep', args: { pattern: 'KEY|nothing', path: 'docs' } },
        ),
      };
    });
    later(() => server.close());
    const provider: HttpProviderSpec = { kind: 'openai', model: 'm', baseUrl: `${server.url}/v1`, apiKey: 'k' };
    const policy = Policy.default().layer('app').allowRead('**').denyRead('secrets');
    const result = await runWith(TaskContract.workspace('read the docs', root), provider, store, policy);
    expect(swapper.swaps).toBeGreaterThanOrEqual(1000);
    await swapper.stop();
    expect(result.outcome.kind).toBe('finished');
    const seen = (await store.steps(result.runId)).flatMap((step) => step.observations.map((o) => o.content));
    expect(seen.length).toBeGreaterThanOrEqual(300);
    for (const content of seen) expect(content).not.toContain('sk-live-4711');
  });
});
