/**
 * A chat page built with `@ai-sdk/react`'s useChat (examples/chat) talking to an
 * io-harness session through the AI SDK's UI message stream, in headless Chromium: a
 * two-turn conversation with a tool call, the page reloaded from the session's id and
 * rendered from the store, and then a turn whose server process is killed (SIGKILL)
 * mid-turn, restarted, and reconnected to by the page, which sees the turn finish once:
 * no text doubled, no model call repeated for the step that had committed. The server is
 * a real child process; the model is the scripted server on loopback, on OpenAI's wire.
 * Screenshots are kept in test-artifacts/chat/.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lastUserText, type ScriptedCall, ScriptedModelServer } from '../dist/testing/index.js';
import { buildChatPage, startChatServer } from './support/chat.js';
import { launchChromium } from './support/chromium.js';
import { closedPort } from './support/wire.js';

const ARTIFACTS = fileURLToPath(new URL('../test-artifacts/chat/', import.meta.url));
/** The page's document, as the functions run in it use it (this file is not compiled against the DOM's types). */
declare const document: {
  body: { textContent: string };
  querySelector(selector: string): { getAttribute(name: string): string | null } | null;
};

let dir: string;
let page: string;
let model: ScriptedModelServer;
/** Released by the test: the shed turn's second step answers only once its server was killed and restarted. */
let shedStepTwo = 0;
/** What the chat server processes wrote to stderr, for a failure's message. */
const serverSaid: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'io-harness-chat-'));
  mkdirSync(ARTIFACTS, { recursive: true });
  page = buildChatPage(dir);
  model = await ScriptedModelServer.start((call) => {
    const asked = lastUserText(call);
    const step = stepOf(call);
    if (asked.includes('grows')) {
      return step === 0
        ? { text: 'Let me look.', toolCalls: [{ name: 'look_up', args: { place: 'north' } }] }
        : { text: 'The north bed has tomatoes and basil.' };
    }
    if (asked.includes('water')) return { text: 'Tomatoes need the most water.' };
    if (asked.includes('shed')) {
      if (step === 0) return { text: 'Checking the shed.', toolCalls: [{ name: 'look_up', args: { place: 'shed' } }] };
      // The first time the second step is asked, the server is killed while the model "thinks".
      shedStepTwo++;
      return shedStepTwo === 1 ? { fault: 'hang' } : { text: 'The shed has a rake and a spade.' };
    }
    return { text: `unexpected: ${asked}` };
  });
});

afterAll(async () => {
  await model?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Which step of its turn a request is for: the assistant messages since the user's last words. */
function stepOf(call: ScriptedCall): number {
  const messages = (call.body as { messages?: { role: string }[] }).messages ?? [];
  const lastUser = messages.map((message) => message.role).lastIndexOf('user');
  return messages.slice(lastUser + 1).filter((message) => message.role === 'assistant').length;
}

/** Starts the example's server as a child process on `port`; resolves once it listens. */
function startServer(port: number): Promise<ChildProcess> {
  return startChatServer({ store: join(dir, 'chat.db'), port, page, modelUrl: model.url, said: serverSaid });
}

async function stop(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  await exited;
}

describe('a useChat page on an io-harness session', () => {
  it('talks, reloads from the session, and sees a turn killed mid-way finish once after a restart', async () => {
    const port = await closedPort();
    let server = await startServer(port);
    const browser = await launchChromium();
    try {
      const tab = await browser.newPage({ viewport: { width: 900, height: 900 } });
      const said: string[] = [];
      tab.on('pageerror', (error) => said.push(`page error: ${error.message}`));
      tab.on('console', (message) => said.push(`console ${message.type()}: ${message.text()}`));
      await tab.goto(`http://127.0.0.1:${port}/`);
      const ask = async (text: string) => {
        await tab.fill('#ask', text);
        await tab.press('#ask', 'Enter');
      };
      // A wait that fails says what the page showed and said.
      const shows = (text: string) =>
        tab
          .waitForFunction((wanted) => document.body.textContent.includes(wanted), text, { timeout: 60_000 })
          .catch(async (error: Error) => {
            const body = await tab.evaluate(() => document.body.textContent).catch(() => '(unreadable)');
            throw new Error(
              `${error.message}\nthe page shows:\n${body}\nit said:\n${said.join('\n')}\nthe server said:\n${serverSaid.join('')}`,
            );
          });
      const ready = () =>
        tab.waitForFunction(() => document.querySelector('#status')?.getAttribute('data-status') === 'ready', null, {
          timeout: 60_000,
        });

      // Two turns: the first calls the tool, the second is a reply that reads the first.
      await ask('What grows in the north bed?');
      await shows('The north bed has tomatoes and basil.');
      await ready();
      await ask('Which of those needs the most water?');
      await shows('Tomatoes need the most water.');
      await ready();
      const tool = tab.locator('[data-tool="look_up"]');
      expect(await tool.first().textContent()).toContain('look_up({"place":"north"}) → tomatoes and basil');
      await tab.screenshot({ path: join(ARTIFACTS, 'two-turns.png'), fullPage: true });

      // Reloaded from the session's id (kept in the address): the conversation, from the store.
      const address = tab.url();
      expect(address).toMatch(/\?chat=/);
      await tab.reload();
      await shows('Tomatoes need the most water.');
      const roles = await tab
        .locator('[data-role]')
        .evaluateAll((nodes) => nodes.map((node) => (node as unknown as { dataset: { role: string } }).dataset.role));
      expect(roles).toEqual(['user', 'assistant', 'user', 'assistant']);
      expect(await tab.locator('[data-tool="look_up"]').count()).toBe(1);
      await tab.screenshot({ path: join(ARTIFACTS, 'reloaded.png'), fullPage: true });

      // A turn whose server is killed after its first step committed, while its second waits on the model.
      await ask('What is in the shed?');
      await shows('Checking the shed.');
      await expect.poll(() => shedStepTwo, { timeout: 60_000 }).toBe(1);
      await stop(server, 'SIGKILL');
      await tab.waitForFunction(
        () => document.querySelector('#status')?.getAttribute('data-status') === 'error',
        null,
        {
          timeout: 60_000,
        },
      );
      await tab.screenshot({ path: join(ARTIFACTS, 'server-gone.png'), fullPage: true });
      server = await startServer(port);
      // The page reconnects by itself and sees the turn to its end.
      await shows('The shed has a rake and a spade.');
      await ready();
      await tab.screenshot({ path: join(ARTIFACTS, 'resumed.png'), fullPage: true });
      const text = await tab.evaluate(() => document.body.textContent);
      expect(text.split('Checking the shed.').length - 1).toBe(1);
      expect(text.split('The shed has a rake and a spade.').length - 1).toBe(1);
      expect(text.split('look_up({"place":"shed"}) → a rake and a spade').length - 1).toBe(1);
      // The step that had committed was not asked again: one request for the shed turn's first step.
      const shedFirstSteps = model.calls.filter((call) => {
        const body = call.body as { messages?: { role: string; content?: unknown }[] };
        const users = (body.messages ?? []).filter((message) => message.role === 'user');
        return String(users.at(-1)?.content ?? '').includes('shed') && body.messages?.at(-1)?.role === 'user';
      });
      expect(shedFirstSteps).toHaveLength(1);
      // And a reload after it shows the same conversation, the shed turn once.
      await tab.reload();
      await shows('The shed has a rake and a spade.');
      const after = await tab.evaluate(() => document.body.textContent);
      expect(after.split('The shed has a rake and a spade.').length - 1).toBe(1);
    } finally {
      await browser.close();
      await stop(server, 'SIGTERM');
    }
  });
});
