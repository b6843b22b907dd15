/**
 * The trace viewer as a person uses it: headless Chromium (the host's `chromium`, else the
 * one a dev dependency ships: support/chromium.ts; driven by playwright-core) opens the
 * page while a fan-out tree runs, sees the tree grow and every agent reach `finished`,
 * opens one agent's run and sees its diff and its refusal. The screenshots are kept in
 * test-artifacts/viewer/. Then the server's own guards: GET only, loopback Host headers
 * only, nothing outside the page's files. On a SQLite file, and on PostgreSQL (the suite
 * runs on both).
 */
import { mkdirSync, readFileSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { OpenAI, Policy, Supervisor, TaskContract } from '../dist/index.js';
import { assistantTurns, ScriptedModelServer, wireToolResults } from '../dist/testing/index.js';
import { viewer } from '../dist/viewer/server.js';
import { freshStore, openAt, SUITE_BACKEND, sqlRows } from './support/backends.js';
import { launchChromium, testChromium } from './support/chromium.js';
import { later, tempWorkspace } from './support/workspace.js';

const ARTIFACTS = fileURLToPath(
  new URL(`../test-artifacts/viewer/${SUITE_BACKEND.name.toLowerCase()}/`, import.meta.url),
);
const WORKERS = 6;
/** The page's document, as the functions run in it use it (this file is not compiled against the DOM's types). */
declare const document: { querySelectorAll(selector: string): { length: number } };

/** A fresh store on the suite's backend with a supervisor on it, both closed after the test. */
async function supervised(options: Parameters<typeof Supervisor.start>[1] = {}) {
  const location = await freshStore();
  const store = await openAt(location);
  const supervisor = await Supervisor.start(store, options);
  later(() => supervisor.close());
  return { location, store, supervisor };
}

function raw(url: string, options: { method?: string; host?: string; path?: string }) {
  const target = new URL(url);
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const sent = request(
      {
        host: target.hostname,
        port: target.port,
        path: options.path ?? '/',
        method: options.method ?? 'GET',
        headers: { host: options.host ?? target.host },
      },
      (response) => {
        let body = '';
        response.on('data', (chunk) => {
          body += chunk;
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      },
    );
    sent.on('error', reject);
    sent.end();
  });
}

describe('the trace viewer', () => {
  it('shows a live fan-out tree grow and finish in a real browser, then a run with its diff and refusal', {
    timeout: 120_000,
  }, async () => {
    // Throws, saying why, where there is neither the host's Chromium nor the packaged one.
    await testChromium();
    mkdirSync(ARTIFACTS, { recursive: true });
    const server = await ScriptedModelServer.start((call) => {
      const task = String(call.body.messages.find((message) => message.role === 'user')?.content ?? '');
      const part = /^write part (\d+)/.exec(task)?.[1];
      const address = part ? `worker-${part}` : 'root';
      const step = assistantTurns(call);
      const latencyMs = 250;
      if (address === 'root') {
        if (step === 0)
          return {
            latencyMs,
            toolCalls: Array.from({ length: WORKERS }, (_, i) => ({
              name: 'spawn_agent',
              args: { task: `write part ${i + 1}`, as: `worker-${i + 1}`, wait: false },
            })),
          };
        const reports = wireToolResults(call)
          .filter((result) => result.name === 'read_messages' && result.content.startsWith('['))
          .flatMap((result) => JSON.parse(result.content));
        if (reports.length < WORKERS)
          return { latencyMs, toolCalls: [{ name: 'read_messages', args: { wait_secs: 30 } }] };
        return { latencyMs, text: `all ${WORKERS} parts written` };
      }
      const n = address.split('-')[1];
      if (step === 0)
        return {
          latencyMs,
          toolCalls: [{ name: 'write_file', args: { path: `part-${n}.txt`, content: `part ${n}\n` } }],
        };
      if (step === 1)
        return { latencyMs, toolCalls: [{ name: 'write_file', args: { path: `secrets/${n}.txt`, content: 'x\n' } }] };
      return { latencyMs, text: `part ${n} written` };
    });
    later(() => server.close());
    const provider = OpenAI.create({ model: 'scripted', baseUrl: `${server.url}/v1`, apiKey: 'k' });
    const { supervisor, store } = await supervised({ maxConcurrentAgents: 3 });
    const page = await viewer(store, { pollMs: 100 });
    later(() => page.close());
    const browser = await launchChromium();
    later(() => browser.close());
    const tab = await browser.newPage({ viewport: { width: 1280, height: 900 } });

    const root = tempWorkspace({ 'README.md': 'parts\n' });
    const handle = supervisor.run({
      contract: TaskContract.workspace('write the parts', root),
      provider,
      policy: Policy.default().layer('app').denyWrite('secrets/**'),
    });
    for await (const event of supervisor.events({ rootId: handle.rootId })) if (event.type === 'run-start') break;
    await tab.goto(`${page.url}#/tree/${handle.rootId}`);
    await tab.locator('[data-run]').first().waitFor();
    const first = await tab.locator('[data-run]').count();
    // The tree grows as the page watches, and every agent reaches finished.
    await tab.waitForFunction((total) => document.querySelectorAll('[data-run]').length === total, WORKERS + 1, {
      timeout: 60_000,
    });
    await tab.screenshot({ path: join(ARTIFACTS, 'tree-growing.png'), fullPage: true });
    await tab.waitForFunction(
      (total) => document.querySelectorAll('[data-run][data-run-status="finished"]').length === total,
      WORKERS + 1,
      { timeout: 60_000 },
    );
    const result = await handle.result;
    expect(result.status).toBe('finished');
    expect(first).toBeLessThan(WORKERS + 1);
    await tab.screenshot({ path: join(ARTIFACTS, 'tree-finished.png'), fullPage: true });
    const addresses = await tab.locator('[data-run] a').allTextContents();
    expect(addresses.sort()).toEqual(['root', ...Array.from({ length: WORKERS }, (_, i) => `worker-${i + 1}`)].sort());
    // The root's own spend, and beside it the whole tree's (its agents below included): the ledger's.
    const ledger = (await store.ledger(handle.rootId))?.root.spent;
    const rootRow = tab.locator(`[data-run="${handle.rootId}"]`);
    expect(await rootRow.locator('[data-subtree]').textContent()).toContain(
      `with the agents below: ${ledger?.steps} steps · ${ledger?.tokens} tokens`,
    );

    // The first paint is the server's: with no script at all the page shows the tree, not "Loading…".
    const still = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1280, height: 900 } });
    later(() => still.close());
    const bare = await still.newPage();
    await bare.goto(`${page.url}tree/${handle.rootId}`);
    expect(await bare.locator('[data-run]').count()).toBe(WORKERS + 1);
    expect(await bare.locator('body').textContent()).not.toContain('Loading');
    expect(await bare.locator(`[data-run="${handle.rootId}"] [data-subtree]`).textContent()).toContain(
      `${ledger?.steps} steps`,
    );
    await bare.screenshot({ path: join(ARTIFACTS, 'first-paint.png'), fullPage: true });
    // With the script, the same path is taken over by the page with nothing in between: no "Loading…" at its first paint.
    const live = await browser.newPage();
    later(() => live.close());
    await live.goto(`${page.url}tree/${handle.rootId}`, { waitUntil: 'commit' });
    await live.locator('[data-run]').first().waitFor();
    expect(await live.locator('body').textContent()).not.toContain('Loading');
    // The page's own view (its ledger line is not in the server's paint) has taken over, at the same path.
    await live.getByText('Ledger:').waitFor();
    expect(await live.locator('[data-run]').count()).toBe(WORKERS + 1);
    expect(await live.locator('[data-subtree]').count()).toBe(1);

    // One agent's run: its steps, its diff, its refusal with rule and layer.
    await tab.locator('[data-run] a', { hasText: 'worker-2' }).click();
    await tab.locator('[data-diff]').waitFor();
    expect(await tab.locator('[data-diff]').textContent()).toContain('+part 2');
    const refusal = await tab.locator('[data-refusal]').first().textContent();
    expect(refusal).toMatch(/refused write_file: rule deny-write secrets\/\*\*, layer app/);
    expect(await tab.locator('[data-step]').count()).toBe(3);
    expect(await tab.locator('[data-model-call]').count()).toBeGreaterThanOrEqual(3);
    await tab.screenshot({ path: join(ARTIFACTS, 'run.png'), fullPage: true });

    // The list of trees has it, and the page loaded nothing from anywhere but itself.
    const outside: string[] = [];
    tab.on('request', (sent) => {
      if (!sent.url().startsWith(page.url)) outside.push(sent.url());
    });
    await tab.goto(page.url);
    await tab.locator(`[data-tree="${handle.rootId}"]`).waitFor();
    expect(outside).toEqual([]);
    // A stream starts from now: the tree's history is not replayed to a page that read /api already.
    const streamed = await new Promise<string>((resolve, reject) => {
      const target = new URL(`${page.url}api/events`);
      const sent = request({ host: target.hostname, port: target.port, path: target.pathname }, (response) => {
        let body = '';
        response.on('data', (chunk) => {
          body += chunk;
        });
        setTimeout(() => {
          response.destroy();
          resolve(body);
        }, 400);
      });
      sent.on('error', reject);
      sent.end();
    });
    expect((await store.treeEvents(handle.rootId)).length).toBeGreaterThan(50);
    expect(streamed).toBe('retry: 1000\n\n');
    for (const shot of ['tree-growing.png', 'tree-finished.png', 'run.png', 'first-paint.png'])
      expect(statSync(join(ARTIFACTS, shot)).size).toBeGreaterThan(10_000);
  });

  it('answers GET under its token on loopback names only, serves its own files only, and writes nothing', async () => {
    const { location, store } = await supervised();
    // What a write would change: the file's bytes, or every table's rows on PostgreSQL.
    const written = async () =>
      SUITE_BACKEND.name === 'SQLite'
        ? readFileSync(location).toString('base64')
        : JSON.stringify(
            await sqlRows(location, `SELECT relname, n_live_tup FROM pg_stat_user_tables ORDER BY relname`).then(
              async (tables) => {
                const out: Record<string, unknown> = {};
                for (const table of tables)
                  out[String(table.relname)] = (
                    await sqlRows(location, `SELECT COUNT(*) AS n FROM ${table.relname}`)
                  )[0]?.n;
                return out;
              },
            ),
          );
    const before = await written();
    const page = await viewer(store);
    later(() => page.close());
    const base = new URL(page.url).pathname; // /<token>/
    expect((await raw(page.url, { path: `${base}api/trees` })).status).toBe(200);
    // Without the token, or with another, there is nothing to read.
    for (const path of [
      '/api/trees',
      '/',
      `/${'x'.repeat(base.length - 2)}/api/trees`,
      `${base.slice(0, -2)}/api/trees`,
    ])
      expect((await raw(page.url, { path })).status, path).toBe(404);
    expect((await raw(page.url, { method: 'POST', path: `${base}api/trees` })).status).toBe(405);
    expect((await raw(page.url, { host: 'attacker.example:80', path: `${base}api/trees` })).status).toBe(403);
    for (const path of [
      '../../package.json',
      '%2e%2e/%2e%2e/package.json',
      '..%2f..%2fpackage.json',
      'server.js',
      'api/run/nope',
    ])
      expect((await raw(page.url, { path: `${base}${path}` })).status, path).toBe(404);
    const index = await raw(page.url, { path: base });
    expect(index.body).toContain('<div id="app">');
    // Painted on the server, with the data it was painted from beside it; a tree that is not there says so.
    expect(index.body).toContain('data-trees');
    expect(index.body).toContain('<script type="application/json" id="first-paint">');
    const absent = await raw(page.url, { path: `${base}tree/no-such-tree` });
    expect(absent.status).toBe(200);
    expect(absent.body).toContain('no tree no-such-tree');
    // The icon: where the page names it, and where a browser asks the origin for one.
    expect(index.body).toContain('rel="icon"');
    for (const path of [`${base}favicon.svg`, '/favicon.ico']) {
      const icon = await raw(page.url, { path });
      expect(icon.status, path).toBe(200);
      expect(icon.body).toContain('<svg');
    }
    // A malformed escape is the client's error, not the server's.
    expect((await raw(page.url, { path: `${base}%` })).status).toBe(400);
    expect(
      (await raw(page.url, { path: '/%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9/' }))
        .status,
    ).toBe(404);
    // A connection that never sends a request does not keep close() waiting.
    const silent = await viewer(store);
    const socket = connect(Number(new URL(silent.url).port), '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    await silent.close();
    socket.destroy();
    await expect(viewer(store, { host: '0.0.0.0' })).rejects.toThrow(/not a loopback address/);
    await expect(viewer(join(tempWorkspace(), 'none.db'))).rejects.toThrow(/there is no store/);
    expect(await written()).toEqual(before);
  });
});

describe("the viewer's first paint", () => {
  it("writes every text as text: markup escaped, the data intact, a `$'` or `$&` not taken for a pattern", async () => {
    const { withFirstPaint } = await import('../dist/viewer/first-paint.js');
    const task = "print it with $'a\\nb', then $& and $` </script><img src=x onerror=alert(1)>";
    const tree = {
      runId: 'r1',
      parentId: null,
      address: 'root',
      depth: 0,
      status: 'finished',
      task,
      spent: { steps: 1, tokens: 2 },
      ceilings: null,
      runs: 1,
    };
    const view = { kind: 'trees' as const, id: null, api: 'api/trees', data: { total: 1, trees: [tree] } };
    const page = withFirstPaint('<html><head></head><body><div id="app"></div></body></html>', view, '/token/');
    expect(page).not.toContain('<img src=x');
    expect(page).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(page).toContain('<base href="/token/" />');
    const json = /<script type="application\/json" id="first-paint">([\s\S]*?)<\/script>/.exec(page)?.[1] as string;
    expect(JSON.parse(json)).toEqual(view);
    // Exactly one script element: the task's own `</script>` did not end it early.
    expect(page.match(/<\/script>/g)).toHaveLength(1);
  });
});
