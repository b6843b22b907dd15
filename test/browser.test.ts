/**
 * The browser (`withBrowser`) as a run uses it: the host's Chromium, contained by
 * bubblewrap with the run's egress proxy its only way out, driven by playwright-core over a
 * pipe. A page on a loopback server is opened, clicked, typed into, scrolled, read and
 * photographed; a redirect to a host the policy denies and a file: URL are refused with the
 * rule in the trace; and no Chromium process outlives the run, nor a SIGKILL of the process
 * that drove it and the resume after.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { OpenAI, Policy, Store, Supervisor, TaskContract } from '../dist/index.js';
import { temporaryTooLong } from '../dist/runtime/browser/browser.js';
import { BROWSER_SANDBOX, openBrowser } from '../dist/runtime/browser/run-browser.js';
import { executorFor } from '../dist/runtime/exec/factory.js';
import { type ScriptedAnswer, ScriptedModelServer } from '../dist/testing/index.js';
import { killUnder, processesWhere, tempStorePath } from './support/processes.js';
import { later, setEnv, tempWorkspace } from './support/workspace.js';

const PAGES: Record<string, string> = {
  '/': `<!doctype html><title>First page</title><h1>Welcome to the fixture</h1>
<a id="next" href="/next">the next page</a>
<form action="/echo"><input id="q" name="q"><button>go</button></form>
<div style="height: 4000px">tall</div>
<script>console.log('hello from the page'); setTimeout(() => { throw new Error('boom on purpose'); }, 0);</script>`,
  '/next': '<!doctype html><title>Second page</title><p>You reached the second page.</p>',
};

/** The fixture site: its pages, an echo of what a form sent, and a redirect to a host the policy denies. */
async function site(): Promise<{ url: string; server: Server; port: number }> {
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://fixture');
    if (url.pathname === '/echo') {
      response.setHeader('content-type', 'text/html');
      response.end(`<!doctype html><title>Echo</title><p>You searched for ${url.searchParams.get('q')}.</p>`);
      return;
    }
    if (url.pathname === '/go') {
      response.writeHead(302, { location: `http://denied.test:${(server.address() as AddressInfo).port}/` });
      response.end();
      return;
    }
    const page = PAGES[url.pathname];
    response.writeHead(page ? 200 : 404, { 'content-type': 'text/html' });
    response.end(page ?? 'not here');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  later(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${port}`, server, port };
}

/** A model that makes the calls given, one a step, then says done. */
async function model(calls: { name: string; args: Record<string, unknown> }[]): Promise<ScriptedModelServer> {
  const server = await ScriptedModelServer.start((call): ScriptedAnswer => {
    const next = calls[call.index];
    return next ? { toolCalls: [next] } : { text: 'done' };
  });
  later(() => server.close());
  return server;
}

/**
 * The host pids of the Chromium processes the runs of this file started: the browser works
 * in its own run directory (`io-harness-run-…/tmp`), where no command of a run works.
 */
function browsers(): number[] {
  return processesWhere((cwd, exe) => /\/io-harness-run-\d+-[^/]+\/tmp$/.test(cwd) && /chrom/.test(exe));
}

/** Waits a bounded while (generous: a loaded machine reaps slowly) for every such process to be gone; true when none is left. */
async function noBrowserLeft(): Promise<boolean> {
  for (let i = 0; i < 1500 && browsers().length > 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  return browsers().length === 0;
}

const policy = (host: string) => Policy.default().layer('test').allowNet(host).denyNet('denied.test');

beforeEach(() => {
  // The fixture is on loopback, below the address floor: lifted for these tests alone.
  process.env.IO_HARNESS_ALLOW_LOCAL_ADDRESSES = '1';
});
afterEach(() => {
  delete process.env.IO_HARNESS_ALLOW_LOCAL_ADDRESSES;
});

describe('the browser', () => {
  it('opens, clicks, types into, scrolls, reads and photographs a page; refuses a denied redirect and a file: URL', {
    timeout: 120_000,
  }, async () => {
    const { url, port } = await site();
    const root = tempWorkspace({ 'README.md': 'a project\n' });
    later(() => killUnder(root));
    const calls = [
      { name: 'browser_open', args: { url: `${url}/` } },
      { name: 'browser_text', args: {} },
      { name: 'browser_click', args: { selector: '#next' } },
      { name: 'browser_open', args: { url: `${url}/` } },
      { name: 'browser_type', args: { selector: '#q', text: 'harness', submit: true } },
      { name: 'browser_text', args: {} },
      { name: 'browser_screenshot', args: {} },
      { name: 'browser_open', args: { url: `${url}/go` } },
      { name: 'browser_open', args: { url: 'file:///etc/passwd' } },
      { name: 'browser_open', args: { url: `${url}/` } },
      { name: 'browser_scroll', args: { pixels: 1000 } },
    ];
    const server = await model(calls);
    const store = await Store.open(tempStorePath());
    later(() => store.close());
    const supervisor = await Supervisor.start(store);
    later(() => supervisor.close());
    const contract = TaskContract.workspace('look at the fixture site', root).withBrowser();
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const result = await supervisor.run({ contract, provider, policy: policy('127.0.0.1') }).result;
    expect(result.status).toBe('finished');
    const observations = store.steps(result.rootId).map((step) => step.observations[0]);
    const said = observations.map((observation) => observation?.content ?? '');
    expect(said[0]).toContain(`opened ${url}/ — First page (HTTP 200)`);
    // What the page said on its console and what it threw, with the call that made it happen or the next.
    expect(`${said[0]}\n${said[1]}`).toContain('console.log: hello from the page');
    expect(`${said[0]}\n${said[1]}`).toContain('uncaught error: boom on purpose');
    expect(said[1]).toContain('Welcome to the fixture');
    expect(said[2]).toContain(`now at ${url}/next — Second page`);
    expect(said[4]).toContain(`now at ${url}/echo?q=harness — Echo`);
    expect(said[5]).toContain('You searched for harness.');
    // The screenshot is an image handed to the model, on the next request.
    expect(observations[6]?.images?.[0]?.mimeType).toBe('image/png');
    expect(server.calls[7]?.raw).toContain('data:image/png;base64,');
    // The redirect leaves the page for a host the policy denies: refused at the proxy, by its rule.
    expect(observations[7]?.isError).toBe(true);
    expect(said[7]).toMatch(/was not opened: the egress proxy refused http:\/\/denied\.test:\d+\/ \(rule /);
    const events = store.events(result.rootId);
    const refusals = events.flatMap((event) => (event.type === 'refusal' ? [event] : []));
    expect(refusals.some((event) => /denied\.test/.test(event.reason) && event.layer === 'test')).toBe(true);
    expect(
      events.some(
        (event) =>
          event.type === 'policy-decision' && event.subject === `denied.test:${port}` && event.effect === 'deny',
      ),
    ).toBe(true);
    // A file: URL never leaves the tool.
    expect(observations[8]).toMatchObject({ isError: true });
    expect(said[8]).toMatch(/file:\/\/\/etc\/passwd was not opened: a file: URL/);
    expect(refusals.some((event) => event.rule === 'browser.scheme')).toBe(true);
    expect(said[10]).toMatch(/scrolled down: 1000 of \d+ pixels down/);
    // Nothing of it is left once the run has ended.
    expect(await noBrowserLeft()).toBe(true);
  });

  it("wraps it in the system's view: its own UNIX sockets, and no socket of the host's or the workspace's in reach", async () => {
    const root = tempWorkspace({ 'a.txt': 'x' });
    const away = tempWorkspace();
    const sockets = [join(root, 'dev-server.sock'), join(away, 'daemon.sock')];
    for (const path of sockets) {
      const listening = createNetServer((socket) => socket.end('hello from the host')).listen(path);
      await once(listening, 'listening');
      later(() => new Promise<void>((resolve) => listening.close(() => resolve())));
    }
    const gate = { decide: async () => ({ ok: true as const }), refused: () => undefined };
    const policy = Policy.default().layer('test').allowNet('127.0.0.1');
    const script = [
      `const fs = require('fs'), net = require('net'), path = require('path');`,
      `console.log(fs.existsSync('/run') ? 'run there' : 'no /run', fs.existsSync(${JSON.stringify(root)}) ? 'workspace there' : 'no workspace');`,
      `const own = () => net.createServer().listen(path.join(process.env.TMPDIR, 'own.sock'), () => { console.log('own socket'); process.exit(0); }).on('error', (e) => { console.log('own', e.code); process.exit(0); });`,
      `const reach = (list) => list.length === 0 ? own() : net.connect(list[0]).on('connect', () => { console.log('reached', path.basename(list[0])); reach(list.slice(1)); }).on('error', (e) => { console.log(path.basename(list[0]), e.code); reach(list.slice(1)); });`,
      `reach(${JSON.stringify(sockets)});`,
    ].join('\n');
    const spawned = (wrapped: { argv: string[]; env: NodeJS.ProcessEnv }) => {
      const [program, ...args] = wrapped.argv as [string, ...string[]];
      return spawnSync(program, args, { env: wrapped.env, encoding: 'utf8', timeout: 30_000 }).stdout;
    };
    // The browser's executor, as a run makes it: an empty root of its own, nothing of the workspace.
    const opened = openBrowser(
      (anchor) => executorFor({ purpose: 'run', root: anchor, sandbox: { ...BROWSER_SANDBOX }, policy, egress: gate }),
      { PATH: process.env.PATH },
    );
    if (typeof opened === 'string') throw new Error(opened);
    later(async () => {
      await opened.executor.close();
      rmSync(opened.anchor, { recursive: true, force: true });
    });
    const own = opened.executor.boundary().tmp;
    const seen = spawned(
      opened.executor.wrapCommand([process.execPath, '-e', script], own, opened.env, { systemView: true }),
    );
    expect(seen).toContain('dev-server.sock ENOENT');
    expect(seen).toContain('daemon.sock ENOENT');
    expect(seen).toContain('own socket');
    expect(seen).toContain('no /run');
    expect(seen).toContain('no workspace');
    // A command's view: the whole tree read-only, and no UNIX socket of its own to connect with.
    const executor = executorFor({ purpose: 'mcp-server', root, policy, egress: gate });
    later(() => executor.close());
    const command = spawned(executor.wrapCommand([process.execPath, '-e', script], root, { PATH: process.env.PATH }));
    expect(command).toContain('dev-server.sock EACCES');
    expect(command).toContain('daemon.sock EACCES');
    expect(command).toContain('own EACCES');
    expect(command).toContain('run there');
  });

  it('starts a new browser when the one it had went away', { timeout: 120_000 }, async () => {
    const { url } = await site();
    const root = tempWorkspace({ 'README.md': 'a project\n' });
    const server = await ScriptedModelServer.start((call): ScriptedAnswer => {
      if (call.index === 0) return { toolCalls: [{ name: 'browser_open', args: { url: `${url}/` } }] };
      if (call.index === 1) {
        // Killed under the run, as a cap or a crash would: the next call may fail, the one after starts it again.
        for (const pid of browsers()) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // gone already: its parent went first
          }
        }
        return { toolCalls: [{ name: 'browser_text', args: {} }] };
      }
      if (call.index === 2) return { toolCalls: [{ name: 'browser_open', args: { url: `${url}/next` } }] };
      return { text: 'done' };
    });
    later(() => server.close());
    const store = await Store.open(tempStorePath());
    later(() => store.close());
    const supervisor = await Supervisor.start(store);
    later(() => supervisor.close());
    const contract = TaskContract.workspace('look twice', root).withBrowser().withReadOnlyAccess();
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const result = await supervisor.run({ contract, provider, policy: policy('127.0.0.1') }).result;
    expect(result.status).toBe('finished');
    const said = store.steps(result.rootId).map((step) => step.observations[0]?.content ?? '');
    expect(said[0]).toContain(`opened ${url}/ — First page`);
    expect(said[2]).toContain(`opened ${url}/next — Second page`);
    expect(await noBrowserLeft()).toBe(true);
  });

  it('says, before it starts Chromium, that the run’s temporary directory is too long for its socket, and what to do', {
    timeout: 120_000,
  }, async () => {
    expect(temporaryTooLong('/tmp/io-harness-run-4242-abcdef/tmp')).toBeNull();
    const root = tempWorkspace({ 'README.md': 'a project\n' });
    later(() => killUnder(root));
    const server = await model([{ name: 'browser_open', args: { url: 'http://127.0.0.1:9/' } }]);
    const store = await Store.open(tempStorePath());
    later(() => store.close());
    // The run's directories are made under TMPDIR as it runs: a long one for this run alone, on this thread.
    const long = mkdtempSync(join(tmpdir(), 'io-harness-a-temporary-directory-too-long-'));
    later(() => rmSync(long, { recursive: true, force: true }));
    setEnv({ TMPDIR: long });
    const supervisor = await Supervisor.start(store, { isolation: 'in-process' });
    later(() => supervisor.close());
    const contract = TaskContract.workspace('look at a page', root).withBrowser();
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const result = await supervisor.run({ contract, provider, policy: policy('127.0.0.1') }).result;
    expect(result.status).toBe('finished');
    const observation = store.steps(result.rootId)[0]?.observations[0];
    expect(observation?.isError).toBe(true);
    expect(observation?.content).toMatch(
      /the browser cannot start: Chromium binds a socket under the run's temporary directory \(.+\), and that path would be \d+ bytes longer than a UNIX socket allows; run the harness with TMPDIR set to a directory whose path is at least \d+ bytes shorter/,
    );
    expect(browsers()).toEqual([]);
  });

  it('is absent from a run that does not ask for it, and refused on a single-file contract or with bad options', () => {
    const root = tempWorkspace({ 'a.txt': 'x' });
    const contract = TaskContract.workspace('x', root);
    expect(contract.toJSON().browser).toBeUndefined();
    expect(contract.withBrowser().toJSON().browser).toEqual({ timeoutSecs: 30 });
    expect(() => TaskContract.file('x', `${root}/a.txt`).withBrowser()).toThrow(/needs a workspace contract/);
    expect(() => contract.withBrowser({ executable: 'chromium' })).toThrow(/absolute path of a Chromium/);
    expect(() => contract.withBrowser({ timeoutSecs: 0 })).toThrow(/above 0 and at most 600/);
    expect(() => contract.withBrowser({ port: 9222 } as never)).toThrow(/unknown option "port"/);
  });

  it('leaves no Chromium behind when the process driving it is killed, nor after the resume that finishes the run', {
    timeout: 120_000,
  }, async () => {
    const { url } = await site();
    const root = tempWorkspace({ 'README.md': 'a project\n' });
    later(() => killUnder(root));
    // The first process opens the page, then waits on its model for good; the second finishes.
    let hang = true;
    const server = await ScriptedModelServer.start((call): ScriptedAnswer => {
      if (call.index === 0) return { toolCalls: [{ name: 'browser_open', args: { url: `${url}/` } }] };
      if (hang) return { fault: 'hang' };
      // The resumed run opens the page again, in a browser of its own.
      if (call.index === 2) return { toolCalls: [{ name: 'browser_open', args: { url: `${url}/next` } }] };
      return { text: 'done' };
    });
    later(() => server.close());
    const path = tempStorePath();
    // The killed process cannot remove what it made in its temporary directory (playwright's scratch directories): one of
    // the test's own, its name short (under a much longer one Chromium cannot bind its socket: docs/CAPABILITIES.md).
    const scratch = mkdtempSync(join(tmpdir(), 'iohk-'));
    later(() => rmSync(scratch, { recursive: true, force: true }));
    const child = spawn(process.execPath, [fileURLToPath(new URL('./support/browser-run.mjs', import.meta.url))], {
      env: {
        ...process.env,
        TMPDIR: scratch,
        STORE: path,
        ROOT: root,
        MODEL: `${server.url}/v1`,
        IO_HARNESS_ALLOW_LOCAL_ADDRESSES: '1',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    later(() => {
      child.kill('SIGKILL');
    });
    const rootId = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout?.on('data', (chunk) => {
        out += chunk;
        const match = /^root (\S+)$/m.exec(out);
        if (match) resolve(match[1] as string);
      });
      child.on('exit', (code) => reject(new Error(`the child exited (${code}) before it was killed`)));
    });
    // The page is open and the model is asked the next step (which never answers).
    while (server.calls.length < 2) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(browsers().length).toBeGreaterThan(0);
    child.kill('SIGKILL');
    expect(await noBrowserLeft()).toBe(true);
    hang = false;
    const store = await Store.open(path);
    later(() => store.close());
    const supervisor = await Supervisor.start(store);
    later(() => supervisor.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const handle = await supervisor.resume(rootId, { provider });
    const result = await handle.result;
    expect(result.status).toBe('finished');
    const opened = store.steps(result.rootId).map((step) => step.observations[0]?.content ?? '');
    expect(opened[0]).toContain(`opened ${url}/ — First page`);
    expect(opened[1]).toContain(`opened ${url}/next — Second page`);
    expect(await noBrowserLeft()).toBe(true);
  });
});
