/**
 * The viewer's timeline of a 1,000-agent tree in headless Chromium: a bar per agent (the
 * queue before its start, its steps as ticks, its colour its status), a chart of agents at
 * work and tokens over time, only the rows in view in the page, answering a filter and a
 * scroll while the tree is live (its agents held at their second model call by the test),
 * then every bar finished. Screenshots are kept in test-artifacts/viewer-timeline/.
 */
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Store, Supervisor } from '../dist/index.js';
import { assistantTurns, ScriptedModelServer } from '../dist/testing/index.js';
import { viewer } from '../dist/viewer/server.js';
import { launchChromium } from './support/chromium.js';
import { tempStorePath } from './support/processes.js';
import { later } from './support/workspace.js';

const ARTIFACTS = fileURLToPath(new URL('../test-artifacts/viewer-timeline/', import.meta.url));
const AGENTS = 1000;
/** The page's document, as the functions run in it use it. */
declare const document: { querySelector(selector: string): { getAttribute(name: string): string | null } | null };

describe('the timeline of a tree', () => {
  it('draws 1,000 agents with a screenful of rows, answers while the tree grows, and shows them all finish', {
    timeout: 240_000,
  }, async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const model = await ScriptedModelServer.start(
      (call) => {
        const step = assistantTurns(call);
        if (call.agent === 'root')
          return step === 0
            ? {
                toolCalls: Array.from({ length: AGENTS }, (_, i) => ({
                  name: 'spawn_agent',
                  args: { task: `part ${i + 1}`, as: `c${i + 1}`, wait: false },
                })),
              }
            : { text: 'asked for every part' };
        // Each agent takes a step, then waits at its second call until the test lets it answer.
        if (step === 0)
          return { toolCalls: [{ name: 'read_messages', args: {} }], usage: { inputTokens: 50, outputTokens: 5 } };
        return released.then(() => ({ text: `${call.agent} done`, usage: { inputTokens: 60, outputTokens: 4 } }));
      },
      { keepCalls: false },
    );
    later(() => model.close());
    const store = await Store.open(tempStorePath());
    later(() => store.close());
    const supervisor = await Supervisor.start(store, { maxTotalAgents: AGENTS, maxConcurrentAgents: 100 });
    later(() => supervisor.close());
    const page = await viewer(store, { pollMs: 100 });
    later(() => page.close());
    const browser = await launchChromium();
    later(() => browser.close());
    const tab = await browser.newPage({ viewport: { width: 1280, height: 900 } });

    const handle = supervisor.run({ task: 'do every part', provider: model.provider(), maxTotalAgents: AGENTS });
    for await (const event of supervisor.events({ rootId: handle.rootId })) if (event.type === 'spawn-queued') break;
    await tab.goto(`${page.url}#/timeline/${handle.rootId}`);
    await tab.locator('[data-timeline]').waitFor();
    // The tree grows to every agent while the page watches; they are held, so it stays live.
    await tab.waitForFunction(
      (total) => document.querySelector('[data-timeline]')?.getAttribute('data-agents') === String(total),
      AGENTS + 1,
      { timeout: 120_000 },
    );
    expect(await tab.locator('[data-live]').count()).toBe(1);
    // A screenful of rows in the page, not a thousand; running bars and queued ones both there.
    const rows = await tab.locator('[data-timeline-row]').count();
    expect(rows).toBeGreaterThan(10);
    expect(rows).toBeLessThan(100);
    await tab.locator('[data-bar-status="running"]').first().waitFor();
    expect(await tab.locator('.tl-queued').count()).toBeGreaterThan(0);
    expect(await tab.locator('[data-chart] polyline').count()).toBe(2);
    await tab.screenshot({ path: join(ARTIFACTS, 'live.png') });

    // Answered while live: a scroll to the end brings the last agents into the page, a filter narrows the rows.
    await tab.locator('[data-timeline-scroll]').evaluate((element) => {
      (element as unknown as { scrollTop: number; scrollHeight: number }).scrollTop = (
        element as unknown as { scrollHeight: number }
      ).scrollHeight;
    });
    await tab.locator('[data-timeline-row="c1000"]').waitFor();
    await tab.fill('[data-timeline-filter]', 'c99');
    await tab.locator('[data-timeline-row="c999"]').waitFor();
    // c99 and c990 to c999.
    await expect.poll(() => tab.locator('[data-timeline-row]').count(), { timeout: 30_000 }).toBe(11);
    expect(await tab.locator('[data-bar]').first().getAttribute('title')).toMatch(
      /^c99\d?: \w+, \d+ steps, \d+ tokens/,
    );
    await tab.fill('[data-timeline-filter]', '');

    // Let every agent answer: every bar finishes, and the page says the tree is no longer live.
    release();
    const result = await handle.result;
    expect(result).toMatchObject({ status: 'finished', runs: AGENTS + 1 });
    await tab.locator('[data-live]').waitFor({ state: 'detached', timeout: 120_000 });
    await tab.locator('[data-timeline-scroll]').evaluate((element) => {
      (element as unknown as { scrollTop: number }).scrollTop = 0;
    });
    await expect
      .poll(() => tab.locator('[data-bar-status]:not([data-bar-status="finished"])').count(), { timeout: 30_000 })
      .toBe(0);
    expect(await tab.locator('[data-timeline-row]').count()).toBeLessThan(100);
    await tab.screenshot({ path: join(ARTIFACTS, 'finished.png') });
    for (const shot of ['live.png', 'finished.png'])
      expect(statSync(join(ARTIFACTS, shot)).size).toBeGreaterThan(10_000);
  });
});
