/**
 * A web page, as built-in tools of a workspace run whose contract asks for a browser
 * (`withBrowser`): `browser_open`, `browser_click`, `browser_type`, `browser_scroll`,
 * `browser_text` and `browser_screenshot`, on the run's one page (../../browser/run-browser.ts).
 *
 * The model gives a URL (http or https; about:blank), a selector (CSS, or Playwright's
 * `text=…`) and text; nothing of the harness's own reaches the page. Every request the
 * page makes is decided before it leaves and again at the egress proxy; each answer
 * carries what the page said on its console, its uncaught errors and the requests that
 * were refused since the last call. A call has the browser's deadline (`timeoutSecs`).
 */
import type { ArgumentSchema } from '../../arguments.js';
import { proxyRefusal, type RunBrowser } from '../../browser/run-browser.js';
import { MAX_IMAGE_BYTES } from '../../images.js';
import type { WorkspaceSession } from '../../workspace/session.js';
import type { StepContext, ToolResult } from '../tool.js';
import type { WorkspaceToolDeclaration } from './workspace.js';

export type BrowserToolName =
  | 'browser_open'
  | 'browser_click'
  | 'browser_type'
  | 'browser_scroll'
  | 'browser_text'
  | 'browser_screenshot';

/** The most characters of a page's text one answer shows. */
const MAX_TEXT_CHARS = 20_000;

const SELECTOR: ArgumentSchema = {
  type: 'string',
  minLength: 1,
  maxLength: 1000,
  description: "Which element: a CSS selector, or text=… for the element with that text (Playwright's selectors).",
};

/** Where the page is: its address and title. */
async function where(page: import('playwright-core').Page): Promise<string> {
  const title = await page.title().catch(() => '');
  return `${page.url()}${title ? ` — ${title}` : ''}`;
}

/** A result with what the page said and what was refused since the last call after it. */
function withNotes(browser: RunBrowser, result: ToolResult): ToolResult {
  const notes = browser.takeNotes();
  return notes.length === 0 ? result : { ...result, content: `${result.content}\n\n${notes.join('\n')}` };
}

/**
 * One call on the page: the browser started at the first, the call held to the deadline,
 * and a failure (a selector that matches nothing, a page that does not load) an error
 * that says what, with what the page said.
 */
async function onPage(
  session: WorkspaceSession,
  args: Record<string, unknown>,
  call: StepContext,
  tool: BrowserToolName,
  act: (page: import('playwright-core').Page, browser: RunBrowser) => Promise<ToolResult>,
): Promise<ToolResult> {
  const browser = session.browser;
  if (!browser) return { content: 'this run has no browser (withBrowser on the contract turns it on).', isError: true };
  const why = browser.whyNot;
  if (why !== null) return { content: why, isError: true };
  const attempt = async (): Promise<ToolResult> => {
    browser.origin = { callId: call.callId, tool };
    try {
      const page = await browser.page();
      return withNotes(browser, await act(page, browser));
    } catch (error) {
      const message = ((error as Error).message ?? String(error)).split('\n')[0] as string;
      return withNotes(browser, { content: `the browser could not do that: ${message}`, isError: true });
    } finally {
      browser.origin = null;
    }
  };
  // What a page does when it is opened, clicked or typed into cannot be looked at or undone:
  // journaled, so a crash in the middle of it pauses the resumed run for a person instead of doing it twice.
  return BROWSER_TOOLS[tool].kind === 'acts' ? call.intent(tool, JSON.stringify(args), attempt) : attempt();
}

export const BROWSER_TOOLS: Record<BrowserToolName, WorkspaceToolDeclaration> = {
  browser_open: {
    description:
      "Opens a web page (http or https) in the run's browser and says where it landed: its address and title, then what its console said. Use browser_text to read it.",
    parameters: {
      type: 'object',
      properties: { url: { type: 'string', minLength: 1, maxLength: 4096, description: 'The page: an http(s) URL.' } },
      required: ['url'],
      additionalProperties: false,
    },
    kind: 'acts',
    run: (session, args, call) =>
      onPage(session, args, call, 'browser_open', async (page, browser) => {
        const url = args.url as string;
        if (url !== 'about:blank') {
          const verdict = browser.check(url);
          if (verdict)
            return {
              content: `${url} was not opened: ${verdict.reason} (rule ${verdict.rule}, ${verdict.layer}).`,
              isError: true,
              refusal: verdict,
            };
        }
        const response = await page.goto(url, { waitUntil: 'load' });
        const refused = response ? proxyRefusal(response) : null;
        if (refused !== null)
          return {
            content: `${url} was not opened: the egress proxy refused ${response?.url() ?? url} (rule ${refused}; the trace has the decision).`,
            isError: true,
          };
        const status = response ? ` (HTTP ${response.status()})` : '';
        return { content: `opened ${await where(page)}${status}`, isError: false };
      }),
  },
  browser_click: {
    description: 'Clicks an element of the page, then says where the page is.',
    parameters: {
      type: 'object',
      properties: { selector: SELECTOR },
      required: ['selector'],
      additionalProperties: false,
    },
    kind: 'acts',
    run: (session, args, call) =>
      onPage(session, args, call, 'browser_click', async (page) => {
        await page
          .locator(args.selector as string)
          .first()
          .click();
        await page.waitForLoadState('load').catch(() => undefined);
        return { content: `clicked ${args.selector as string}; now at ${await where(page)}`, isError: false };
      }),
  },
  browser_type: {
    description: 'Types text into a field of the page (what it held is replaced); with submit, presses Enter after it.',
    parameters: {
      type: 'object',
      properties: {
        selector: SELECTOR,
        text: { type: 'string', maxLength: 100_000, description: 'What to type.' },
        submit: { type: 'boolean', description: 'Press Enter after typing (default false).' },
      },
      required: ['selector', 'text'],
      additionalProperties: false,
    },
    kind: 'acts',
    run: (session, args, call) =>
      onPage(session, args, call, 'browser_type', async (page) => {
        const field = page.locator(args.selector as string).first();
        await field.fill(args.text as string);
        if (args.submit === true) {
          await field.press('Enter');
          await page.waitForLoadState('load').catch(() => undefined);
        }
        return {
          content: `typed into ${args.selector as string}${args.submit === true ? ' and pressed Enter' : ''}; now at ${await where(page)}`,
          isError: false,
        };
      }),
  },
  browser_scroll: {
    description:
      'Scrolls the page down (or, with up, up) by a screen or the pixels given, and says how far down it is.',
    parameters: {
      type: 'object',
      properties: {
        up: { type: 'boolean', description: 'Scroll up rather than down.' },
        pixels: { type: 'integer', minimum: 1, description: 'How far (default: a screen, 800 pixels).' },
      },
      additionalProperties: false,
    },
    kind: 'acts',
    run: (session, args, call) =>
      onPage(session, args, call, 'browser_scroll', async (page) => {
        const by = Math.min((args.pixels as number | undefined) ?? 800, 1_000_000);
        const delta = args.up === true ? -by : by;
        // Run in the page (whose globals this file does not type): the scroll, then where it is.
        const at = (await page.evaluate(
          `(() => { window.scrollBy(0, ${delta}); return { y: Math.round(window.scrollY), height: document.documentElement.scrollHeight }; })()`,
        )) as { y: number; height: number };
        return {
          content: `scrolled ${args.up === true ? 'up' : 'down'}: ${at.y} of ${at.height} pixels down`,
          isError: false,
        };
      }),
  },
  browser_text: {
    description: 'The text of the page as it is rendered now (what a person would read), with its address and title.',
    parameters: { type: 'object', properties: {}, additionalProperties: false },
    kind: 'reads',
    run: (session, args, call) =>
      onPage(session, args, call, 'browser_text', async (page) => {
        // Cut in the page: a page of megabytes is not copied whole to be cut here.
        const read = (await page.evaluate(
          `(() => { const text = document.body ? document.body.innerText : ''; return { text: text.slice(0, ${MAX_TEXT_CHARS}), length: text.length }; })()`,
        )) as { text: string; length: number };
        const text = read.text.trim();
        const shown =
          read.length > MAX_TEXT_CHARS
            ? `${text}\n(the page's text goes on: ${read.length} characters; scroll, or open a part of it)`
            : text;
        return { content: `${await where(page)}\n\n${shown || '(the page shows no text)'}`, isError: false };
      }),
  },
  browser_screenshot: {
    description: 'A picture of the page as it is shown (PNG); with full_page, the whole length of it.',
    parameters: {
      type: 'object',
      properties: { full_page: { type: 'boolean', description: 'The whole page, not only what fits the window.' } },
      additionalProperties: false,
    },
    kind: 'reads',
    run: (session, args, call) =>
      onPage(session, args, call, 'browser_screenshot', async (page) => {
        const png = await page.screenshot({ type: 'png', fullPage: args.full_page === true });
        if (png.length > MAX_IMAGE_BYTES)
          return {
            content: `the screenshot is ${png.length} bytes, above the ${MAX_IMAGE_BYTES} an image may be: take it without full_page, or scroll and take another.`,
            isError: true,
          };
        return {
          content: `a screenshot of ${await where(page)} (${png.length} bytes of PNG)`,
          isError: false,
          images: [{ mimeType: 'image/png', data: png.toString('base64') }],
        };
      }),
  },
};
