/**
 * What `import 'io-harness'` loads: not the vendors' HTTP client, not a JSON Schema
 * validator. Each is required where it is first wanted, so a script's start does not pay
 * for what it may never use. Checked in a fresh process, by the CommonJS modules it loaded.
 * And what an agent thread loads: the file tools, the commands, their policy rules and the
 * sandbox only once it hosts a run with a workspace (read from the thread's own debugger).
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Policy, TaskContract } from '../dist/index.js';
import { harness, moduleScript } from './support/harness.js';
import { tempWorkspace } from './support/workspace.js';

const index = fileURLToPath(new URL('../dist/index.js', import.meta.url));

/** The files (CommonJS and ES modules) a fresh process has loaded after `script` (an ES module body, `lib` the library). */
function filesAfter(script: string): string[] {
  const body = `
    import { createRequire } from 'node:module';
    const lib = await import(${JSON.stringify(index)});
    ${script}
    // Every script the process parsed, ES modules too (which no require cache lists), from its own debugger.
    const { Session } = await import('node:inspector');
    const { fileURLToPath } = await import('node:url');
    const session = new Session();
    session.connect();
    const urls = [];
    session.on('Debugger.scriptParsed', ({ params }) => urls.push(params.url));
    await new Promise((resolve) => session.post('Debugger.enable', resolve));
    const scripts = urls.filter((url) => url.startsWith('file:')).map((url) => fileURLToPath(url));
    console.log(JSON.stringify([...new Set([...Object.keys(createRequire(import.meta.url).cache), ...scripts])]));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', body], { encoding: 'utf8' });
  return JSON.parse(out.trim().split('\n').at(-1) as string) as string[];
}

/** The packages a fresh process has loaded after `script`. */
function packagesAfter(script: string): string[] {
  const names = filesAfter(script).map((file) => /node_modules\/((@[^/]+\/)?[^/]+)/.exec(file)?.[1]);
  return [...new Set(names.filter((name): name is string => name !== undefined))].sort();
}

/** The files of undici a fresh process has loaded after `script`, relative to the package. */
function undiciFilesAfter(script: string): string[] {
  return filesAfter(script)
    .map((file) => /node_modules\/undici\/(.*)$/.exec(file)?.[1])
    .filter((file): file is string => file !== undefined);
}

/** One model call made here (to a port nobody listens on: it fails to connect, as it should). */
const MODEL_CALL = `
      const provider = await lib.loadProvider(lib.OpenAI.create({ model: 'm', baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'k', retry: { maxAttempts: 1 } }));
      await provider.complete({ system: 's', transcript: [{ role: 'user', text: 'hi' }], tools: [], metadata: { runId: 'r', rootId: 'r', address: 'root', parentAddress: null, depth: 0, seq: 1 } }).catch((error) => {
        if (error.kind !== 'connection') throw error;
      });`;

describe('importing the library', () => {
  it('loads neither undici nor ajv, nor the diff and TOML parsers, until something needs them', () => {
    const loaded = packagesAfter('');
    expect(loaded).not.toContain('undici');
    expect(loaded).not.toContain('ajv');
    expect(loaded).not.toContain('diff');
    expect(loaded).not.toContain('smol-toml');
    // Each is there once it is wanted: a configuration read, a patch shown.
    const used = packagesAfter(`
      const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
      const { join } = await import('node:path');
      const { tmpdir } = await import('node:os');
      const dir = mkdtempSync(join(tmpdir(), 'io-harness-lazy-'));
      const home = mkdtempSync(join(tmpdir(), 'io-harness-lazy-home-'));
      try {
        writeFileSync(join(dir, 'io.toml'), '[budget]\\nsteps = 3\\n');
        lib.Config.discover(dir, { userFile: join(home, 'io.toml') });
        const { unifiedDiff } = await import(${JSON.stringify(fileURLToPath(new URL('../dist/runtime/workspace/diffs.js', import.meta.url)))});
        unifiedDiff('a.txt', 'a\\n', 'b\\n');
      } finally {
        rmSync(dir, { recursive: true, force: true });
        rmSync(home, { recursive: true, force: true });
      }`);
    expect(used).toContain('smol-toml');
    expect(used).toContain('diff');
    // What the main thread does need is there.
    expect(loaded).toContain('better-sqlite3');
  });

  it("requires ajv with the embedder's first tool, and undici with the first HTTP request made here", () => {
    const withTool = packagesAfter(`
      lib.tool({ name: 't', description: 'd', parameters: { type: 'object', properties: {} }, execute: () => 'ok' });`);
    expect(withTool).toContain('ajv');
    expect(withTool).not.toContain('undici');
    const withCall = packagesAfter(MODEL_CALL);
    expect(withCall).toContain('undici');
  });

  it("loads undici's keep-alive agent for a model call, not its index with every dispatcher and mock", async () => {
    const files = undiciFilesAfter(MODEL_CALL);
    expect(files).toContain('lib/dispatcher/agent.js');
    expect(files).not.toContain('index.js');
    expect(files.filter((file) => file.startsWith('lib/mock/') || file.startsWith('lib/cache/'))).toEqual([]);
    // The class loaded is the package's own Agent, not a copy of it.
    const { loadHttpClient } = await import('../dist/runtime/providers/http.js');
    const { Agent } = createRequire(import.meta.url)('undici') as typeof import('undici');
    expect(loadHttpClient().Agent).toBe(Agent);
  });
});

describe('an agent thread', () => {
  /** What only a workspace run needs (see src/actors/agent/workspace-kit.ts). */
  const workspaceOnly = [
    'actors/agent/workspace-kit.js',
    'runtime/exec/factory.js',
    'runtime/policy/commands/index.js',
    'runtime/tools/families/commands.js',
    'runtime/tools/families/files.js',
    'runtime/workspace/session.js',
  ];

  it('loads the file tools, the commands and the sandbox only for a run with a workspace', async () => {
    const h = await harness();
    try {
      const provider = moduleScript('loaded-modules');
      const plain = await h.supervisor.run({ task: 'which modules?', provider }).result;
      expect(plain.status).toBe('finished');
      const loaded = JSON.parse(plain.reply as string) as string[];
      // The thread read its own modules: the loop that runs the agent is among them.
      expect(loaded).toContain('actors/agent/loop.js');
      expect(loaded.filter((file) => workspaceOnly.includes(file))).toEqual([]);
      const root = tempWorkspace({ 'a.txt': 'a\n' });
      const contract = TaskContract.workspace('which modules?', root);
      const withWorkspace = await h.supervisor.run({ contract, policy: Policy.default(), provider }).result;
      expect(withWorkspace.status).toBe('finished');
      expect(JSON.parse(withWorkspace.reply as string)).toEqual(expect.arrayContaining(workspaceOnly));
    } finally {
      await h.close();
    }
  });
});
