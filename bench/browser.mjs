// node bench/browser.mjs — what opening a page and reading its text costs through the run's
// browser, beside a bare playwright-core script doing the same with the same Chromium, in
// the same run. The page is a small one on a loopback server. Through the harness:
// RunBrowser (Chromium wrapped for the bubblewrap rung in the system's view, every
// connection through the run's egress proxy and decided by the policy, every request seen
// paused by the route check). Bare: chromium.launch with playwright's own switches, no
// route, no proxy. Each side starts its browser (the start: launch to the first text read),
// is warmed with BENCH_WARMUP (5) opens, then opens the page and reads its text
// BENCH_OPENS (30) times; medians. The two sides alternate, BENCH_PASSES (3) times.
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Policy } from 'io-harness';
import { chromium } from 'playwright-core';
import { findChromium } from '../dist/runtime/browser/browser.js';
import { BROWSER_SANDBOX, openBrowser, RunBrowser } from '../dist/runtime/browser/run-browser.js';
import { executorFor } from '../dist/runtime/exec/factory.js';
import { tempDir } from './support/temp.mjs';

const OPENS = Number(process.env.BENCH_OPENS ?? 30);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 5);
const PASSES = Number(process.env.BENCH_PASSES ?? 3);
// The page is on loopback, below the address floor.
process.env.IO_HARNESS_ALLOW_LOCAL_ADDRESSES = '1';

const server = createServer((_request, response) => {
  response.setHeader('content-type', 'text/html');
  response.end('<!doctype html><title>Bench</title><h1>A page</h1><p>Some text to read.</p>');
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${server.address().port}/`;
const found = findChromium({ timeoutSecs: 30 });
if (!('path' in found)) throw new Error(found.missing);

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function timed(open) {
  const started = performance.now();
  const page = await open();
  await page.goto(url, { waitUntil: 'load' });
  await page.locator('body').innerText();
  const first = performance.now() - started;
  const each = [];
  for (let i = 0; i < WARMUP + OPENS; i++) {
    const at = performance.now();
    await page.goto(url, { waitUntil: 'load' });
    await page.locator('body').innerText();
    if (i >= WARMUP) each.push(performance.now() - at);
  }
  return { first, open: median(each) };
}

async function harness() {
  const root = tempDir('io-harness-bench-browser-');
  const policy = Policy.default().layer('bench').allowNet('127.0.0.1');
  const gate = { decide: async () => ({ ok: true }), refused: () => undefined };
  // As a run makes it: an executor of its own on an empty root, nothing of the workspace.
  const browser = new RunBrowser({ timeoutSecs: 30 }, root, policy, gate, () =>
    openBrowser(
      (anchor) => executorFor({ purpose: 'run', root: anchor, sandbox: { ...BROWSER_SANDBOX }, policy, egress: gate }),
      { PATH: process.env.PATH },
    ),
  );
  try {
    return await timed(() => browser.page());
  } finally {
    await browser.close();
  }
}

async function bare() {
  const browser = await chromium.launch({ executablePath: found.path, args: ['--no-sandbox'] });
  try {
    return await timed(async () => (await browser.newContext()).newPage());
  } finally {
    await browser.close();
  }
}

const rows = { harness: [], bare: [] };
for (let pass = 0; pass < PASSES; pass++) {
  rows.bare.push(await bare());
  rows.harness.push(await harness());
}
const show = (name) => {
  const first = median(rows[name].map((row) => row.first));
  const open = median(rows[name].map((row) => row.open));
  return { first, open };
};
const ours = show('harness');
const theirs = show('bare');
console.log(`chromium: ${found.path}; ${OPENS} opens a side, ${PASSES} passes`);
console.log(`start to the first text read: harness ${ours.first.toFixed(0)} ms, bare ${theirs.first.toFixed(0)} ms`);
console.log(
  `open and read a page: harness ${ours.open.toFixed(2)} ms, bare ${theirs.open.toFixed(2)} ms (${(ours.open / theirs.open).toFixed(2)}x)`,
);
server.close();
