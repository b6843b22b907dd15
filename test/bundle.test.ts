/**
 * The bundle (scripts/bundle.mjs) is what the package exports: a program that imports
 * 'io-harness' loads a few dozen files where tsc wrote some three hundred modules, and
 * everything the package finds by path from its code (the threads' entries, the Landlock
 * helper's source, the viewer's page) is found from the bundle as from dist/.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError, Policy, ProviderError, selectBackend, TaskContract } from '../dist/index.js';
import { tempStorePath } from './support/processes.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const temps: string[] = [];
const temp = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

/** Node run from the package's directory, as a user's program under it would be; its output, killed after two minutes. */
const node = (args: string[], options: { stdio?: 'ignore' } = {}) =>
  execFileSync(process.execPath, args, { cwd: ROOT, encoding: 'utf8', timeout: 120_000, ...options });

/**
 * Every file a fresh node process loads (as URLs), on any of its threads (a worker takes the
 * process's `--import`), while it runs with `args`; and what it printed.
 */
function filesLoadedBy(args: string[]): { loaded: string[]; out: string } {
  const dir = temp('io-harness-bundle-loads-');
  const hooks = join(dir, 'hooks.mjs');
  const log = join(dir, 'loaded.txt');
  writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';\nexport async function load(url, context, next) { appendFileSync(${JSON.stringify(log)}, url + '\\n'); return next(url, context); }\n`,
  );
  const register = join(dir, 'register.mjs');
  writeFileSync(
    register,
    `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`,
  );
  const out = node(['--import', pathToFileURL(register).href, ...args]);
  return { loaded: readFileSync(log, 'utf8').trim().split('\n'), out };
}

/** The package's own files among `urls` (its dependencies' left out). */
const ours = (urls: string[]) =>
  urls.filter((url) => url.startsWith(pathToFileURL(join(ROOT, 'dist')).href) && !url.includes('/node_modules/'));

describe('the bundle the package exports', () => {
  it('is what each entry point resolves to, one file each, beside the entries of its threads', () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      main: string;
      exports: Record<string, string | { default: string }>;
    };
    const exported = Object.entries(manifest.exports)
      .filter(([name]) => name !== './package.json')
      .map(([name, target]) => [name, (target as { default: string }).default]);
    // Each subpath is its own file of the bundle (scripts/bundle.mjs's ENTRIES), built with the rest so they share one copy of each class.
    for (const [name, file] of exported)
      expect(file).toBe(`./dist/bundle/${name === '.' ? 'index' : (name as string).slice(2)}.js`);
    expect(manifest.main).toBe('./dist/bundle/index.js');
    for (const [, file] of exported) expect(existsSync(join(ROOT, file as string))).toBe(true);
    const bundled = readdirSync(join(ROOT, 'dist', 'bundle'));
    for (const thread of ['agent-worker.js', 'store-worker.js', 'search-worker.js', 'thread-entry.cjs'])
      expect(bundled).toContain(thread);
  });

  it("loads a few dozen of the package's files where tsc wrote hundreds", () => {
    const imported = (code: string) => ours(filesLoadedBy(['--input-type=module', '-e', code]).loaded);
    const bundled = imported("await import('io-harness');");
    const unbundled = imported(`await import(${JSON.stringify(pathToFileURL(join(ROOT, 'dist', 'index.js')).href)});`);
    expect(bundled.every((url) => url.includes('/dist/bundle/'))).toBe(true);
    expect(unbundled.length).toBeGreaterThan(150);
    expect(bundled.length).toBeLessThan(unbundled.length / 3);
  });

  it('is what the command line runs', () => {
    const { loaded, out } = filesLoadedBy([join(ROOT, 'bin', 'io-harness.mjs'), '--help']);
    expect(out).toContain('io-harness');
    expect(ours(loaded).length).toBeGreaterThan(0);
    expect(ours(loaded).filter((url) => !url.includes('/dist/bundle/'))).toEqual([]);
  });

  it("takes a provider's error made by another copy of the package for its own", async () => {
    const bundled = (await import(pathToFileURL(join(ROOT, 'dist', 'bundle', 'index.js')).href)) as {
      ProviderError: typeof ProviderError;
    };
    expect(bundled.ProviderError).not.toBe(ProviderError);
    const made = new bundled.ProviderError({ kind: 'aborted', provider: 'elsewhere', message: 'stopped' });
    expect(made instanceof ProviderError).toBe(true);
    expect(
      new ProviderError({ kind: 'http', provider: 'here', message: 'no', statusCode: 500 }) instanceof
        bundled.ProviderError,
    ).toBe(true);
    // Another error of the package, or a look-alike of no error class, is not one.
    expect(new InvalidArgumentError('bad') instanceof ProviderError).toBe(false);
    expect(Object.assign(new Error('x'), { code: 'PROVIDER_FAILED', kind: 'http' }) instanceof ProviderError).toBe(
      false,
    );
  });

  it('runs a workspace agent on threads from it: a grep on the search thread, a command on the rung dist/ picks, the viewer page', () => {
    const workspace = temp('io-harness-bundle-ws-');
    const store = tempStorePath('io-harness-bundle-');
    temps.push(join(store, '..'));
    const { loaded, out } = filesLoadedBy([join(ROOT, 'test', 'support', 'bundle-program.mjs'), workspace, store]);
    // Every thread it started (the store actor's, the agent's, the search's) ran the bundle too.
    for (const thread of ['store-worker.js', 'agent-worker.js', 'search-worker.js'])
      expect(loaded).toContain(pathToFileURL(join(ROOT, 'dist', 'bundle', thread)).href);
    expect(ours(loaded).filter((url) => !url.includes('/dist/bundle/'))).toEqual([]);
    const seen = JSON.parse(out.trim().split('\n').at(-1) as string) as {
      outcome: string;
      shown: string[];
      page: { status: number; html: boolean };
    };
    expect(seen.outcome).toBe('finished');
    expect(seen.shown[0]).toBe('notes.txt:1:what the bundle holds');
    expect(seen.shown[1]).toContain('six times seven is 42');
    expect(seen.page).toEqual({ status: 200, html: true });
    // The rung the run's commands got is the one the unbundled code picks on this host: the bundle found the helper's source.
    const db = new Database(store, { readonly: true });
    const contained = db.prepare("SELECT data FROM events WHERE type = 'contained'").all() as { data: string }[];
    db.close();
    expect(contained).toHaveLength(1);
    const expected = selectBackend(
      TaskContract.workspace('find the note and run the sum', workspace),
      Policy.default().layer('app').allowExec('node -e*'),
    );
    expect(JSON.parse((contained[0] as { data: string }).data).rung).toBe(expected.rung);
    expect(JSON.parse((contained[0] as { data: string }).data).passedOver).toEqual(expected.passedOver);
  });
});
